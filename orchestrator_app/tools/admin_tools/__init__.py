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

from typing import Any

from django.contrib.admin.utils import model_format_dict
from django.core.exceptions import FieldDoesNotExist, FieldError, ValidationError
from django.db import models, router, transaction
from django.http import HttpResponseBase

from .. import ToolContext, ToolError, tool
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
TEXT_KINDS = ("html", "markdown", "post_content")

MODEL = {"type": "string", "description": "app_label.model, as admin_models lists it"}
OBJECT_ID = {"type": ["string", "integer"], "description": "primary key"}


class FromArtifact(str):
    """A value that comes from a staged artifact: shown by key, never quoted as text."""

    def __str__(self) -> str:
        return f"from artifact {super().__str__()}"


def _short(value: Any, limit: int) -> str:
    quoted = isinstance(value, str) and not isinstance(value, FromArtifact)
    text = " ".join(str(value).split()) if quoted else str(value)
    text = f"“{text}”" if quoted else text
    return text if len(text) <= limit else text[: max(limit - 1, 1)] + "…"


def _model_name(label: Any) -> tuple[Any, str]:
    model = bridge.model_for_label(str(label or ""))
    return model, (str(model._meta.verbose_name) if model else str(label))


def _current(model, object_id: Any):
    try:
        return model._default_manager.filter(pk=object_id).first()
    except (ValueError, TypeError, ValidationError):
        return None


def _object_name(obj, object_id: Any) -> str:
    return f"{_short(str(obj), 60)} (#{object_id})" if obj is not None else f"#{object_id}"


def save_summary(input: dict[str, Any]) -> str:
    """The approval card: model and object, and what changes (before -> after when updating)."""
    model, name = _model_name(input.get("model"))
    values = dict(input.get("values") or {})
    field = input.get("body_field")
    if field and "from_memory" in input:
        values[field] = FromArtifact(input["from_memory"])
    elif field and "body" in input:
        values[field] = input["body"]
    object_id = input.get("id")
    if object_id in (None, ""):
        head = f"Create {name}: "
        each = max(16, (SUMMARY_CHARS - len(head)) // max(len(values), 1) - len(", "))
        return head + ", ".join(f"{k} {_short(v, each)}" for k, v in values.items())
    obj = _current(model, object_id) if model else None
    head = f"Update {name} {_object_name(obj, object_id)}: "
    changes = []
    for key, after in values.items():
        before = None
        if obj is not None:
            try:
                before = bridge.field_data(obj._meta.get_field(key), obj)
            except (FieldDoesNotExist, AttributeError):
                before = None
        if before is not None and bridge.to_json(after) == before:
            continue
        changes.append((key, before, after))
    if not changes:
        return head + "no changes"
    each = max(12, (SUMMARY_CHARS - len(head)) // len(changes) // 2 - len(" → ") - 2)
    return head + "; ".join(
        f"{k} {_short(b, each) if b is not None else '?'} → {_short(a, each)}"
        for k, b, a in changes
    )


def delete_summary(input: dict[str, Any]) -> str:
    model, name = _model_name(input.get("model"))
    obj = _current(model, input.get("id")) if model else None
    return f"Delete {name} {_object_name(obj, input.get('id'))}"


def action_summary(input: dict[str, Any]) -> str:
    model, _ = _model_name(input.get("model"))
    ids = list(input.get("ids") or [])
    plural = str(model._meta.verbose_name_plural) if model else str(input.get("model"))
    shown = ", ".join(f"#{i}" for i in ids[:10]) + (", …" if len(ids) > 10 else "")
    return f"Run the admin action {input.get('action')} on {len(ids)} {plural} ({shown})"


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


def _filter_paths(model_admin, request) -> list[str]:
    paths = []
    for entry in model_admin.get_list_filter(request):
        if isinstance(entry, (list, tuple)):
            entry = entry[0]
        if isinstance(entry, str):
            paths.append(entry)
    return paths


def _columns(model_admin, request) -> list[str]:
    hidden = bridge._hidden(model_admin)
    return [
        c
        for c in model_admin.get_list_display(request)
        if isinstance(c, str)
        and c not in ("action_checkbox", "__str__")
        and c not in hidden
        and not bridge._sensitive(c)
    ]


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
    return {
        "model": bridge.model_label(model_admin.model),
        "name": str(opts.verbose_name),
        "namePlural": str(opts.verbose_name_plural),
        "permissions": granted,
        "fields": fields,
        "columns": _columns(model_admin, request),
        "filters": _filter_paths(model_admin, request),
        "search": bool(model_admin.get_search_fields(request)),
        "actions": actions,
    }


@tool(
    name="admin_models",
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
        model_admin, request = bridge.model_admin_for(ctx.user, input["model"])
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
        for label, (model_admin, granted) in bridge.usable_admins(ctx.user).items()
    ]
    return {"ok": True, "models": models_}


# --- list and get ---------------------------------------------------------------------------------


def _invalid(message: str, errors: dict[str, Any], **data: Any) -> ToolError:
    return ToolError("admin_invalid", message, errors=errors, **data)


@tool(
    name="admin_list",
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
    model_admin, request = bridge.model_admin_for(ctx.user, input["model"])
    bridge.require(model_admin, request, "view")
    queryset = model_admin.get_queryset(request)
    filters = input.get("filters") or {}
    paths = _filter_paths(model_admin, request)
    for key, value in sorted(filters.items()):
        if not any(key == p or key.startswith(p + "__") for p in paths) or not (
            model_admin.lookup_allowed(key, value, request)
        ):
            raise _invalid(
                f"{key} is not one of the model's list filters.",
                {"filters": [f"Unknown filter {key!r}."]},
                filters=paths,
            )
        queryset = queryset.filter(**{key: value})
    if input.get("search"):
        queryset, may_have_duplicates = model_admin.get_search_results(
            request, queryset, input["search"]
        )
        if may_have_duplicates:
            queryset = queryset.distinct()
    readable = bridge.readable_fields(model_admin, request)
    ordering = input.get("ordering")
    if ordering:
        if ordering.lstrip("-") not in readable + ["pk"]:
            raise _invalid(
                f"Cannot order by {ordering!r}.", {"ordering": ["Order by a field of the model."]}
            )
        order = [ordering]
    else:
        order = list(model_admin.get_ordering(request) or model_admin.opts.ordering or [])
    queryset = queryset.order_by(*order, "-pk")  # the primary key makes pages deterministic
    limit = int(input.get("limit") or DEFAULT_LIMIT)
    offset = int(input.get("offset") or 0)
    try:
        total = queryset.count()
        objects = list(queryset[offset : offset + limit])
    except (ValidationError, ValueError, TypeError, FieldError) as exc:
        raise _invalid("The filters do not fit the fields.", {"filters": [str(exc)]}) from exc
    columns = _columns(model_admin, request)
    rows = [
        {
            "id": bridge.to_json(obj.pk),
            "repr": str(obj),
            **{c: bridge.column_text(model_admin, obj, c) for c in columns},
        }
        for obj in objects
    ]
    result: dict[str, Any] = {"ok": True, "model": bridge.model_label(model_admin.model)}
    result.update(count=total, offset=offset, rows=rows)
    if offset + len(rows) < total:
        result["nextOffset"] = offset + len(rows)
    return result


def _object_json(model_admin, request, obj) -> dict[str, Any]:
    data: dict[str, Any] = {
        "model": bridge.model_label(model_admin.model),
        "id": bridge.to_json(obj.pk),
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
    model_admin, request = bridge.model_admin_for(ctx.user, input["model"])
    obj = bridge.get_object(model_admin, request, input["id"])
    bridge.require(model_admin, request, "view", obj)
    return {
        "ok": True,
        **_object_json(model_admin, request, obj),
        "permissions": bridge.permissions(model_admin, request, obj),
        "fields": bridge.object_fields(model_admin, request, obj),
    }


# --- writes: one transaction each, logged like the admin's views ---------------------------------


@tool(
    name="admin_save",
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
)
def admin_save(ctx: ToolContext, input: dict[str, Any]) -> dict[str, Any]:
    model_admin, request = bridge.model_admin_for(ctx.user, input["model"])
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
    form = form_class(bridge.form_data(current, values), {}, instance=obj)
    try:
        with transaction.atomic(using=router.db_for_write(model_admin.model)):
            if not form.is_valid():
                raise _invalid("The admin form refused the values.", bridge.field_errors(form))
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


@tool(
    name="admin_delete",
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
)
def admin_delete(ctx: ToolContext, input: dict[str, Any]) -> dict[str, Any]:
    model_admin, request = bridge.model_admin_for(ctx.user, input["model"])
    obj = bridge.get_object(model_admin, request, input["id"])
    bridge.require(model_admin, request, "delete", obj)
    _, model_count, perms_needed, protected = model_admin.get_deleted_objects([obj], request)
    if perms_needed:
        raise ToolError(
            "admin_permission_denied",
            "Deleting it would delete related objects the user may not delete: "
            + ", ".join(sorted(map(str, perms_needed)))
            + ".",
        )
    if protected:
        raise ToolError(
            "admin_delete_protected",
            "Protected related objects prevent the deletion.",
            protected=[str(p) for p in protected][:20],
        )
    result = {"ok": True, "deleted": True, **_object_json(model_admin, request, obj)}
    with transaction.atomic(using=router.db_for_write(model_admin.model)):
        model_admin.log_deletions(request, [obj])
        model_admin.delete_model(request, obj)
    result["counts"] = {str(k): v for k, v in sorted(model_count.items())}
    return result


@tool(
    name="admin_action",
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
)
def admin_action(ctx: ToolContext, input: dict[str, Any]) -> dict[str, Any]:
    ids = [str(i) for i in input["ids"]]
    model_admin, request = bridge.model_admin_for(ctx.user, input["model"])
    bridge.require(model_admin, request, "view")
    # The POST of a change list with the objects selected and the action's confirmation given
    # (delete_selected deletes at once when "post" is set).
    request = bridge.admin_request(
        ctx.user, {"action": input["action"], "_selected_action": ids, "post": "yes"}
    )
    actions = model_admin.get_actions(request)
    if input["action"] not in actions:
        raise ToolError(
            "admin_action_unknown",
            f"{input['model']} has no admin action {input['action']!r} for this user.",
            actions=sorted(actions),
        )
    func = actions[input["action"]][0]
    try:
        queryset = model_admin.get_queryset(request).filter(pk__in=ids)
        found = {str(pk) for pk in queryset.values_list("pk", flat=True)}
    except (ValidationError, ValueError, TypeError) as exc:
        raise _invalid("Invalid ids.", {"ids": [str(exc)]}) from exc
    missing = [i for i in ids if i not in found]
    if missing:
        raise ToolError(
            "admin_object_not_found",
            f"No {model_admin.opts.verbose_name_plural} with ids {', '.join(missing)} that "
            "this user can see.",
        )
    with transaction.atomic(using=router.db_for_write(model_admin.model)):
        response = func(model_admin, request, queryset)
    result: dict[str, Any] = {
        "ok": True,
        "action": input["action"],
        "count": len(found),
        "messages": request._messages.collected,
    }
    if isinstance(response, HttpResponseBase):
        # A download or an intermediate page: its body is for a browser, not for the model.
        result["response"] = {
            "status": response.status_code,
            "contentType": response.get("Content-Type", ""),
        }
    return result
