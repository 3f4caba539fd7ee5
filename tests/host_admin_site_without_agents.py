"""A URLconf with a second ``AdminSite``, ``ops``, that registers sessions but not the agents'
admin, as a host may (tests/features/agents/test_agents_admin.py, ``pytest.mark.urls``)."""

from django.contrib import admin
from django.urls import path

from ahentic_site.urls import urlpatterns as site_urlpatterns
from sessions_app.admin import SessionAdmin
from sessions_app.models import Session

ops_site = admin.AdminSite(name="ops")
ops_site.register(Session, SessionAdmin)

urlpatterns = [*site_urlpatterns, path("ops/", ops_site.urls)]
