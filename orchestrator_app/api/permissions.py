from __future__ import annotations

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from rest_framework.authentication import SessionAuthentication
from rest_framework.permissions import BasePermission

from sessions_app.conf import ahentic_settings

from .errors import session_not_found

MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"


class HasAgentPermission(BasePermission):
    """The user holds ``AHENTIC["PERMISSION"]`` (default ``sessions_app.use_agent``).

    The common case (a model-backend permission held directly or through a group) is one
    query (``holds_agent_permission``) whose cost does not grow with the number of grantees
    or group members; it runs on every request, the sidebar's 304 polls included. When it
    says no and the site has other authentication backends, ``has_perm`` still runs so they
    can grant it.
    """

    message = "You do not have permission to use the agent."

    def has_permission(self, request, view) -> bool:
        user = request.user
        if not user or not user.is_authenticated or not user.is_active:
            return False
        return may_use_agent(user)


def may_use_agent(user, held: bool | None = None) -> bool:
    """Whether an active user holds the agent permission: a superuser does, else the model
    backend's tables say so (``held``: their answer when the caller already read it, as the
    poll does), else ``has_perm`` when the site has authentication backends besides Django's
    ModelBackend, whose answer the tables already are."""
    if user.is_superuser:
        return True
    if held is None:
        held = holds_agent_permission(user)
    if held or list(settings.AUTHENTICATION_BACKENDS) == [MODEL_BACKEND]:
        return held
    return user.has_perm(ahentic_settings.PERMISSION)


def held_sql() -> str:
    """SQL that is true when the user holds the agent permission, directly or through one of
    their groups, with ``held_params(user)``. Two ``EXISTS`` that each start from the user's
    own rows, not one join with an OR: the OR made the database scan every grantee of the
    permission (68 ms with a 20,000-member group). Plain SQL because it runs on every request
    and building the same ORM query (two subqueries with their joins) cost more than running
    it. The poll embeds it in its read of the session."""
    user_model = get_user_model()
    table = connection.ops.quote_name
    perm, ct = Permission._meta.db_table, ContentType._meta.db_table
    user_perms = user_model.user_permissions.through._meta.db_table
    user_groups = user_model.groups.through._meta.db_table
    group_perms = Group.permissions.through._meta.db_table
    wanted = (
        f"JOIN {table(perm)} p ON p.id = x.permission_id "
        f"JOIN {table(ct)} ct ON ct.id = p.content_type_id "
        "WHERE p.codename = %s AND ct.app_label = %s"
    )
    return (
        f"(EXISTS (SELECT 1 FROM {table(user_perms)} x {wanted} AND x.user_id = %s) "
        f"OR EXISTS (SELECT 1 FROM {table(user_groups)} ug "
        f"JOIN {table(group_perms)} x ON x.group_id = ug.group_id {wanted} "
        "AND ug.user_id = %s))"
    )


def held_params(user) -> list:
    app_label, _, codename = ahentic_settings.PERMISSION.partition(".")
    return [codename, app_label, user.pk, codename, app_label, user.pk]


def holds_agent_permission(user) -> bool:
    """Whether ``user`` holds the agent permission through the model backend's tables (one
    query; ``held_sql``)."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {held_sql()}", held_params(user))
        return bool(cursor.fetchone()[0])


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
