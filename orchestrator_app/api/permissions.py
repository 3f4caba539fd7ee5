from __future__ import annotations

from functools import lru_cache

from django.conf import settings
from django.contrib.auth import get_backends, get_user_model
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import Group, Permission
from django.core.exceptions import FieldDoesNotExist
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.db.models import Exists, OuterRef, Q
from rest_framework.authentication import SessionAuthentication
from rest_framework.permissions import BasePermission

from sessions_app import compiled
from sessions_app.conf import ahentic_settings

from .errors import session_not_found

MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"


class HasAgentPermission(BasePermission):
    """The user holds ``AHENTIC["PERMISSION"]`` (default ``sessions_app.use_agent``).

    The common case (a model-backend permission held directly or through a group) is one
    query (``agent_permission_held``) whose cost does not grow with the number of grantees
    or group members; it runs on every request, the sidebar's 304 polls included. When it
    says no and the site has other authentication backends, they still get to grant it.
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
    poll does), else the site's other authentication backends.

    Any user model works: one without ``PermissionsMixin`` has no ``is_superuser`` and no
    permission tables, so only its own ``has_perm`` (when it defines one) or the backends
    other than ``ModelBackend`` (which needs those tables) can grant it."""
    if getattr(user, "is_superuser", False):
        return True
    has_tables = agent_permission_held("pk") is not None
    if held is None and has_tables:
        held = held_by(user)
    if held:
        return True
    if has_tables:
        if list(settings.AUTHENTICATION_BACKENDS) == [MODEL_BACKEND]:
            return False  # the tables were ModelBackend's whole answer
        return user.has_perm(ahentic_settings.PERMISSION)
    if callable(getattr(user, "has_perm", None)):
        return bool(user.has_perm(ahentic_settings.PERMISSION))
    return backends_grant(user, ahentic_settings.PERMISSION)


def backends_grant(user, perm: str) -> bool:
    """``PermissionsMixin.has_perm`` for a user model without it: any backend that grants
    ``perm``; ``ModelBackend`` is skipped (it reads ``is_superuser`` and the permission
    tables such a model lacks)."""
    for backend in get_backends():
        if isinstance(backend, ModelBackend) or not hasattr(backend, "has_perm"):
            continue
        try:
            if backend.has_perm(user, perm):
                return True
        except DjangoPermissionDenied:
            return False
    return False


def agent_permission_held(user_ref: str) -> Q | None:
    """A condition on any queryset, true when the user at ``OuterRef(user_ref)`` holds the agent
    permission through the model backend's tables, directly or through one of their groups;
    None when the user model has no such tables (no ``PermissionsMixin``).

    Two ``EXISTS`` that each start from the user's own rows (the many-to-many tables' user
    column is indexed), not one join with an OR: the OR made the database scan every grantee
    of the permission (68 ms with a 20,000-member group). The columns come from the user
    model's ``_meta``, so a model named ``Member`` (``member_id``) or with a UUID key works.
    Built once per process, user model and permission setting: only the outer query is
    built per request."""
    return _held_condition(get_user_model()._meta.label, ahentic_settings.PERMISSION, user_ref)


@lru_cache(maxsize=16)
def _held_condition(user_label: str, permission: str, user_ref: str) -> Q | None:
    user_model = get_user_model()
    direct = _m2m_to(user_model, "user_permissions", Permission)
    groups = _m2m_to(user_model, "groups", Group)
    if direct is None or groups is None:
        return None
    app_label, _, codename = permission.partition(".")
    wanted = {"permission__codename": codename, "permission__content_type__app_label": app_label}
    held_directly = direct.remote_field.through._base_manager.filter(
        **{direct.m2m_field_name(): OuterRef(user_ref)}, **wanted
    )
    group_grants = Group.permissions.through._base_manager.filter(group=OuterRef("group"), **wanted)
    held_through_a_group = groups.remote_field.through._base_manager.filter(
        Exists(group_grants), **{groups.m2m_field_name(): OuterRef(user_ref)}
    )
    return Q(Exists(held_directly)) | Q(Exists(held_through_a_group))


def permission_key() -> tuple[str, str]:
    """What the compiled permission queries depend on besides the schema."""
    return get_user_model()._meta.label, ahentic_settings.PERMISSION


def held_by(user) -> bool:
    """Whether ``user`` holds the agent permission through the model backend's tables: one
    query, whose SQL Django compiled is kept per database (``sessions_app.compiled``): it runs
    on every request, and building the two correlated ``EXISTS`` through the ORM cost about
    50 times running them (6.5 ms against 0.1-0.2 ms, ``bench/permission.py``)."""
    user_model = get_user_model()

    def build():
        users = user_model._base_manager.filter(
            agent_permission_held("pk"), pk=compiled.Param("pk", user_model._meta.pk)
        )
        return users.values_list("pk")[:1]

    key = ("agent_permission", *permission_key())
    return bool(compiled.rows(key, user_model, build, {"pk": user.pk}))


def _m2m_to(user_model, name: str, target):
    """The user model's many-to-many field ``name`` to ``target``, if it has that field."""
    try:
        field = user_model._meta.get_field(name)
    except FieldDoesNotExist:
        return None
    if not field.many_to_many or field.related_model is not target:
        return None
    return field


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
