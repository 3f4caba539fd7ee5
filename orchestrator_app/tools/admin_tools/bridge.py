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
import html
import uuid
from typing import Any
from urllib.parse import urlsplit

from django.apps import apps
from django.contrib import admin
from django.contrib.admin.sites import all_sites
from django.contrib.admin.utils import (
    flatten_fieldsets,
    lookup_field,
    quote,
    unquote,
)
from django.contrib.admin.widgets import RelatedFieldWidgetWrapper
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.contrib.messages.storage.base import BaseStorage
from django.core.exceptions import FieldDoesNotExist, ObjectDoesNotExist
from django.db import models
from django.forms import JSONField, MultiWidget, PasswordInput
from django.http import HttpRequest, QueryDict
from django.urls import Resolver404, resolve
from django.utils.datastructures import MultiValueDict
from django.utils.html import strip_tags

from sessions_app import agents
from sessions_app.conf import ahentic_settings

from ..errors import ToolError

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


def _query_dict(data: dict[str, Any] | None) -> QueryDict:
    query = QueryDict(mutable=True)
    for key, value in (data or {}).items():
        if isinstance(value, list):
            query.setlist(key, [str(v) for v in value])
        else:
            query[key] = str(value)
    return query


def admin_request(user, post: dict[str, Any] | None = None, method: str = "POST") -> AgentRequest:
    """A request for ``user``, as the admin's views would receive it: a POST of ``post``, or
    with ``method="GET"`` a GET with ``post`` as its query string (the change list's)."""
    request = AgentRequest()
    request.method = method
    request.user = user
    request.path = request.path_info = "/"
    # What a WSGI server always sets: the admin's pages read SCRIPT_NAME (each_context), so an
    # action that answers with a page (delete_selected's confirmation) needs it.
    request.META.update(
        SERVER_NAME="ahentic.agent",
        SERVER_PORT="80",
        REQUEST_METHOD=method,
        SCRIPT_NAME="",
        PATH_INFO="/",
    )
    if method == "GET":
        request.GET = _query_dict(post)
    else:
        request.POST = _query_dict(post)
    request._messages = CollectedMessages(request)
    return request


# The package whose tools are the admin tools (``Tool.module``).
ADMIN_MODULE = __name__.rpartition(".")[0]


def model_label(model) -> str:
    return f"{model._meta.app_label}.{model._meta.model_name}"


def configured_labels() -> list[str] | str | None:
    """``ADMIN_TOOLS`` normalized: None, "all" or lower-case labels."""
    value = ahentic_settings.ADMIN_TOOLS
    if value in (None, "all"):
        return value
    return [str(label).lower() for label in value]


def admin_sites() -> list[admin.AdminSite]:
    """Every AdminSite of the project, in the order the tools prefer them: ``admin.site``
    first, then the others by name (``all_sites`` itself has no order)."""
    others = sorted((s for s in all_sites if s is not admin.site), key=lambda s: s.name)
    return [admin.site, *others]


def registered_admins() -> dict[type[models.Model], admin.ModelAdmin]:
    """model -> the ModelAdmin the tools use for it. A model registered on several sites is
    used through the first site of ``admin_sites`` that has it (``admin.site`` when it does)."""
    found: dict[type[models.Model], admin.ModelAdmin] = {}
    for site in admin_sites():
        for model, model_admin in site._registry.items():
            found.setdefault(model, model_admin)
    return found


def enabled_admins() -> dict[str, admin.ModelAdmin]:
    """label -> ModelAdmin for every enabled model, sorted by label (a stable catalog)."""
    configured = configured_labels()
    if not configured:
        return {}
    found = {}
    for model, model_admin in registered_admins().items():
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


def agent_labels(session) -> list[str] | None:
    """The admin models the session's agent may work on (its version's ``ADMIN_TOOLS``,
    lower-case labels), within the site's; None when the agent does not narrow them."""
    if session is None:
        return None
    value = agents.settings_for(session).config.get("ADMIN_TOOLS")
    if value in (None, "all"):  # left out, or not narrowed
        return None
    return [str(label).lower() for label in value]


def usable_admins(user, session=None) -> dict[str, tuple[admin.ModelAdmin, list[str]]]:
    """The enabled models ``user`` has any admin permission on, with those permissions; with
    ``session``, only those its agent may work on (``agent_labels``)."""
    admins = enabled_admins()
    narrowed = agent_labels(session)
    if narrowed is not None:
        admins = {label: a for label, a in admins.items() if label in narrowed}
    if not admins or not user.is_authenticated:
        return {}
    request = admin_request(user)
    usable = {}
    for label, model_admin in admins.items():
        # The admin site's own gate first (active staff, for the default site), as its views.
        if not model_admin.admin_site.has_permission(request):
            continue
        granted = permissions(model_admin, request)
        if granted:
            usable[label] = (model_admin, granted)
    return usable


def may_use_admin_tools(user) -> bool:
    return bool(usable_admins(user))


def model_admin_for(user, label: Any, session=None) -> tuple[admin.ModelAdmin, AgentRequest]:
    """The ModelAdmin for ``label`` and a request for ``user``, or the model's error; with
    ``session``, a model its agent may not work on is unknown to it (``agent_labels``)."""
    usable = usable_admins(user, session)
    key = str(label or "").strip().lower()
    narrowed = agent_labels(session)
    if key not in enabled_admins() or (narrowed is not None and key not in narrowed):
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


def object_id(obj) -> Any:
    """An object's id as the tools hand it out and take it back: the admin's URL form
    (``quote``: a key ``:`` is ``_3A``), which ``get_object`` reads with ``unquote``. Keys that
    need no quoting keep their JSON type (an integer stays an integer)."""
    return to_json(quote(obj.pk))


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
    """The value of a shown field: model fields as data, admin callables as their value."""
    try:
        field = obj._meta.get_field(name)
    except FieldDoesNotExist:
        field = None
    if field is not None and (field.concrete or field.many_to_many):
        return field_data(field, obj)
    return column_value(model_admin, obj, name)


def field_data(field, obj) -> Any:
    """A model field's value as JSON; a many-to-many field as the related primary keys (read
    here, not with ``value_from_object``, whose return type differs across Django versions)."""
    if field.many_to_many:
        if obj.pk is None:
            return []
        related = getattr(obj, field.name).order_by("pk").values_list("pk", flat=True)
        return [to_json(pk) for pk in related]
    return to_json(field.value_from_object(obj))


def shortened(text: str) -> str:
    return text if len(text) <= COLUMN_CHARS else text[: COLUMN_CHARS - 1] + "…"


def as_text(value: Any) -> str:
    """What a page shows of ``value``: HTML (``format_html``, a link) as its plain text."""
    return shortened(html.unescape(strip_tags(str(value))))


def related_value(obj) -> dict[str, Any]:
    return {"id": object_id(obj), "repr": as_text(obj)}


def column_value(model_admin, obj, name: Any) -> Any:
    """A list_display column (a field name, a ModelAdmin or model method, a callable) or a
    read-only field, as JSON, from the value the admin renders rather than its HTML: booleans
    (a BooleanField, or a callable marked ``boolean``) as true/false/null, dates as ISO text,
    a related object as its id and text, a field with choices as the choice's label, numbers
    as numbers, anything else as its text. null where the admin shows its empty value."""
    try:
        field, attr, value = lookup_field(name, obj, model_admin)
    except (AttributeError, ObjectDoesNotExist):
        return None
    if field is not None:
        if getattr(field, "flatchoices", None) and value is not None:
            return as_text(dict(field.flatchoices).get(value, value))
        if isinstance(field, models.BooleanField):
            return None if value is None else bool(value)
    elif getattr(attr, "boolean", False):
        return None if value is None else bool(value)
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, models.Model):
        return related_value(value)
    if isinstance(value, (datetime.date, datetime.time, decimal.Decimal, uuid.UUID)):
        return to_json(value)
    return as_text(value)


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


SCALARS = (str, int, float, bool, type(None))


def value_errors(form, values: dict[str, Any]) -> dict[str, list[str]]:
    """Values a browser could not post into their field: a list only where the widget takes
    several values (many-to-many, a split date and time), an object only for a JSON field.
    Without this check the form would read a list as its text and save that."""
    errors = {}
    for name, value in values.items():
        field = form.fields[name]
        widget = _unwrapped(field.widget)
        if isinstance(field, JSONField):
            continue
        several = getattr(widget, "allow_multiple_selected", False) or isinstance(
            widget, MultiWidget
        )
        if isinstance(value, list) and several:
            if all(isinstance(item, SCALARS) for item in value):
                continue
            errors[name] = ["Give a list of single values (ids)."]
        elif not isinstance(value, SCALARS):
            errors[name] = ["Give a single value (text, number, true/false or null)."]
    return errors


def form_data(form, values: dict[str, Any]) -> MultiValueDict:
    """The POST a browser would send: the form's current values with ``values`` on top."""
    data = MultiValueDict()
    for name, field in form.fields.items():
        value = values[name] if name in values else form[name].value()
        if field.disabled:
            continue
        _put(data, name, field.widget, value)
        if field.show_hidden_initial:
            # A field with a callable default (date_joined) compares the value with the hidden
            # initial the page carries; without it the field always counts as changed.
            _put(data, form[name].html_initial_name, field.hidden_widget(), form[name].initial)
    return data


def cleaned_value(form, name: str) -> Any:
    """What a valid bound form will save in ``name``, as JSON (as ``field_data`` reads it back:
    related objects by key, many-to-many keys in key order)."""
    value = form.cleaned_data.get(name)
    if isinstance(value, models.QuerySet):
        value = value.order_by("pk")
    return to_json(value)


def initial_value(form, name: str) -> Any:
    """The value ``name`` has before the save, as ``field_data`` reads it. The form's initial
    data, taken when it was built: validating a model form already sets the new values on its
    instance. Many-to-many relations are only written by the save, so they are read."""
    try:
        field = form.instance._meta.get_field(name)
    except FieldDoesNotExist:
        field = None
    if field is not None and field.many_to_many:
        return field_data(field, form.instance)
    return to_json(form.get_initial_for_field(form.fields[name], name))


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
    if model_admin is None or model_admin.admin_site._registry.get(model_admin.model) is not (
        model_admin
    ):
        return None
    label = model_label(model_admin.model)
    if label not in usable_admins(user):
        return None
    page: dict[str, Any] = {"model": label}
    view = (match.url_name or "").rsplit("_", 1)[-1]
    if view in ("change", "delete", "history") and "object_id" in match.kwargs:
        page["id"] = match.kwargs["object_id"]  # quoted, as every admin tool takes it
    page["view"] = view
    return page


# Fields that confer permissions on a model of their own (a custom user model names its flags
# the same way).
PERMISSION_FLAGS = ("is_superuser", "is_staff")


def grants_permissions(model, field_names: list[str]) -> bool:
    """True for a write that can give someone permissions: on the user model, a group or a
    permission, or to a field that is a permission flag or relates to groups or permissions."""
    if issubclass(model, (get_user_model(), Group, Permission)):
        return True
    for name in field_names:
        if name in PERMISSION_FLAGS:
            return True
        try:
            field = model._meta.get_field(name)
        except FieldDoesNotExist:
            continue
        related = field.related_model if field.is_relation else None
        if isinstance(related, type) and issubclass(related, (Group, Permission)):
            return True
    return False


def model_for_label(label: str):
    """The model class for ``app_label.model``, or None (used by the system check)."""
    try:
        return apps.get_model(label)
    except (LookupError, ValueError):
        return None
