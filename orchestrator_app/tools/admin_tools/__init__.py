"""Admin tools: the site's own data through its ModelAdmins (``AHENTIC["ADMIN_TOOLS"]``).

Six generic tools take a ``model`` argument (``app_label.model``), whatever the number of enabled
models, so the catalog is small and byte-identical from request to request: descriptions and
schemas are constants, and which models exist is an answer of ``admin_models``, not part of the
catalog. A user with no admin permission on any enabled model (or no staff access) gets none of
them; one with some permission gets all six and each call checks the model and object itself.

Reads (``admin_models``, ``admin_list``, ``admin_get``) are readonly. ``admin_save``,
``admin_delete`` and ``admin_action`` need approval; delete and actions (which act on a
selection) are non-preallowable. ``admin_save`` takes a long text field from a staged artifact:
``{"body_field": "content", "from_memory": "<key>"}``.

Inlines are not handled: a save posts the main form only, like a change form without inlines.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.contrib.admin import ListFilter, SimpleListFilter
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.utils import model_format_dict, unquote
from django.contrib.admin.views.main import SEARCH_VAR
from django.core.exceptions import (
    FieldDoesNotExist,
    FieldError,
    PermissionDenied,
    SuspiciousOperation,
    ValidationError,
)
from django.db import DataError, models, router, transaction
from django.http import HttpResponseBase
from django.utils.html import strip_tags
from django.utils.text import capfirst
from django.utils.translation import gettext_lazy as _

from artifacts_app import store

from .. import Summary, ToolContext, ToolError, tool
from . import bridge
from .bridge import is_agent_request, may_use_admin_tools

__all__ = ["is_agent_request", "may_use_admin_tools", "page_context_with_admin"]


def page_context_with_admin(user, page_context: dict[str, Any]) -> dict[str, Any]:
    """The sidebar's page context plus, on an admin page of an enabled model, what it shows
    (``{"admin": {"model", "view", "id"}}``), so "fix this page's title" needs no search."""
    target = bridge.admin_page(user, page_context.get("url"))
    return {**page_context, "admin": target} if target else page_context


MAX_LIMIT = 50
DEFAULT_LIMIT = 20
MAX_ACTION_IDS = 100
MAX_CHOICES = 50
SUMMARY_CHARS = 290
# A value in the approval card's before -> after diff (``Summary.changes``) is cut here.
DIFF_CHARS = 2000
TEXT_KINDS = ("html", "markdown", "post_content")

MODEL = {"type": "string", "description": "app_label.model, as admin_models lists it"}
OBJECT_ID = {"type": ["string", "integer"], "description": "primary key"}


class FromArtifact(str):
    """A value that comes from a staged artifact: shown by key, never quoted as text."""

    def __str__(self) -> str:
        return f"from artifact {super().__str__()}"


# Control characters are escaped on the card, so it stays one line and shows the value as saved
# (whitespace is never collapsed: the card must not hide a difference the save makes).
CONTROL_CHARS = {i: f"\\u{i:04x}" for i in (*range(32), 127)} | {
    9: "\\t",
    10: "\\n",
    13: "\\r",
}


def _shown(value: Any, limit: int) -> str:
    """A value on the approval card: text in quotes, other values as JSON."""
    if isinstance(value, FromArtifact):
        text = str(value)
    elif isinstance(value, str):
        text = f"“{value.translate(CONTROL_CHARS)}”"
    else:
        text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: max(limit - 1, 1)] + "…"


def _diff_value(form, name: str, value: Any) -> str:
    """A value of the card's diff: related objects by name and key (“example.com” (#1)), not
    by bare key, limited to DIFF_CHARS."""
    queryset = getattr(form.fields.get(name), "queryset", None)
    if queryset is None or isinstance(value, FromArtifact) or value in (None, "", []):
        return _shown(value, DIFF_CHARS)
    keys = value if isinstance(value, list) else [value]
    try:
        names = {obj.pk: _object_name(obj) for obj in queryset.filter(pk__in=keys)}
    except (TypeError, ValueError, ValidationError):
        return _shown(value, DIFF_CHARS)
    text = ", ".join(names.get(key, f"#{key}") for key in keys)
    return text if len(text) <= DIFF_CHARS else text[: DIFF_CHARS - 1] + "…"


def field_label(form, opts, name: str) -> str:
    """A field as people read it: the label the admin's change form shows (the model field's
    ``verbose_name``, capitalised, unless the form gives its own), else the name."""
    form_field = form.fields.get(name)
    if form_field is not None and form_field.label:
        return str(form_field.label)
    try:
        return capfirst(str(opts.get_field(name).verbose_name))
    except FieldDoesNotExist:
        return name


def _object_name(obj) -> str:
    return f"{_shown(str(obj), 60)} (#{obj.pk})"


# --- what a call may show before it runs ---------------------------------------------------------
# The static summaries read the input only: they stand in when a call cannot be previewed (it
# will fail with the preview's error). The previews compute the card through the same ModelAdmin
# path as the write, as the user, and refuse the call before any card when the write would.


def save_summary(input: dict[str, Any]) -> str:
    object_id = input.get("id")
    if object_id in (None, ""):
        return f"Create {input.get('model')}"
    return f"Update {input.get('model')} #{object_id}"


def delete_summary(input: dict[str, Any]) -> str:
    return f"Delete {input.get('model')} #{input.get('id')}"


def action_summary(input: dict[str, Any]) -> str:
    ids = list(input.get("ids") or [])
    shown = ", ".join(f"#{i}" for i in ids[:10]) + (", …" if len(ids) > 10 else "")
    return (
        f"Run the admin action {input.get('action')} on {len(ids)} of {input.get('model')} "
        f"({shown})"
    )


def save_preview(ctx: ToolContext, input: dict[str, Any]) -> str:
    """The approval card of ``admin_save``: what the bound admin form will save (its
    ``cleaned_data``), before -> after for an update, only fields the user may see."""
    shown_body: Any = None
    if store.FROM_MEMORY in input:
        # The form validates the artifact's body; the card names the artifact.
        input, key = store.apply_from_memory(ctx.session.pk, input, "body", TEXT_KINDS)
        shown_body = FromArtifact(key)
    bound = bound_save_form(ctx.user, input, ctx.session)
    opts = bound.model_admin.opts
    readable = set(bridge.readable_fields(bound.model_admin, bound.request, bound.obj))
    given = [name for name in bound.values if name in bound.form.changed_data]
    changed = given + [name for name in bound.form.changed_data if name not in given]
    body_field = input.get("body_field")

    def after(name: str) -> Any:
        if name == body_field and shown_body is not None:
            return shown_body
        return bridge.cleaned_value(bound.form, name)

    def change(name: str) -> dict[str, Any]:
        # The card's diff: each value in full up to DIFF_CHARS, hidden fields named only.
        label = field_label(bound.form, opts, name)
        if name not in readable:
            return {"field": name, "label": label, "before": None, "after": None, "hidden": True}
        form = bound.form
        return {
            "field": name,
            "label": label,
            "before": None
            if bound.obj is None
            else _diff_value(form, name, bridge.initial_value(form, name)),
            "after": _diff_value(form, name, after(name)),
        }

    changes = [change(name) for name in changed]
    if bound.obj is None:
        head = f"Create {opts.verbose_name}: "
        each = max(16, (SUMMARY_CHARS - len(head)) // max(len(changed), 1) - len(", "))
        text = head + ", ".join(
            f"{name} {_shown(after(name), each)}" if name in readable else f"{name} (hidden)"
            for name in changed
        )
        return Summary(text, changes)
    head = f"Update {opts.verbose_name} {bound.obj_name}: "
    if not changed:
        # Saving the form as it is: the pipeline answers "nothing changed", no approval card.
        return Summary.unchanged(head + "no changes")
    each = max(12, (SUMMARY_CHARS - len(head)) // len(changed) // 2 - len(" → ") - 2)
    text = head + "; ".join(
        f"{name} {_shown(bridge.initial_value(bound.form, name), each)} → "
        f"{_shown(after(name), each)}"
        if name in readable
        else f"{name} (hidden) changed"
        for name in changed
    )
    return Summary(text, changes)


def delete_preview(ctx: ToolContext, input: dict[str, Any]) -> str:
    target = deletable(ctx.user, input, ctx.session)
    return f"Delete {target.model_admin.opts.verbose_name} {_object_name(target.obj)}"


def action_preview(ctx: ToolContext, input: dict[str, Any]) -> str:
    target = action_target(ctx.user, input, ctx.session)
    opts = target.model_admin.opts
    ids = [str(i) for i in input["ids"]]
    shown = ", ".join(f"#{i}" for i in ids[:10]) + (", …" if len(ids) > 10 else "")
    description = target.description % model_format_dict(opts)
    return (
        f"Run the admin action “{description}” on {len(ids)} {opts.verbose_name_plural} ({shown})"
    )


def admin_save_scope(input: dict[str, Any]) -> str | None:
    """An allow for admin_save covers one model; never one that can grant permissions."""
    label = str(input.get("model") or "").strip().lower()
    model = bridge.model_for_label(label)
    if model is None:
        return None
    fields = list(input.get("values") or {})
    if input.get("body_field"):
        fields.append(str(input["body_field"]))
    if bridge.grants_permissions(model, fields):
        return None
    return f"admin_save:{label}"


# --- describe -------------------------------------------------------------------------------------


def _choices(form_field) -> list[list[Any]] | None:
    choices = getattr(form_field, "choices", None)
    if choices is None:
        return None
    listed = []
    for value, label in choices:
        value = getattr(value, "value", value)  # ModelChoiceIteratorValue
        if value in ("", None):
            continue
        listed.append([bridge.to_json(value), str(label)])
        if len(listed) >= MAX_CHOICES:
            break
    return listed


@dataclass
class ListFilters:
    """A ModelAdmin's list filters as the names ``filters`` takes: field paths, and the query
    parameters of filter classes (a ``SimpleListFilter``'s ``parameter_name``), with the
    choices a SimpleListFilter offers (value -> label)."""

    names: list[str]
    choices: dict[str, list[list[str]]]

    def takes(self, key: str) -> bool:
        return key in self.choices or any(
            key == name or key.startswith(name + "__") for name in self.names
        )


def list_filters(model_admin, request) -> ListFilters:
    names: list[str] = []
    choices: dict[str, list[list[str]]] = {}
    for entry in model_admin.get_list_filter(request):
        if isinstance(entry, (list, tuple)):
            entry = entry[0]
        if isinstance(entry, str):
            names.append(entry)
        elif isinstance(entry, type) and issubclass(entry, ListFilter):
            # Built as the change list builds it (no parameters given): what it offers.
            spec = entry(request, {}, model_admin.model, model_admin)
            if isinstance(spec, SimpleListFilter):
                offered = [[str(value), str(label)] for value, label in spec.lookup_choices]
                choices[spec.parameter_name] = offered[:MAX_CHOICES]
            else:
                names.extend(p for p in spec.expected_parameters() if p not in names)
    return ListFilters(names, choices)


def _column_key(entry: Any) -> str:
    """The name a list_display entry has in the rows: its own for a name, the function's name
    for a callable (a lambda by its column header)."""
    if isinstance(entry, str):
        return entry
    name = getattr(entry, "__name__", "")
    if name and name != "<lambda>":
        return name
    return str(getattr(entry, "short_description", "") or "column")


def _columns(model_admin, request) -> list[tuple[str, Any]]:
    """The list_display columns the agent sees, as (key, entry): the change list's columns
    but the checkbox, ``__str__`` (every row has ``repr``), hidden and password fields."""
    hidden = bridge._hidden(model_admin)
    columns = []
    for entry in model_admin.get_list_display(request):
        key = _column_key(entry)
        if key in ("action_checkbox", "__str__") or key in hidden or bridge._sensitive(key):
            continue
        columns.append((key, entry))
    return columns


def describe(model_admin, request, granted: list[str]) -> dict[str, Any]:
    opts = model_admin.opts
    form = bridge.form_class(model_admin, request)()
    writable = (
        set(bridge.writable_fields(form, model_admin))
        if "add" in granted or ("change" in granted)
        else set()
    )
    fields = []
    for name in bridge.readable_fields(model_admin, request):
        form_field = form.fields.get(name)
        try:
            model_field = opts.get_field(name)
        except FieldDoesNotExist:
            model_field = None
        info: dict[str, Any] = {
            "name": name,
            "label": str(form_field.label if form_field and form_field.label else name),
            "type": type(form_field).__name__
            if form_field is not None
            else (model_field.get_internal_type() if model_field else "text"),
            "required": bool(form_field and form_field.required),
            "readonly": name not in writable,
        }
        if form_field is not None:
            choices = _choices(form_field)
            if choices is not None:
                info["choices"] = choices
            if getattr(form_field, "max_length", None):
                info["maxLength"] = form_field.max_length
            if form_field.help_text:
                info["help"] = str(form_field.help_text)
        if name in writable and isinstance(model_field, models.TextField):
            info["fromMemory"] = True  # admin_save body_field + from_memory
        fields.append(info)
    actions = [
        {"name": name, "description": str(description % model_format_dict(opts))}
        for _, name, description in model_admin.get_actions(request).values()
    ]
    filters = list_filters(model_admin, request)
    return {
        "model": bridge.model_label(model_admin.model),
        "name": str(opts.verbose_name),
        "namePlural": str(opts.verbose_name_plural),
        "permissions": granted,
        "fields": fields,
        "columns": [key for key, _ in _columns(model_admin, request)],
        "filters": [*filters.names, *filters.choices],
        "filterChoices": filters.choices,
        "search": bool(model_admin.get_search_fields(request)),
        "actions": actions,
    }


@tool(
    name="admin_models",
    label=_("Look at the admin's models"),
    description="Describe the site's data you may work on through the Django admin. Without "
    "`model`: the enabled models and your permissions on each. With `model`: its fields (type, "
    "required, read-only, choices), list columns, filters, search and admin actions. Call this "
    "before the other admin_* tools.",
    input_schema={"type": "object", "properties": {"model": MODEL}},
    readonly=True,
    permission=may_use_admin_tools,
    summary=lambda input: f"Describe {input.get('model') or 'the admin models'}",
)
def admin_models(ctx: ToolContext, input: dict[str, Any]) -> dict[str, Any]:
    if input.get("model"):
        model_admin, request = bridge.model_admin_for(ctx.user, input["model"], ctx.session)
        return {
            "ok": True,
            **describe(model_admin, request, bridge.permissions(model_admin, request)),
        }
    models_ = [
        {
            "model": label,
            "name": str(model_admin.opts.verbose_name),
            "namePlural": str(model_admin.opts.verbose_name_plural),
            "permissions": granted,
        }
        for label, (model_admin, granted) in bridge.usable_admins(ctx.user, ctx.session).items()
    ]
    return {"ok": True, "models": models_}


# --- list and get ---------------------------------------------------------------------------------


def _invalid(message: str, errors: dict[str, Any], **data: Any) -> ToolError:
    return ToolError("admin_invalid", message, errors=errors, **data)


# Lookups that take several values; every other lookup takes one.
MULTI_VALUE_LOOKUPS = ("__in", "__range")


# The largest value of the widest integer column Django has (BigIntegerField).
LARGEST_INTEGER = 2**63 - 1


def _query_params(key: str, value: Any) -> dict[str, Any]:
    """A field lookup of ``filters`` as the change list's query string takes it: text as it
    is (the change list splits "a,b" for ``__in`` and reads "false"/"0" for ``__isnull``),
    JSON numbers and booleans as their text, a list for ``__in`` as its values, a
    ``__range`` as ``__gte`` and ``__lte``, null as ``__isnull``."""
    several = key.endswith(MULTI_VALUE_LOOKUPS)
    numbers = value if isinstance(value, list) else [value]
    if any(
        isinstance(n, int) and not isinstance(n, bool) and abs(n) > LARGEST_INTEGER for n in numbers
    ):
        # Refused alike everywhere: SQLite raises on it, PostgreSQL and MySQL match nothing.
        raise _invalid(
            f"{key}: a number out of range.",
            {"filters": [f"{key}: no database integer holds that number."]},
        )
    if isinstance(value, list):
        if not several or not all(isinstance(v, (str, int, float, bool)) for v in value):
            raise _invalid(
                f"{key} takes a single value.",
                {
                    "filters": [
                        f"{key}: a list only for __in and __range lookups, of single values."
                    ]
                },
            )
        if key.endswith("__range"):
            if len(value) != 2:
                raise _invalid(
                    f"{key} takes two values.", {"filters": [f"{key}: give [lowest, highest]."]}
                )
            base = key.removesuffix("__range")
            return {f"{base}__gte": value[0], f"{base}__lte": value[1]}
        return {key: value}
    if value is None:
        return {f"{key.removesuffix('__exact')}__isnull": True}
    if several and not isinstance(value, str):
        raise _invalid(f"{key} takes a list.", {"filters": [f"{key}: give a list of values."]})
    return {key: value}


def _choice_param(key: str, value: Any, choices: list[list[str]]) -> dict[str, Any]:
    """A SimpleListFilter's parameter: one of the values it offers."""
    text = value if isinstance(value, str) else json.dumps(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        text = str(value)
    if text not in [choice for choice, _ in choices]:
        raise _invalid(
            f"{key} takes one of the values its filter offers.",
            {"filters": [f"{key}: one of {', '.join(c for c, _ in choices) or 'nothing'}."]},
            choices=choices,
        )
    return {key: text}


def _ordering(model_admin, request, ordering: Any) -> list[str]:
    """``ordering`` as one readable field of the model (``-`` for descending); none for the
    change list's own ordering."""
    if not ordering:
        return []  # the change list's own ordering
    name = ordering[1:] if ordering.startswith("-") else ordering
    orderable = {"pk"} | {
        field.name
        for field in model_admin.opts.concrete_fields
        if field.name in bridge.readable_fields(model_admin, request)
    }
    if name not in orderable:
        raise _invalid(
            f"Cannot order by {ordering!r}.",
            {"ordering": ["Order by one field of the model, with - for descending."]},
            orderable=sorted(orderable),
        )
    return [ordering]


@tool(
    name="admin_list",
    label=_("List records in the admin"),
    description="List objects of an admin model, as the admin's change list shows them to the "
    "user: `search` uses the admin's search, `filters` takes field lookups on the model's list "
    'filters (for example {"registration_required": true}), `ordering` a field name '
    "(prefix - for descending), `limit` up to 50 and `offset` for the next page.",
    input_schema={
        "type": "object",
        "properties": {
            "model": MODEL,
            "search": {"type": "string"},
            "filters": {
                "type": "object",
                "additionalProperties": {"type": ["string", "number", "boolean", "null", "array"]},
            },
            "ordering": {"type": "string"},
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
            "offset": {"type": "integer", "minimum": 0},
        },
        "required": ["model"],
    },
    readonly=True,
    permission=may_use_admin_tools,
    summary=lambda input: (
        f"List {input.get('model')}"
        + (f" matching {input['search']!r}" if input.get("search") else "")
    ),
)
def admin_list(ctx: ToolContext, input: dict[str, Any]) -> dict[str, Any]:
    model_admin, request = bridge.model_admin_for(ctx.user, input["model"], ctx.session)
    bridge.require(model_admin, request, "view")
    filters = input.get("filters") or {}
    offered = list_filters(model_admin, request)
    params: dict[str, Any] = {}
    for key, value in sorted(filters.items()):
        if not offered.takes(key) or not model_admin.lookup_allowed(key, value, request):
            raise _invalid(
                f"{key} is not one of the model's list filters.",
                {"filters": [f"Unknown filter {key!r}."]},
                filters=[*offered.names, *offered.choices],
            )
        if key in offered.choices:
            params.update(_choice_param(key, value, offered.choices[key]))
        else:
            params.update(_query_params(key, value))
    if input.get("search"):
        params[SEARCH_VAR] = input["search"]
    order = _ordering(model_admin, request, input.get("ordering"))
    limit = int(input.get("limit") or DEFAULT_LIMIT)
    offset = int(input.get("offset") or 0)
    # The change list as the admin's changelist view builds it for this query string: its
    # get_queryset, list filters (SimpleListFilter included), search, ordering and count.
    list_request = bridge.admin_request(
        ctx.user,
        {
            k: [_param_text(v) for v in vs] if isinstance(vs, list) else _param_text(vs)
            for k, vs in params.items()
        },
        method="GET",
    )
    try:
        # Values the field cannot take fail here (filter, or the query): the model's mistake.
        with transaction.atomic(using=router.db_for_read(model_admin.model)):
            changelist = model_admin.get_changelist_instance(list_request)
            queryset = changelist.queryset
            if order:
                # The primary key makes pages deterministic.
                queryset = queryset.order_by(*order, "-pk")
            total = changelist.result_count
            objects = list(queryset[offset : offset + limit])
    except IncorrectLookupParameters as exc:
        cause = exc.__cause__ or exc
        raise _invalid("The filters do not fit the fields.", {"filters": [str(cause)]}) from exc
    except (
        SuspiciousOperation,
        ValidationError,
        ValueError,
        TypeError,
        OverflowError,
        FieldError,
        DataError,
    ) as exc:
        raise _invalid("The filters do not fit the fields.", {"filters": [str(exc)]}) from exc
    refused = list_request._messages.collected
    if refused:  # the change list's search form refused the text
        raise _invalid("The search text was refused.", {"search": refused})
    columns = _columns(model_admin, request)
    rows = [
        {
            "id": bridge.object_id(obj),
            "repr": str(obj),
            **{key: bridge.column_value(model_admin, obj, entry) for key, entry in columns},
        }
        for obj in objects
    ]
    result: dict[str, Any] = {"ok": True, "model": bridge.model_label(model_admin.model)}
    result.update(count=total, offset=offset, rows=rows)
    if offset + len(rows) < total:
        result["nextOffset"] = offset + len(rows)
    return result


def _param_text(value: Any) -> str:
    """A JSON value as query-string text (booleans as Python's, which every field reads)."""
    return str(value)


def _object_json(model_admin, request, obj) -> dict[str, Any]:
    data: dict[str, Any] = {
        "model": bridge.model_label(model_admin.model),
        "id": bridge.object_id(obj),
        "repr": str(obj),
    }
    if hasattr(obj, "get_absolute_url"):
        try:
            data["url"] = obj.get_absolute_url()
        except Exception:  # a broken get_absolute_url must not hide the object
            pass
    return data


@tool(
    name="admin_get",
    label=_("Read a record in the admin"),
    description="Read one object of an admin model: the fields its admin change form shows.",
    input_schema={
        "type": "object",
        "properties": {"model": MODEL, "id": OBJECT_ID},
        "required": ["model", "id"],
    },
    readonly=True,
    permission=may_use_admin_tools,
    summary=lambda input: f"Read {input.get('model')} #{input.get('id')}",
)
def admin_get(ctx: ToolContext, input: dict[str, Any]) -> dict[str, Any]:
    model_admin, request = bridge.model_admin_for(ctx.user, input["model"], ctx.session)
    obj = bridge.get_object(model_admin, request, input["id"])
    bridge.require(model_admin, request, "view", obj)
    return {
        "ok": True,
        **_object_json(model_admin, request, obj),
        "permissions": bridge.permissions(model_admin, request, obj),
        "fields": bridge.object_fields(model_admin, request, obj),
    }


# --- writes: one transaction each, logged like the admin's views ---------------------------------


def _write_db(input: dict[str, Any]) -> str | None:
    model = bridge.model_for_label(str(input.get("model") or "").strip().lower())
    return router.db_for_write(model) if model is not None else None


@dataclass
class BoundSave:
    """One admin_save call as the admin's change (or add) view would handle its POST: the
    ModelAdmin, the request, the object (None when adding) and the validated form."""

    model_admin: Any
    request: Any
    obj: Any
    form: Any
    values: dict[str, Any]
    # The object as it was, named before validation set the new values on it.
    obj_name: str

    @property
    def add(self) -> bool:
        return self.obj is None


def bound_save_form(user, input: dict[str, Any], session=None) -> BoundSave:
    """The ModelAdmin path of admin_save up to a valid bound form (the card and the write both
    go through it): the enabled model, ``get_object`` with the admin's ``unquote`` and
    ``get_queryset``, ``has_add_permission`` / ``has_change_permission``, the form's writable
    fields, and its validation. Raises ToolError."""
    model_admin, request = bridge.model_admin_for(user, input["model"], session)
    values = dict(input.get("values") or {})
    if input.get("body") is not None:
        if not input.get("body_field"):
            raise _invalid(
                "`body` needs `body_field`, the field it fills.",
                {"body_field": ["Name the text field the body goes into."]},
            )
        values[input["body_field"]] = input["body"]
    add = input.get("id") in (None, "")
    obj = None if add else bridge.get_object(model_admin, request, input["id"])
    bridge.require(model_admin, request, "add" if add else "change", obj)
    form_class = bridge.form_class(model_admin, request, obj)
    current = form_class(instance=obj)
    writable = bridge.writable_fields(current, model_admin)
    refused = sorted(set(values) - set(writable))
    if refused:
        raise _invalid(
            "Some fields cannot be written: " + ", ".join(refused) + ".",
            {name: ["Not an editable field of the admin form."] for name in refused},
            writable=writable,
        )
    misfits = bridge.value_errors(current, values)
    if misfits:
        raise _invalid("Some values do not fit their fields.", misfits)
    obj_name = _object_name(obj) if obj is not None else ""
    form = form_class(bridge.form_data(current, values), {}, instance=obj)
    if not form.is_valid():
        raise _invalid("The admin form refused the values.", bridge.field_errors(form))
    return BoundSave(model_admin, request, obj, form, values, obj_name)


@tool(
    name="admin_save",
    label=_("Save a record in the admin"),
    description="Create (no `id`) or update (with `id`) an object through its admin change "
    "form, with the form's validation. `values` maps field names to values (related objects by "
    "id, many-to-many as a list of ids); fields left out keep their current value (or the "
    "form's default when creating). For a long text field give `body_field` and either `body` "
    "or `from_memory` with the key of a staged artifact. Needs the user's approval.",
    input_schema={
        "type": "object",
        "properties": {
            "model": MODEL,
            "id": OBJECT_ID,
            "values": {"type": "object"},
            "body_field": {"type": "string"},
            "body": {"type": "string"},
        },
        "required": ["model", "values"],
    },
    readonly=False,
    artifact_field="body",
    artifact_kinds=TEXT_KINDS,
    permission=may_use_admin_tools,
    summary=save_summary,
    preview=save_preview,
    grant_scope=admin_save_scope,
)
def admin_save(ctx: ToolContext, input: dict[str, Any]) -> dict[str, Any]:
    using = _write_db(input)
    try:
        # As the admin's changeform_view: the object is read and the form validated in the
        # transaction that saves it.
        with transaction.atomic(using=using):
            bound = bound_save_form(ctx.user, input, ctx.session)
            model_admin, request, form, add = (
                bound.model_admin,
                bound.request,
                bound.form,
                bound.add,
            )
            new_object = model_admin.save_form(request, form, change=not add)
            model_admin.save_model(request, new_object, form, not add)
            model_admin.save_related(request, form, [], not add)
            message = model_admin.construct_change_message(request, form, [], add)
            if add:
                model_admin.log_addition(request, new_object, message)
            else:
                model_admin.log_change(request, new_object, message)
    except ValidationError as exc:  # raised by save_model: nothing was written
        raise _invalid("Saving failed.", {"__all__": exc.messages}) from exc
    readable = set(bridge.readable_fields(model_admin, request, new_object))
    return {
        "ok": True,
        "created" if add else "updated": True,
        **_object_json(model_admin, request, new_object),
        "changed": [name for name in form.changed_data if name in readable],
        "messages": request._messages.collected,
    }


@dataclass
class Deletable:
    model_admin: Any
    request: Any
    obj: Any
    counts: dict[str, int]


def deletable(user, input: dict[str, Any], session=None) -> Deletable:
    """The admin's delete view up to its confirmation: the object through ``get_queryset``,
    ``has_delete_permission``, then ``get_deleted_objects``. A protected object cannot be
    deleted by anyone (``admin_delete_protected``, even when the user also lacks permission on
    the protecting objects); otherwise every cascaded object needs the user's permission."""
    model_admin, request = bridge.model_admin_for(user, input["model"], session)
    obj = bridge.get_object(model_admin, request, input["id"])
    bridge.require(model_admin, request, "delete", obj)
    _, model_count, perms_needed, protected = model_admin.get_deleted_objects([obj], request)
    if protected:
        raise ToolError(
            "admin_delete_protected",
            "Protected related objects prevent the deletion.",
            protected=[strip_tags(str(p)) for p in protected][:20],
        )
    if perms_needed:
        raise ToolError(
            "admin_permission_denied",
            "Deleting it would delete related objects the user may not delete: "
            + ", ".join(sorted(map(str, perms_needed)))
            + ".",
        )
    return Deletable(model_admin, request, obj, {str(k): v for k, v in sorted(model_count.items())})


@tool(
    name="admin_delete",
    label=_("Delete a record in the admin"),
    description="Delete one object the way the admin's delete page does (related objects that "
    "cascade are deleted too and listed in the result). Needs the user's approval every time.",
    input_schema={
        "type": "object",
        "properties": {"model": MODEL, "id": OBJECT_ID},
        "required": ["model", "id"],
    },
    readonly=False,
    non_preallowable=True,
    permission=may_use_admin_tools,
    summary=delete_summary,
    preview=delete_preview,
)
def admin_delete(ctx: ToolContext, input: dict[str, Any]) -> dict[str, Any]:
    using = _write_db(input)
    with transaction.atomic(using=using):
        target = deletable(ctx.user, input, ctx.session)
        model_admin, request, obj = target.model_admin, target.request, target.obj
        result = {"ok": True, "deleted": True, **_object_json(model_admin, request, obj)}
        model_admin.log_deletions(request, [obj])
        model_admin.delete_model(request, obj)
    result["counts"] = target.counts
    return result


@dataclass
class ActionTarget:
    model_admin: Any
    request: Any
    func: Any
    description: str
    queryset: Any
    count: int


def action_target(user, input: dict[str, Any], session=None) -> ActionTarget:
    """A change list POST with the objects selected and the action's confirmation given
    (``delete_selected`` deletes at once when "post" is set): the action as ``get_actions``
    offers it to the user, and the selection through ``get_queryset``."""
    ids = [str(i) for i in input["ids"]]
    model_admin, request = bridge.model_admin_for(user, input["model"], session)
    bridge.require(model_admin, request, "view")
    request = bridge.admin_request(
        user, {"action": input["action"], "_selected_action": ids, "post": "yes"}
    )
    actions = model_admin.get_actions(request)
    if input["action"] not in actions:
        raise ToolError(
            "admin_action_unknown",
            f"{input['model']} has no admin action {input['action']!r} for this user.",
            actions=sorted(actions),
        )
    func, _, description = actions[input["action"]]
    # The ids as the admin's URLs carry them (``quote``d), read back with ``unquote``.
    keys: dict[str, Any] = {}
    try:
        for given in ids:
            keys[given] = model_admin.opts.pk.to_python(unquote(given))
        queryset = model_admin.get_queryset(request).filter(pk__in=list(keys.values()))
        found = set(queryset.values_list("pk", flat=True))
    except (ValidationError, ValueError, TypeError, OverflowError) as exc:
        raise _invalid("Invalid ids.", {"ids": [str(exc)]}) from exc
    missing = [given for given, key in keys.items() if key not in found]
    if missing:
        raise ToolError(
            "admin_object_not_found",
            f"No {model_admin.opts.verbose_name_plural} with ids {', '.join(missing)} that "
            "this user can see.",
        )
    return ActionTarget(model_admin, request, func, str(description), queryset, len(found))


@tool(
    name="admin_action",
    label=_("Run an admin action"),
    description="Run one of a model's admin actions (as admin_models lists them) on the "
    "objects with the given ids, as if they were selected in the change list. Needs the "
    "user's approval every time.",
    input_schema={
        "type": "object",
        "properties": {
            "model": MODEL,
            "action": {"type": "string"},
            "ids": {
                "type": "array",
                "items": OBJECT_ID,
                "minItems": 1,
                "maxItems": MAX_ACTION_IDS,
            },
        },
        "required": ["model", "action", "ids"],
    },
    readonly=False,
    non_preallowable=True,
    permission=may_use_admin_tools,
    summary=action_summary,
    preview=action_preview,
)
def admin_action(ctx: ToolContext, input: dict[str, Any]) -> dict[str, Any]:
    using = _write_db(input)
    with transaction.atomic(using=using):
        target = action_target(ctx.user, input, ctx.session)
        try:
            response = target.func(target.model_admin, target.request, target.queryset)
        except PermissionDenied as exc:  # delete_selected, confirmed without the permissions
            raise ToolError(
                "admin_permission_denied", str(exc) or "The user may not run this action."
            ) from exc
    result: dict[str, Any] = {
        "ok": True,
        "action": input["action"],
        "count": target.count,
        "messages": target.request._messages.collected,
    }
    if isinstance(response, HttpResponseBase):
        # A download or an intermediate page: its body is for a browser, not for the model.
        result["response"] = {
            "status": response.status_code,
            "contentType": response.get("Content-Type", ""),
        }
        # An action that asks again instead of acting (delete_selected's confirmation page when
        # protected objects or missing permissions stop it) says why in its context.
        context = getattr(response, "context_data", None) or {}
        if context.get("protected"):
            raise ToolError(
                "admin_delete_protected",
                "Protected related objects prevent the deletion.",
                protected=[strip_tags(str(p)) for p in context["protected"]][:20],
                response=result["response"],
            )
        if context.get("perms_lacking"):
            raise ToolError(
                "admin_permission_denied",
                "The action would delete related objects the user may not delete: "
                + ", ".join(sorted(map(str, context["perms_lacking"])))
                + ".",
                response=result["response"],
            )
    return result
