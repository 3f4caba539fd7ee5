from django.contrib import admin
from django.contrib.auth.decorators import login_required
from django.urls import include, path
from drf_spectacular.views import SpectacularSwaggerView

from . import views

urlpatterns = [
    path("", views.home, name="home"),
    path("admin/", admin.site.urls),
    path("ahentic/v1/", include("orchestrator_app.urls")),
    # Swagger UI over the API's schema (GET ahentic/v1/schema).
    path(
        "api-docs/",
        login_required(SpectacularSwaggerView.as_view(url_name="ahentic:schema")),
        name="api-docs",
    ),
]
