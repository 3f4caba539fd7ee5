"""A URLconf with a second ``AdminSite``, ``pages``, on which a host registers flat pages and
users beside the default admin, with the stale change-form guard (tests/site/test_first_hour.py,
``pytest.mark.urls``)."""

from django.contrib import admin
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.models import User
from django.contrib.flatpages.admin import FlatPageAdmin
from django.contrib.flatpages.models import FlatPage
from django.urls import path

from ahentic_site.urls import urlpatterns as site_urlpatterns
from orchestrator_app.admin.mixins import StaleChangeFormMixin


class GuardedFlatPageAdmin(StaleChangeFormMixin, FlatPageAdmin):
    pass


class GuardedUserAdmin(StaleChangeFormMixin, UserAdmin):
    pass


pages_site = admin.AdminSite(name="pages")
pages_site.register(FlatPage, GuardedFlatPageAdmin)
pages_site.register(User, GuardedUserAdmin)

urlpatterns = [*site_urlpatterns, path("pages-admin/", pages_site.urls)]
