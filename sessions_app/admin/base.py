"""What every admin page of the apps builds on: read-only model admins, the user columns, the
JSON and table helpers, and the registry through which the apps above this one add to the
Session admin (``extend_session_admin``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import flatten_fieldsets
from django.contrib.auth import get_user_model
from django.core.exceptions import FieldDoesNotExist
from django.urls import reverse
from django.utils import formats, timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

EXCERPT_CHARS = 200


# Rendering helpers, shared with the other apps' admins.


def pretty_json(value: Any) -> SafeString:
    """A JSON value indented in a <pre>, escaped; "-" when empty."""
    if value in (None, "", [], {}):
        return SafeString("-")
    text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)
    return format_html('<pre style="white-space: pre-wrap; margin: 0">{}</pre>', text)


def zoned_time(value, shown: str = "DATETIME_FORMAT") -> SafeString:
    """A time in the current time zone (the user's, when the site activates it), saying its
    zone: ``<time datetime="ISO">Dec. 6, 2026, 7:20 p.m. CET</time>``."""
    if value is None:
        return SafeString("-")
    local = timezone.localtime(value)
    return format_html(
        '<time datetime="{}">{} {}</time>',
        local.isoformat(),
        formats.date_format(local, shown),
        formats.date_format(local, "T"),
    )


def compact(value: Any, limit: int = EXCERPT_CHARS) -> str:
    """A JSON value on one line, cut at ``limit`` characters (an admin message's)."""
    return excerpt(json.dumps(value, sort_keys=True, ensure_ascii=False, default=str), limit)


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    text = text or ""
    return text if len(text) <= limit else text[:limit] + "…"


def html_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> SafeString:
    """An admin-styled table. Cells are escaped unless they are already safe (links)."""
    rows = list(rows)
    if not rows:
        return SafeString("-")
    head = format_html_join("", "<th>{}</th>", ((h,) for h in headers))
    body = format_html_join(
        "",
        "<tr>{}</tr>",
        ((format_html_join("", "<td>{}</td>", ((cell,) for cell in row)),) for row in rows),
    )
    return format_html("<table><thead><tr>{}</tr></thead><tbody>{}</tbody></table>", head, body)


def admin_link(obj, text: Any, site_name: str = "admin") -> SafeString:
    """A link to ``obj``'s change page on the admin site named ``site_name`` (a host may
    register these models on its own ``AdminSite`` too)."""
    url = reverse(
        f"admin:{obj._meta.app_label}_{obj._meta.model_name}_change",
        args=[obj.pk],
        current_app=site_name,
    )
    return format_html('<a href="{}">{}</a>', url, text)


def user_search_fields(relation: str) -> list[str]:
    """The search lookups for a relation to the user model, named from the user model itself:
    its ``USERNAME_FIELD``, and its email field when it has one. Never ``username``: a host's
    user model need not have one (``AbstractBaseUser`` is all the app requires)."""
    user_model = get_user_model()
    names = [user_model.USERNAME_FIELD]
    email = user_model.get_email_field_name()
    if email not in names:
        try:
            user_model._meta.get_field(email)
        except FieldDoesNotExist:
            pass
        else:
            names.append(email)
    return [f"{relation}__{name}" for name in names]


class UserColumnsAdmin(admin.ModelAdmin):
    """An admin whose ``user_relations`` (foreign keys to the user model) are searched by
    ``user_search_fields``; show them with ``UsernameColumn``."""

    user_relations: Sequence[str] = ()

    def get_search_fields(self, request):
        user_fields = [f for r in self.user_relations for f in user_search_fields(r)]
        return [*super().get_search_fields(request), *user_fields]


class UsernameColumn:
    """A list column, ``owner_name = UsernameColumn("owner")``: the related user's
    ``get_username()`` (its ``__str__`` may be anything the host chose), sorted by the user
    model's ``USERNAME_FIELD``. Both are read from the user model when used, not at import."""

    def __init__(self, relation: str):
        self.relation = relation
        self.short_description = relation.replace("_", " ")

    @property
    def admin_order_field(self) -> str:
        return f"{self.relation}__{get_user_model().USERNAME_FIELD}"

    def __call__(self, obj) -> str:
        user = getattr(obj, self.relation)
        return user.get_username() if user is not None else "-"


class OwnerAgentColumn(UsernameColumn):
    """The Session list's owner column, with the agent and version the session runs with under
    the owner's name (the list keeps its six columns)."""

    def __init__(self, relation: str):
        super().__init__(relation)
        self.short_description = "owner / agent"

    def __call__(self, obj) -> SafeString:
        version = obj.agent_version
        agent = f"{version.agent} v{version.number}" if version is not None else "no agent"
        return format_html(
            '{}<br><span class="ahentic-muted">{}</span>', super().__call__(obj), agent
        )


def json_column(field: str):
    """A read-only admin column showing the JSON field ``field`` pretty-printed."""

    @admin.display(description=field.replace("_", " "))
    def render(model_admin, obj) -> SafeString:
        return pretty_json(getattr(obj, field))

    return render


class ReadOnlyAdmin(UserColumnsAdmin):
    """View-only: the list and the detail open, nothing can be added, edited or deleted."""

    def get_readonly_fields(self, request, obj=None):
        # Everything shown is read-only, even if a subclass grants change permission.
        return flatten_fieldsets(self.get_fieldsets(request, obj))

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


def counted(number: int, noun: str) -> str:
    """ "1 run", "2 runs"."""
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


# --- what the apps above add to the Session admin --------------------------------------------


@dataclass
class SessionAdminExtensions:
    """The admin actions, read-only sections and delete hooks the apps above this one add to
    the Session admin (``extend_session_admin``). ``SessionAdmin`` reads it on each request,
    so the order in which apps load does not matter and no class is changed after the fact."""

    actions: list[Callable] = field(default_factory=list)
    # (name, title, render(session, site_name)), shown before the memory snapshots.
    sections: list[tuple[str, str, Callable[[Any, str], SafeString]]] = field(default_factory=list)
    before_delete: list[Callable[[Any], None]] = field(default_factory=list)


session_admin_extensions = SessionAdminExtensions()


def extend_session_admin(
    *,
    actions: Sequence[Callable] = (),
    sections: Sequence[tuple[str, str, Callable[[Any, str], SafeString]]] = (),
    before_delete: Callable[[Any], None] | None = None,
) -> None:
    """The hook the apps above this one use to add to the Session admin, from their admin
    module.

    ``actions``: admin actions (declare ``allowed_permissions``). ``sections``: read-only
    sections ``(name, title, render(session, site_name))`` shown before the memory snapshots
    (``site_name``: the admin site's, for ``admin_link``), so before the runs.
    ``before_delete``: called with a session id before the session is deleted. Adding the same
    action, section or hook again (a module imported twice) changes nothing.
    """
    extensions = session_admin_extensions
    for action in actions:
        if action not in extensions.actions:
            extensions.actions.append(action)
    for section in sections:
        if all(section[0] != known[0] for known in extensions.sections):
            extensions.sections.append(tuple(section))
    if before_delete is not None and before_delete not in extensions.before_delete:
        extensions.before_delete.append(before_delete)
