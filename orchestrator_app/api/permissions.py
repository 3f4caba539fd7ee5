from __future__ import annotations

from django.contrib.auth.models import Permission
from rest_framework.permissions import BasePermission

from sessions_app.conf import ahentic_settings


class HasAgentPermission(BasePermission):
    """The user holds ``AHENTIC["PERMISSION"]`` (default ``sessions_app.use_agent``).

    The common case (a model-backend permission held directly or through a group) is two
    indexed EXISTS queries that start from the user (their own permissions, then their
    groups'), so the cost does not grow with the number of grantees or group members; it runs
    on every request, the sidebar's 304 polls included. When both say no, ``has_perm`` still
    runs so custom authentication backends can grant it.
    """

    message = "You do not have permission to use the agent."

    def has_permission(self, request, view) -> bool:
        user = request.user
        if not user or not user.is_authenticated or not user.is_active:
            return False
        if user.is_superuser:
            return True
        perm = ahentic_settings.PERMISSION
        app_label, _, codename = perm.partition(".")
        # Two queries, not one with an OR: an OR of the two join chains makes the database
        # scan every grantee of the permission (68 ms with a 20,000-member group).
        wanted = Permission.objects.filter(codename=codename, content_type__app_label=app_label)
        return (
            user.user_permissions.filter(pk__in=wanted).exists()
            or wanted.filter(group__in=user.groups.all()).exists()
            or user.has_perm(perm)
        )
