from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.urls import include, path
from drf_spectacular.views import SpectacularSwaggerView

from . import views, webhooks

urlpatterns = [
    path("", views.home, name="home"),
    path("favicon.ico", views.favicon, name="favicon"),
    # The site's own login: the admin's login page admits staff only, and the demo's second user
    # is not staff.
    path(
        "accounts/login/",
        auth_views.LoginView.as_view(template_name="login.html", next_page="home"),
        name="login",
    ),
    path("admin/", admin.site.urls),
    # The demo's webhook receiver (ahentic_site/webhooks.py): POST receives, GET lists.
    path("demo/webhooks/", webhooks.receiver, name="demo-webhooks"),
    path("ahentic/v1/", include("orchestrator_app.urls")),
    # The root /.well-known/ documents MCP clients probe (OAuth for the MCP endpoint).
    path("", include("orchestrator_app.oauth.urls")),
    # Swagger UI over the API's schema (GET ahentic/v1/schema).
    path(
        "api-docs/",
        login_required(SpectacularSwaggerView.as_view(url_name="ahentic:schema")),
        name="api-docs",
    ),
]
