from __future__ import annotations

from django.contrib.auth.models import Permission
from django.db.models import QuerySet
from rest_framework.authentication import SessionAuthentication
from rest_framework.permissions import BasePermission

from sessions_app.conf import ahentic_settings

from .errors import session_not_found


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
        direct, through_group = agent_permission_checks(user)
        return (
            direct.exists() or through_group.exists() or user.has_perm(ahentic_settings.PERMISSION)
        )


def agent_permission_checks(user) -> tuple[QuerySet, QuerySet]:
    """The two indexed lookups of ``HasAgentPermission``: the permission held by the user, and
    held through one of their groups. Two, not one with an OR: an OR of the two join chains
    makes the database scan every grantee of the permission (68 ms with a 20,000-member
    group). The poll runs them as ``Exists`` beside its version read (one query)."""
    app_label, _, codename = ahentic_settings.PERMISSION.partition(".")
    wanted = Permission.objects.filter(codename=codename, content_type__app_label=app_label)
    return (
        user.user_permissions.filter(pk__in=wanted),
        wanted.filter(group__in=user.groups.all()),
    )


class IsActiveUser(BasePermission):
    """Logged in and active; for a route that checks the agent permission in its own query
    (the poll, ``SessionViewSet.retrieve``)."""

    def has_permission(self, request, view) -> bool:
        user = request.user
        return bool(user and user.is_authenticated and user.is_active)


class IsSessionOwner(BasePermission):
    """Object level: the session belongs to the requesting user.

    The queryset scope already hides other users' sessions; this makes the rule hold for any
    route that loads a session through ``get_object``, so a new action cannot forget it. A
    failure is the same 404 as an unknown id (existence is never revealed).
    """

    def has_object_permission(self, request, view, obj) -> bool:
        if obj.owner_id != request.user.pk:
            raise session_not_found()
        return True


class SessionAuthentication401(SessionAuthentication):
    """Django's session login; an anonymous request is a 401 (DRF answers 403 when the
    authentication class names no scheme for ``WWW-Authenticate``)."""

    def authenticate_header(self, request) -> str:
        return 'Session realm="ahentic"'
