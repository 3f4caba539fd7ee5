"""The demo site's admin customizations (autodiscovered: ahentic_site is an installed app).

Groups are read-only for the agent: people keep editing them in the admin, while requests the
admin tools make (``is_agent_request``) get view permission only. The same pattern gives the
agent less than its user on any ModelAdmin.
"""

from django.contrib import admin
from django.contrib.auth.admin import GroupAdmin
from django.contrib.auth.models import Group

from orchestrator_app.tools.admin_tools import is_agent_request


class DemoGroupAdmin(GroupAdmin):
    def has_add_permission(self, request):
        return not is_agent_request(request) and super().has_add_permission(request)

    def has_change_permission(self, request, obj=None):
        return not is_agent_request(request) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None):
        return not is_agent_request(request) and super().has_delete_permission(request, obj)


admin.site.unregister(Group)
admin.site.register(Group, DemoGroupAdmin)
