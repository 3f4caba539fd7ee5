from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("ahentic/v1/", include("orchestrator_app.urls")),
]
