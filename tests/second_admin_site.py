"""A URLconf with a second ``AdminSite``, ``ops``, on which a host registers the app's models
beside the default admin (tests/admin_site/test_admin.py, ``pytest.mark.urls``)."""

from django.contrib import admin
from django.urls import path

from ahentic_site.urls import urlpatterns as site_urlpatterns

ops_site = admin.AdminSite(name="ops")
for model, model_admin in admin.site._registry.items():
    if model._meta.app_label in ("sessions_app", "orchestrator_app", "artifacts_app"):
        ops_site.register(model, type(model_admin))

urlpatterns = [*site_urlpatterns, path("ops/", ops_site.urls)]
