"""The agent's way into the Django admin: the enabled ModelAdmins, as the session's owner.

Nothing here bypasses the admin. Every read and write goes through the registered ModelAdmin with
a request built for the user (``admin_request``): its ``has_*_permission`` methods,
``get_queryset``, ``get_search_results``, ``lookup_allowed``, the change form from ``get_form``,
``save_model`` / ``delete_model`` / actions, and ``LogEntry`` rows written the way the admin's
own views write them. What the change form does not show, password fields and a ModelAdmin's
``ahentic_hidden_fields`` are never read or written.
"""

from __future__ import annotations

import datetime
import decimal
import uuid
from typing import Any
from urllib.parse import urlsplit

from django.apps import apps
from django.contrib import admin
from django.contrib.admin.utils import (
    display_for_field,
    display_for_value,
    flatten_fieldsets,
    lookup_field,
    unquote,
)
from django.contrib.admin.widgets import RelatedFieldWidgetWrapper
from django.contrib.messages.storage.base import BaseStorage
from django.core.exceptions import FieldDoesNotExist, ObjectDoesNotExist
from django.db import models
from django.forms import MultiWidget, PasswordInput
from django.http import HttpRequest, QueryDict
from django.urls import Resolver404, resolve
from django.utils.datastructures import MultiValueDict
from django.utils.html import strip_tags

from sessions_app.conf import ahentic_settings

from .. import ToolError

# The app's own models are never offered: the agent must not edit its sessions or grants.
OWN_APPS = ("sessions_app", "artifacts_app", "orchestrator_app")
SENSITIVE_NAMES = ("password",)
# Text values longer than this are shortened in list columns.
COLUMN_CHARS = 200


class AgentRequest(HttpRequest):
    """An admin request made on behalf of the agent (``is_agent_request`` tells them apart)."""

    ahentic_agent = True


def is_agent_request(request: HttpRequest) -> bool:
    """True for requests the admin tools build. A ModelAdmin can use it to give the agent
    less than the user has, for example view-only access (see the demo site's GroupAdmin)."""
    return bool(getattr(request, "ahentic_agent", False))


class CollectedMessages(BaseStorage):
    """``message_user`` from save_model or an action: kept for the tool result."""

    def __init__(self, request: HttpRequest):
        super().__init__(request)
        self.collected: list[str] = []

    def _get(self, *args, **kwargs):
        return [], True

    def _store(self, messages, response, *args, **kwargs):
        return []

    def add(self, level, message, extra_tags=""):
        self.collected.append(strip_tags(str(message)))


def admin_request(user, post: dict[str, Any] | None = None) -> AgentRequest:
    """A POST request for ``user``, as the admin's views would receive it."""
    request = AgentRequest()
    request.method = "POST"
    request.user = user
    request.path = request.path_info = "/"
    request.META["SERVER_NAME"] = "ahentic.agent"
    request.META["SERVER_PORT"] = "80"
    request.POST = QueryDict(mutable=True)
    for key, value in (post or {}).items():
        if isinstance(value, list):
            request.POST.setlist(key, [str(v) for v in value])
        else:
            request.POST[key] = str(value)
    request._messages = CollectedMessages(request)
    return request


def model_label(model) -> str:
    return f"{model._meta.app_label}.{model._meta.model_name}"


def configured_labels() -> list[str] | str | None:
    """``ADMIN_TOOLS`` normalized: None, "all" or lower-case labels."""
    value = ahentic_settings.ADMIN_TOOLS
    if value in (None, "all"):
        return value
    return [str(label).lower() for label in value]


def enabled_admins() -> dict[str, admin.ModelAdmin]:
    """label -> ModelAdmin for every enabled model, sorted by label (a stable catalog)."""
    configured = configured_labels()
    if not configured:
        return {}
    found = {}
    for model, model_admin in admin.site._registry.items():
        label = model_label(model)
        if configured == "all" and model._meta.app_label in OWN_APPS:
            continue
        if configured != "all" and label not in configured:
            continue
        if getattr(model_admin, "ahentic_tools", True) is False:
            continue
        found[label] = model_admin
    return dict(sorted(found.items()))


def permissions(model_admin: admin.ModelAdmin, request: HttpRequest, obj=None) -> list[str]:
    """The admin permissions ``request.user`` has on the model (or ``obj``), in a fixed order."""
    checks = (
        ("view", model_admin.has_view_or_change_permission(request, obj)),
        ("add", obj is None and model_admin.has_add_permission(request)),
        ("change", model_admin.has_change_permission(request, obj)),
        ("delete", model_admin.has_delete_permission(request, obj)),
    )
    return [name for name, allowed in checks if allowed]


def usable_admins(user) -> dict[str, tuple[admin.ModelAdmin, list[str]]]:
    """The enabled models ``user`` has any admin permission on, with those permissions."""
    admins = enabled_admins()
    if not admins or not user.is_authenticated:
        return {}
    request = admin_request(user)
    if not admin.site.has_permission(request):  # active staff only, like the admin itself
        return {}
    usable = {}
    for label, model_admin in admins.items():
        granted = permissions(model_admin, request)
        if granted:
            usable[label] = (model_admin, granted)
    return usable


def may_use_admin_tools(user) -> bool:
    return bool(usable_admins(user))


def model_admin_for(user, label: Any) -> tuple[admin.ModelAdmin, AgentRequest]:
    """The ModelAdmin for ``label`` and a request for ``user``, or the model's error."""
    usable = usable_admins(user)
    key = str(label or "").strip().lower()
    if key not in enabled_admins():
        raise ToolError(
            "admin_model_unknown",
            f"No enabled admin model {label!r}.",
            hint="Use one of the models listed here (app_label.model).",
            models=list(usable),
        )
    if key not in usable:
        raise ToolError("admin_permission_denied", f"The user has no admin permission on {key}.")
    return usable[key][0], admin_request(user)


def require(model_admin, request, permission: str, obj=None) -> None:
    if permission not in permissions(model_admin, request, obj):
        raise ToolError(
            "admin_permission_denied",
            f"The user may not {permission} {model_admin.opts.verbose_name_plural}"
            + (f" (object {obj.pk})" if obj is not None else "")
            + ".",
        )


def get_object(model_admin, request, object_id: Any):
    obj = model_admin.get_object(request, unquote(str(object_id)))
    if obj is None:
        raise ToolError(
            "admin_object_not_found",
            f"No {model_admin.opts.verbose_name} with id {object_id!r} that this user can see.",
            hint="Find the id with admin_list.",
        )
    return obj


# --- which fields the agent sees -----------------------------------------------------------------


def _hidden(model_admin) -> set[str]:
    return set(getattr(model_admin, "ahentic_hidden_fields", ()) or ())


def _sensitive(name: str, form_field=None) -> bool:
    if any(s in name.lower() for s in SENSITIVE_NAMES):
        return True
    if form_field is not None:
        if isinstance(form_field.widget, PasswordInput):
            return True
        if type(form_field).__name__ == "ReadOnlyPasswordHashField":
            return True
    return False


def form_class(model_admin, request, obj=None):
    """The admin's change (or add) form class, exactly as its changeform view builds it."""
    fieldsets = model_admin.get_fieldsets(request, obj)
    return model_admin.get_form(
        request, obj, change=obj is not None, fields=flatten_fieldsets(fieldsets)
    )


def readable_fields(model_admin, request, obj=None) -> list[str]:
    """What the change form shows (editable or read-only), minus hidden and password fields."""
    hidden = _hidden(model_admin)
    shown = flatten_fieldsets(model_admin.get_fieldsets(request, obj))
    form_fields = form_class(model_admin, request, obj).base_fields
    return [
        name
        for name in shown
        if isinstance(name, str)
        and name not in hidden
        and not _sensitive(name, form_fields.get(name))
    ]


def writable_fields(form, model_admin) -> list[str]:
    hidden = _hidden(model_admin)
    return [
        name
        for name, field in form.fields.items()
        if name not in hidden and not _sensitive(name, field)
    ]


# --- values as JSON --------------------------------------------------------------------------------


def to_json(value: Any) -> Any:
    """A model field's value as JSON: related objects by primary key, dates as ISO strings."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, models.Model):
        return to_json(value.pk)
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (decimal.Decimal, uuid.UUID)):
        return str(value)
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset, models.QuerySet)):
        return [to_json(v) for v in value]
    if hasattr(value, "name") and hasattr(value, "url"):  # a FieldFile
        return value.name or None
    return str(value)


def field_value(model_admin, obj, name: str) -> Any:
    """The value of a shown field: model fields as data, admin callables as their text."""
    try:
        field = obj._meta.get_field(name)
    except FieldDoesNotExist:
        field = None
    if field is not None and (field.concrete or field.many_to_many):
        return field_data(field, obj)
    return column_text(model_admin, obj, name)


def field_data(field, obj) -> Any:
    """A model field's value as JSON; a many-to-many field as the related primary keys (read
    here, not with ``value_from_object``, whose return type differs across Django versions)."""
    if field.many_to_many:
        if obj.pk is None:
            return []
        related = getattr(obj, field.name).order_by("pk").values_list("pk", flat=True)
        return [to_json(pk) for pk in related]
    return to_json(field.value_from_object(obj))


def column_text(model_admin, obj, name: str) -> str:
    """A list_display column or read-only field rendered as the admin renders it, as text."""
    empty = model_admin.get_empty_value_display()
    try:
        field, attr, value = lookup_field(name, obj, model_admin)
    except (AttributeError, ObjectDoesNotExist):
        return empty
    if field is not None:
        text = display_for_field(value, field, empty, avoid_link=True)
    else:
        boolean = getattr(attr, "boolean", False)
        text = display_for_value(value, empty, boolean)
    text = strip_tags(str(text))
    return text if len(text) <= COLUMN_CHARS else text[: COLUMN_CHARS - 1] + "…"


def object_fields(model_admin, request, obj) -> dict[str, Any]:
    return {
        name: field_value(model_admin, obj, name)
        for name in readable_fields(model_admin, request, obj)
    }


# --- form data -------------------------------------------------------------------------------------


def _unwrapped(widget):
    """The widget inside the admin's RelatedFieldWidgetWrapper (the "+" and pencil links)."""
    while isinstance(widget, RelatedFieldWidgetWrapper):
        widget = widget.widget
    return widget


def _put(data: MultiValueDict, name: str, widget, value: Any) -> None:
    """Put one value where ``widget.value_from_datadict`` looks for it."""
    if value is None:
        return
    widget = _unwrapped(widget)
    if isinstance(widget, MultiWidget):
        parts: Any = value
        if isinstance(value, str) and len(widget.widgets) == 2:
            parts = value.replace("T", " ", 1).split(" ", 1)  # "2025-05-01T10:00" date + time
        if not isinstance(parts, (list, tuple)):
            parts = widget.decompress(value)
        for suffix, sub_widget, part in zip(
            widget.widgets_names, widget.widgets, parts, strict=False
        ):
            _put(data, name + suffix, sub_widget, part)
        return
    if getattr(widget, "allow_multiple_selected", False):
        items = value if isinstance(value, (list, tuple)) else [value]
        data.setlist(name, list(items))
        return
    data[name] = value


def form_data(form, values: dict[str, Any]) -> MultiValueDict:
    """The POST a browser would send: the form's current values with ``values`` on top."""
    data = MultiValueDict()
    for name, field in form.fields.items():
        value = values[name] if name in values else form[name].value()
        if field.disabled:
            continue
        _put(data, name, field.widget, value)
    return data


def field_errors(form) -> dict[str, list[str]]:
    return {name: [str(message) for message in errors] for name, errors in form.errors.items()}


# --- page awareness --------------------------------------------------------------------------------


def admin_page(user, url: Any) -> dict[str, Any] | None:
    """What an admin page URL is about, for the step context: model, and object id on a change
    page. None when the URL is not an enabled admin page this user may use."""
    if not isinstance(url, str) or not url:
        return None
    try:
        match = resolve(urlsplit(url).path)
    except Resolver404:
        return None
    model_admin = getattr(match.func, "model_admin", None)
    if model_admin is None or admin.site._registry.get(model_admin.model) is not model_admin:
        return None
    label = model_label(model_admin.model)
    if label not in usable_admins(user):
        return None
    page: dict[str, Any] = {"model": label}
    view = (match.url_name or "").rsplit("_", 1)[-1]
    if view in ("change", "delete", "history") and "object_id" in match.kwargs:
        page["id"] = unquote(match.kwargs["object_id"])
    page["view"] = view
    return page


def model_for_label(label: str):
    """The model class for ``app_label.model``, or None (used by the system check)."""
    try:
        return apps.get_model(label)
    except (LookupError, ValueError):
        return None
