"""A URLconf with a second ``AdminSite``, ``pages``, on which a host registers flat pages beside
the default admin (tests/test_first_hour.py, ``pytest.mark.urls``)."""

from django.contrib import admin
from django.contrib.flatpages.admin import FlatPageAdmin
from django.contrib.flatpages.models import FlatPage
from django.urls import path

from ahentic_site.urls import urlpatterns as site_urlpatterns

pages_site = admin.AdminSite(name="pages")
pages_site.register(FlatPage, FlatPageAdmin)

urlpatterns = [*site_urlpatterns, path("pages-admin/", pages_site.urls)]
