from __future__ import annotations

from django.contrib.auth.models import Permission
from django.db.models import Q
from rest_framework.permissions import BasePermission

from sessions_app.conf import ahentic_settings


class HasAgentPermission(BasePermission):
    """The user holds ``AHENTIC["PERMISSION"]`` (default ``sessions_app.use_agent``).

    The common case (a model-backend permission held directly or through a group) is one
    query, which keeps the sidebar's 304 polls cheap. When that query says no, ``has_perm``
    still runs so custom authentication backends can grant it.
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
        held = Permission.objects.filter(
            Q(user=user) | Q(group__user=user),
            codename=codename,
            content_type__app_label=app_label,
        ).exists()
        return held or user.has_perm(perm)
