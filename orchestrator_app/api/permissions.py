"""Who may use the API: ``user.has_perm(AHENTIC["PERMISSION"])``, as the host's authentication
backends answer it, cached per user in Django's cache framework.

Every request checks it, the sidebar's one-a-second polls included, and ``ModelBackend``'s
answer costs two queries; so the answer is kept for ``AHENTIC["PERMISSION_CACHE_S"]`` seconds
in the ``default`` cache, under a key naming the user model, the user and the permission.
What changes it drops it (``invalidate_*``, wired in ``apps.py`` by ``connect_invalidation``):

- a user's own grants or groups (``m2m_changed`` on ``user_permissions`` and ``groups``, from
  either side) and any save or delete of a user (``is_active``, ``is_superuser``, or a host
  backend's own fields): that user's entry, or those named by the change;
- what a group grants (``m2m_changed`` on ``Group.permissions``), a group or a permission
  deleted, or a group's members cleared from the group's side: every entry, through a
  generation number stored beside them (one key; an entry of another generation is a miss).

Each drop happens at once and again when the transaction commits, so a request that read the
old grants before the commit cannot keep them. A host backend whose answer changes without a
save (a directory, a role table of its own) is seen within the TTL; 0 turns the cache off.
"""

from __future__ import annotations

import time

from django.contrib.auth import get_backends, get_user_model
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import Group, Permission
from django.core.cache import cache
from django.core.exceptions import FieldDoesNotExist
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.db import transaction
from django.db.models.signals import m2m_changed, post_delete, post_save
from rest_framework.authentication import SessionAuthentication
from rest_framework.permissions import BasePermission

from sessions_app.conf import ahentic_settings

from .errors import session_not_found

GENERATION_KEY = "ahentic:perm:generation"


class HasAgentPermission(BasePermission):
    """The user is active and holds ``AHENTIC["PERMISSION"]`` (default
    ``sessions_app.use_agent``): ``may_use_agent``."""

    message = "You do not have permission to use the agent."

    def has_permission(self, request, view) -> bool:
        user = request.user
        if not user or not user.is_authenticated or not user.is_active:
            return False
        return may_use_agent(user)


def may_use_agent(user) -> bool:
    """Whether an active user holds the agent permission, as ``user.has_perm`` answers (the
    host's backends decide: a superuser holds every permission with ``ModelBackend``, a staff
    user only what was granted), cached (see the module's docstring)."""
    ttl = ahentic_settings.PERMISSION_CACHE_S
    if not ttl:
        return agent_permission_answer(user)
    key = user_key(user.pk)
    found = cache.get_many([key, GENERATION_KEY])
    generation = found.get(GENERATION_KEY)
    if generation is None:
        generation = start_generation()
    entry = found.get(key)
    if entry is not None and entry[0] == generation:
        return entry[1]
    answer = agent_permission_answer(user)
    cache.set(key, (generation, answer), timeout=ttl)
    return answer


def agent_permission_answer(user) -> bool:
    """``user.has_perm(PERMISSION)``, uncached. A user model without ``has_perm`` (neither
    ``PermissionsMixin`` nor its own) asks the backends as ``PermissionsMixin`` would, except
    ``ModelBackend``, which reads ``is_superuser`` and the permission tables it lacks."""
    perm = ahentic_settings.PERMISSION
    if callable(getattr(user, "has_perm", None)):
        return bool(user.has_perm(perm))
    for backend in get_backends():
        if isinstance(backend, ModelBackend) or not hasattr(backend, "has_perm"):
            continue
        try:
            if backend.has_perm(user, perm):
                return True
        except DjangoPermissionDenied:
            return False
    return False


def user_key(user_pk) -> str:
    """The cache key of a user's answer: the user model, the user, the permission setting."""
    label = get_user_model()._meta.label_lower
    return f"ahentic:perm:{label}:{user_pk}:{ahentic_settings.PERMISSION}"


def start_generation() -> int:
    """The generation when none is stored (first use, or evicted): a new number, so an entry
    of an earlier generation can never match again."""
    cache.add(GENERATION_KEY, time.time_ns(), timeout=None)
    return cache.get(GENERATION_KEY) or 0


def _now_and_on_commit(drop, using: str | None) -> None:
    """``drop`` now, and again when the transaction on ``using`` (the database the change was
    written to) commits."""
    drop()
    transaction.on_commit(drop, using=using)


def invalidate_users(user_pks, using: str | None = None) -> None:
    """Drop the cached answers of these users."""
    keys = [user_key(pk) for pk in user_pks]
    if keys:
        _now_and_on_commit(lambda: cache.delete_many(keys), using)


def invalidate_all(using: str | None = None) -> None:
    """Drop every cached answer (a new generation)."""

    def bump():
        try:
            cache.incr(GENERATION_KEY)
        except ValueError:  # not stored: any new number will do
            cache.set(GENERATION_KEY, time.time_ns(), timeout=None)

    _now_and_on_commit(bump, using)


def _user_m2m_changed(sender, instance, action, reverse, pk_set, using, **kwargs):
    """``user_permissions`` or ``groups`` changed, from the user's side (``instance`` is the
    user) or the other (``pk_set`` holds the users; a clear names none)."""
    if not action.startswith("post_"):
        return
    if not reverse:
        invalidate_users([instance.pk], using)
    elif pk_set is not None:
        invalidate_users(pk_set, using)
    else:
        invalidate_all(using)


def _everyone_changed(sender, using=None, **kwargs):
    action = kwargs.get("action")
    if action is None or action.startswith("post_"):
        invalidate_all(using)


def _user_saved_or_deleted(sender, instance, using=None, **kwargs):
    invalidate_users([instance.pk], using)


def _m2m_through(user_model, name: str, target):
    """The through model of the user model's many-to-many ``name`` to ``target``, if any."""
    try:
        field = user_model._meta.get_field(name)
    except FieldDoesNotExist:
        return None
    if not field.many_to_many or field.related_model is not target:
        return None
    return field.remote_field.through


def connect_invalidation() -> None:
    """Wire the receivers (``OrchestratorAppConfig.ready``). A user model without
    ``PermissionsMixin`` has no grant tables: its saves and deletes still drop its entry."""
    user_model = get_user_model()
    uid = "ahentic_permission_cache"
    for name, target in (("user_permissions", Permission), ("groups", Group)):
        through = _m2m_through(user_model, name, target)
        if through is not None:
            m2m_changed.connect(_user_m2m_changed, sender=through, dispatch_uid=f"{uid}_{name}")
    m2m_changed.connect(
        _everyone_changed, sender=Group.permissions.through, dispatch_uid=f"{uid}_group_perms"
    )
    for model in (Group, Permission):
        post_delete.connect(_everyone_changed, sender=model, dispatch_uid=f"{uid}_{model.__name__}")
    post_save.connect(_user_saved_or_deleted, sender=user_model, dispatch_uid=f"{uid}_save")
    post_delete.connect(_user_saved_or_deleted, sender=user_model, dispatch_uid=f"{uid}_delete")


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
