"""The demo site's admin customizations (autodiscovered: ahentic_site is an installed app).

The ADMIN_TOOLS models (flat pages, groups) get the stale change-form guard
(``StaleChangeFormMixin``), as a host adds it to its own ModelAdmins.

Groups are read-only for the agent: people keep editing them in the admin, while requests the
admin tools make (``is_agent_request``) get view permission only. The same pattern gives the
agent less than its user on any ModelAdmin.
"""

from django.contrib import admin
from django.contrib.auth.admin import GroupAdmin
from django.contrib.auth.models import Group
from django.contrib.flatpages.admin import FlatPageAdmin
from django.contrib.flatpages.models import FlatPage

from orchestrator_app.admin.mixins import StaleChangeFormMixin
from orchestrator_app.tools.admin_tools import is_agent_request


class DemoFlatPageAdmin(StaleChangeFormMixin, FlatPageAdmin):
    pass


class DemoGroupAdmin(StaleChangeFormMixin, GroupAdmin):
    def has_add_permission(self, request):
        return not is_agent_request(request) and super().has_add_permission(request)

    def has_change_permission(self, request, obj=None):
        return not is_agent_request(request) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None):
        return not is_agent_request(request) and super().has_delete_permission(request, obj)


admin.site.unregister(Group)
admin.site.register(Group, DemoGroupAdmin)
admin.site.unregister(FlatPage)
admin.site.register(FlatPage, DemoFlatPageAdmin)
