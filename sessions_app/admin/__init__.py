"""Read-only inspection of agent sessions in the Django admin.

Nothing here edits session state: every model admin is view-only (``has_change_permission``
returns False, so Django renders the change page read-only and refuses its POST), but for the
session's spend cap (``caps``: the one field its change form edits, through
``runstate``), and the other write, deleting a session, goes through ``services.session_delete``. The apps above this one add
what they own to the one Session admin through ``extend_session_admin`` (artifacts_app its
artifacts table, orchestrator_app the run actions: cancel, continue, heal, export diagnostics),
since this app cannot import them.

Pending messages, goals and memory snapshots have no admin of their own: they are tables on the
session page, before its runs (``runs``: the events and the trace, one section per run).

Agents are edited here (``AgentAdmin``, the one admin that writes through a form): a save whose
configuration changed makes a new version; versions are listed, compared and rolled back to on
the agent's pages, never edited.
"""

from __future__ import annotations

import json
import re
import uuid
from decimal import Decimal
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.options import IS_POPUP_VAR
from django.contrib.admin.utils import quote, unquote
from django.contrib.auth.models import Permission
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Count, F, Max, ProtectedError
from django.http import HttpResponseBase, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import formats, timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _

from .. import agents, runstate, services
from ..models import Agent, Event, Goal, Session, TraceEvent
from .base import (
    OwnerAgentColumn,
    ReadOnlyAdmin,
    admin_link,
    compact,
    excerpt,
    html_table,
    json_column,
    pretty_json,
    session_admin_extensions,
    zoned_time,
)
from .caps import SpendCapAdminMixin
from .runs import session_runs

CONVERSATION_MESSAGES = 50  # the newest messages the session page shows as the conversation


@admin.register(Session)
class SessionAdmin(SpendCapAdminMixin, ReadOnlyAdmin):
    # Six columns that fit a 1366 px laptop beside the admin's navigation and the filters (the
    # template's CSS keeps them from wrapping word by word): a long title is clipped to two
    # lines with the whole title as its tooltip; the mode goes under the status, the cost under
    # the tokens, the sub-agents under the steps.
    list_display = [
        "title_column",
        "owner_name",
        "status_column",
        "usage",
        "steps",
        "updated",
    ]
    list_filter = [
        "status",
        "mode",
        "view_mode",
        ("agent_version__agent", admin.RelatedOnlyFieldListFilter),
        "updated_at",
    ]
    search_fields = ["title"]
    user_relations = ["owner"]
    search_help_text = "Title, the owner's user name or email, or a session id."
    list_select_related = ["owner", "agent_version__agent"]
    # The apps above add actions, sections and delete hooks through ``extend_session_admin``
    # (``base.session_admin_extensions``: the run actions of orchestrator_app, the artifacts
    # table of artifacts_app), read on each request below.
    actions: list = ["agent_version_latest"]

    # The conversation first, then what staff act on (the cost and its cap, sub-agents, goals,
    # queued messages, what other apps add), then the run internals folded.
    fieldsets = [
        (
            None,
            {
                "fields": [
                    "id",
                    ("title", "title_source"),
                    "owner",
                    "agent_detail",
                    ("status", "mode", "view_mode"),
                    "parent",
                    ("created_at", "updated_at"),
                ]
            },
        ),
        (_("Conversation"), {"fields": ["conversation"]}),
        (
            "Tokens",
            {
                "fields": [
                    ("tokens_in", "tokens_out", "cache_read_tokens", "cache_write_tokens"),
                    "cost_usd",
                    ("spend_cap_usd", "spend_cap_loaded"),  # caps.py
                ]
            },
        ),
        ("Sub-agents", {"fields": ["children_table"]}),
        ("Goals", {"fields": ["goals_table"]}),
        ("Pending messages", {"fields": ["pending_messages_table"]}),
        ("Memory", {"fields": ["snapshots_table"]}),
        (
            _("Run internals"),
            {
                "classes": ["collapse"],
                "fields": [
                    "prompt",
                    ("run_seq", "step_count", "last_seq", "trace_count", "version"),
                    ("heartbeat_at", "browser_paused_at"),
                    ("lease_token", "lease_expires_at"),
                    ("job_resumable", "content_work", "soft_budget_acked"),
                    ("last_error_code", "last_error"),
                    ("active_workflow", "viewport_start_event_id", "fork_event_id"),
                ],
            },
        ),
        (
            "State",
            {
                "classes": ["collapse"],
                "fields": [
                    "progress_json",
                    "plan_json",
                    "pending_tool_json",
                    "page_context_json",
                    "context_usage_json",
                    "hitl_allows_json",
                    "capability_requests_json",
                    "granted_tools_json",
                    "active_skills_json",
                ],
            },
        ),
        # The events and the trace follow, one section per run (``runs``).
    ]

    def get_queryset(self, request):
        # One COUNT per page instead of one query per row for the children column.
        return super().get_queryset(request).annotate(children_count=Count("children"))

    def get_search_results(self, request, queryset, search_term):
        # A pasted session id is an exact primary-key match; text search cannot match a UUID
        # portably (SQLite stores it without dashes).
        try:
            pk = uuid.UUID(search_term.strip())
        except ValueError:
            return super().get_search_results(request, queryset, search_term)
        return queryset.filter(pk=pk), False

    def get_actions(self, request):
        actions = super().get_actions(request)
        if IS_POPUP_VAR in request.GET:
            return actions
        for func in session_admin_extensions.actions:
            perms = getattr(func, "allowed_permissions", ())
            if all(getattr(self, f"has_{perm}_permission")(request) for perm in perms):
                description = getattr(func, "short_description", func.__name__)
                actions[func.__name__] = (func, func.__name__, description)
        return actions

    def get_fieldsets(self, request, obj=None):
        # The apps' read-only sections go before the memory snapshots, so before the runs.
        fieldsets = list(super().get_fieldsets(request, obj))
        added = [
            (title, {"fields": [name]}) for name, title, _ in session_admin_extensions.sections
        ]
        at = next(i for i, (title, _) in enumerate(fieldsets) if title == "Memory")
        return [*fieldsets[:at], *added, *fieldsets[at:]]

    def __getattr__(self, name: str):
        # A section's field: rendered by the app that added it (``extend_session_admin``).
        for section, title, render in session_admin_extensions.sections:
            if name == section:
                return admin.display(description=title.lower())(
                    lambda obj, render=render: render(obj, self.admin_site.name)
                )
        raise AttributeError(name)

    def delete_model(self, request, obj) -> None:
        for hook in session_admin_extensions.before_delete:
            hook(obj.pk)
        services.session_delete(session_id=obj.pk)

    def delete_queryset(self, request, queryset) -> None:
        for session_id in queryset.values_list("pk", flat=True):
            for hook in session_admin_extensions.before_delete:
                hook(session_id)
            services.session_delete(session_id=session_id)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        # The list's actions (already filtered by their permissions) as buttons on this page.
        extra_context = {
            **(extra_context or {}),
            "run_actions": self.run_actions(request),
            "run_actions_url": reverse(
                f"{self.admin_site.name}:sessions_app_session_run", args=[quote(object_id)]
            ),
        }
        return super().change_view(request, object_id, form_url, extra_context)

    def render_change_form(self, request, context, add=False, change=False, form_url="", obj=None):
        if obj is not None:  # the events and trace by run, as the query string pages them
            site = self.admin_site.name
            context = {
                **context,
                "session_runs": session_runs(
                    obj, request.GET, lambda row, text: admin_link(row, text, site)
                ),
            }
        return super().render_change_form(request, context, add, change, form_url, obj)

    def run_actions(self, request) -> list[tuple[str, str]]:
        return [
            (name, description)
            for name, (_func, _name, description) in self.get_actions(request).items()
            if name != "delete_selected"  # the page has its own Delete link
        ]

    def get_urls(self):
        run = path(
            "<path:object_id>/run/",
            self.admin_site.admin_view(self.run_action_view),
            name="sessions_app_session_run",
        )
        return [run, *super().get_urls()]  # before the catch-all change URL

    def run_action_view(self, request, object_id):
        """A run button of the change page: the list's action (as ``get_actions`` offers it to
        this user, so with the same permission checks) on this one session, then back to the
        page with the action's message. A download (export diagnostics) is answered as is."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        obj = self.get_object(request, unquote(object_id))
        if obj is None or not self.has_view_or_change_permission(request, obj):
            return self._get_obj_does_not_exist_redirect(request, self.opts, object_id)
        page = reverse(f"{self.admin_site.name}:sessions_app_session_change", args=[quote(obj.pk)])
        name = request.POST.get("action", "")
        if name not in dict(self.run_actions(request)):
            self.message_user(request, "You may not run that action here.", messages.ERROR)
            return HttpResponseRedirect(page)
        func = self.get_actions(request)[name][0]
        response = func(self, request, self.get_queryset(request).filter(pk=obj.pk))
        if isinstance(response, HttpResponseBase):
            return response
        return HttpResponseRedirect(page)

    def has_run_control_permission(self, request) -> bool:
        """Cancel, continue and heal runs (``sessions_app.control_runs``); actions that declare
        ``allowed_permissions=("run_control",)`` check it, on the list and on the detail page."""
        return request.user.has_perm("sessions_app.control_runs")

    def has_delete_permission(self, request, obj=None) -> bool:
        # Deleting is the one write allowed here (Django's default rule, not ReadOnlyAdmin's).
        return admin.ModelAdmin.has_delete_permission(self, request, obj)

    def get_deleted_objects(self, objs, request):
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        # Events, trace rows and artifacts go with their session. Their admins refuse deletes
        # only so no one prunes a conversation piecemeal, which must not block this cascade.
        return deleted, counts, set(), protected

    # List columns

    owner_name = OwnerAgentColumn("owner")

    @admin.display(description="title", ordering="title")
    def title_column(self, obj: Session) -> SafeString:
        return format_html('<span class="ahentic-clip" title="{}">{}</span>', obj.title, obj.title)

    @admin.display(description="status", ordering="status")
    def status_column(self, obj: Session) -> SafeString:
        return format_html(
            '{}<br><span class="ahentic-muted">{} mode</span>',
            obj.get_status_display(),
            obj.mode,
        )

    @admin.display(description="tokens / cost", ordering=F("tokens_in") + F("tokens_out"))
    def usage(self, obj: Session) -> SafeString:
        cost = f"${obj.cost_usd:,.4f}" if obj.cost_usd is not None else "-"
        return format_html(
            '{}<br><span class="ahentic-muted">{}</span>', f"{obj.tokens_used:,}", cost
        )

    @admin.display(description="steps", ordering="step_count")
    def steps(self, obj: Session) -> SafeString:
        children = obj.children_count
        if not children:
            return format_html("{}", obj.step_count)
        subs = "1 sub-agent" if children == 1 else f"{children} sub-agents"
        return format_html('{}<br><span class="ahentic-muted">{}</span>', obj.step_count, subs)

    @admin.display(description="updated", ordering="updated_at")
    def updated(self, obj: Session) -> SafeString:
        local = timezone.localtime(obj.updated_at)
        return format_html(
            '<span title="{}">{}<br>{}</span>',
            formats.date_format(local, "DATETIME_FORMAT"),
            formats.date_format(local, "M j, Y"),
            formats.date_format(local, "H:i T"),
        )

    # The agent version a session runs with.

    @admin.display(description="agent")
    def agent_detail(self, obj: Session) -> SafeString | str:
        version = obj.agent_version
        if version is None:
            return "- (the site's settings)"
        latest = agents.latest_version(version.agent)
        # A host's other AdminSite may register sessions without the agents' admin.
        site, agent = self.admin_site, version.agent
        own_admin = site.is_registered(Agent) and isinstance(
            site.get_model_admin(Agent), AgentAdmin
        )
        link = admin_link(agent, agent, site.name) if site.is_registered(Agent) else str(agent)
        if latest is None or latest.pk == version.pk:
            return format_html("{} v{} (its latest version)", link, version.number)
        if not own_admin:
            return format_html("{} v{} (latest: v{})", link, version.number, latest.number)
        compare = reverse(
            f"{site.name}:sessions_app_agent_versions_compare", args=[quote(version.agent_id)]
        )
        return format_html(
            '{} v{} (latest: <a href="{}?a={}&amp;b={}">v{}</a>)',
            link,
            version.number,
            compare,
            version.number,
            latest.number,
            latest.number,
        )

    @admin.action(description="Move to the agent's latest version", permissions=["run_control"])
    def agent_version_latest(self, request, queryset) -> None:
        """Pin each session to its agent's latest version (never during a live run), saying
        what changes for it (``agents.config_diff``)."""
        for session in queryset.select_related("agent_version__agent"):
            version = session.agent_version
            if version is None:
                self.message_user(
                    request,
                    f"“{session.title}” runs with the site's settings: no agent.",
                    messages.WARNING,
                )
                continue
            latest = agents.latest_version(version.agent)
            if latest.pk == version.pk:
                self.message_user(
                    request,
                    f"“{session.title}” is already on {version.agent} v{version.number}.",
                    messages.INFO,
                )
                continue
            moved = runstate.agent_version_set(
                session_id=session.pk, version_id=latest.pk, from_version_id=version.pk
            )
            if not moved:
                self.message_user(
                    request,
                    f"“{session.title}” was not moved: a run is in progress (or it moved "
                    "meanwhile). Try again when it stops.",
                    messages.WARNING,
                )
                continue
            self.log_change(
                request,
                session,
                f"Moved from {version.agent} v{version.number} to v{latest.number}.",
            )
            changes = agents.config_diff(version.config, latest.config)
            described = "; ".join(
                f"{key}: {compact(before)} → {compact(after)}" for key, before, after in changes
            )
            self.message_user(
                request,
                f"“{session.title}” moved from {version.agent} v{version.number} to "
                f"v{latest.number}. "
                + (f"Changes: {described}." if described else "No setting changes."),
            )

    # Detail sections

    progress_json = json_column("progress")
    plan_json = json_column("plan")
    pending_tool_json = json_column("pending_tool")
    page_context_json = json_column("page_context")
    context_usage_json = json_column("context_usage")
    hitl_allows_json = json_column("hitl_allows")
    capability_requests_json = json_column("capability_requests")
    granted_tools_json = json_column("granted_tools")
    active_skills_json = json_column("active_skills")

    @admin.display(description=_("messages"))
    def conversation(self, obj: Session) -> SafeString:
        """The chat as its user saw it: the newest ``CONVERSATION_MESSAGES`` messages of the
        user and the agent (an edited message's earlier attempt left out), oldest first. Every
        event, tool calls included, is in the runs below."""
        messages_shown = list(
            obj.events.filter(
                kind__in=[Event.Kind.USER_MESSAGE, Event.Kind.AGENT_MESSAGE],
                superseded_by__isnull=True,
            )
            .order_by("-seq")
            .values_list("kind", "content", "created_at")[:CONVERSATION_MESSAGES]
        )[::-1]
        if not messages_shown:
            return SafeString("-")
        who = {Event.Kind.USER_MESSAGE: _("User"), Event.Kind.AGENT_MESSAGE: _("Agent")}
        items = format_html_join(
            "",
            '<li class="ahentic-message ahentic-{}"><p class="ahentic-message-meta">'
            '<strong>{}</strong> · {}</p><div class="ahentic-message-text">{}</div></li>',
            (
                (kind, who[kind], zoned_time(created_at), content)
                for kind, content, created_at in messages_shown
            ),
        )
        return format_html(
            '<ol class="ahentic-conversation" id="ahentic-conversation">{}</ol>', items
        )

    @admin.display(description="children")
    def children_table(self, obj: Session) -> SafeString:
        children = obj.children.order_by("created_at")
        return html_table(
            ["title", "status", "tokens used", "updated"],
            (
                (
                    admin_link(c, c.title, self.admin_site.name),
                    c.status,
                    c.tokens_used,
                    zoned_time(c.updated_at),
                )
                for c in children
            ),
        )

    @admin.display(description="goals")
    def goals_table(self, obj: Session) -> SafeString:
        goals = list(obj.goals.order_by("id"))
        by_parent: dict[int | None, list[Goal]] = {}
        for goal in goals:
            by_parent.setdefault(goal.parent_id, []).append(goal)
        # Roots, each followed by its sub-goals (two levels at most).
        ordered = [
            (depth, goal)
            for root in by_parent.get(None, [])
            for depth, goal in [(0, root), *((1, sub) for sub in by_parent.get(root.pk, []))]
        ]
        return html_table(
            ["id", "description", "status", "completed"],
            (
                (
                    g.pk,
                    ("↳ " if depth else "") + g.description,
                    g.status,
                    zoned_time(g.completed_at),
                )
                for depth, g in ordered
            ),
        )

    @admin.display(description="pending messages")
    def pending_messages_table(self, obj: Session) -> SafeString:
        return html_table(
            ["id", "source", "content", "created"],
            (
                (
                    p.pk,
                    f"{p.source_type} {p.source_name}".strip(),
                    excerpt(p.content),
                    zoned_time(p.created_at),
                )
                for p in obj.pending_messages.order_by("id")
            ),
        )

    @admin.display(description="memory snapshots")
    def snapshots_table(self, obj: Session) -> SafeString:
        return html_table(
            ["level", "events", "tokens", "text", "created"],
            (
                (
                    s.level,
                    f"{s.from_event_id}..{s.to_event_id}",
                    s.token_count,
                    excerpt(s.text),
                    zoned_time(s.created_at),
                )
                for s in obj.snapshots.order_by("from_event_id")
            ),
        )


@admin.register(Event)
class EventAdmin(ReadOnlyAdmin):
    list_display = ["session", "seq", "kind", "content_excerpt", "tool_name", "run", "created_at"]
    list_filter = ["kind", "created_at"]
    search_fields = ["content", "tool_use_id"]
    list_select_related = ["session"]
    fields = [
        "session",
        ("seq", "kind", "run", "superseded_by"),
        "tool_use_id",
        "token_count",
        "created_at",
        "content",
        "payload_json",
    ]
    payload_json = json_column("payload")

    # A repair: staff with ``sessions_app.change_event`` may correct or redact what an event
    # says; the next request to the model carries the new text.
    def has_change_permission(self, request, obj=None) -> bool:
        return admin.ModelAdmin.has_change_permission(self, request, obj)

    def get_readonly_fields(self, request, obj=None):
        return [f for f in super().get_readonly_fields(request, obj) if f != "content"]

    def save_model(self, request, obj, form, change) -> None:
        services.event_edit(event_id=obj.pk, content=obj.content)

    @admin.display(description="content")
    def content_excerpt(self, obj: Event) -> str:
        return excerpt(obj.content, 80)

    @admin.display(description="tool")
    def tool_name(self, obj: Event) -> str:
        return (obj.payload or {}).get("tool") or "-"


@admin.register(TraceEvent)
class TraceEventAdmin(ReadOnlyAdmin):
    list_display = ["session", "seq", "type", "step", "summary", "run", "at"]
    list_filter = ["type", "at"]
    search_fields = ["type", "summary"]
    list_select_related = ["session"]
    fields = ["session", ("seq", "run", "step"), "type", "summary", ("at", "ms"), "data_json"]
    data_json = json_column("data")


# --- Agents ------------------------------------------------------------------------------------
# Agents in the Django admin: edit one, see its versions, compare two, roll back.
#
# The agent's own fields save as any model's; its configuration (the overrides of ``AHENTIC``
# a run reads, ``agents.AGENT_KEYS``) is shown twice, as fields anyone can fill in ("What it
# does": model, instructions, tools and their approval...) and as the latest version's JSON
# (the "Advanced" fold); ``AgentForm.clean`` makes one configuration of both, and a save
# whose configuration differs makes a new version through ``agents.version_save`` (a new agent
# always gets version 1; an unchanged configuration makes none). Versions have no admin of their
# own and are never edited or deleted here: the agent's page lists them, ``versions/`` compares
# any two (``agents.config_diff``) and rolls back to one (a new version, ``agents.rollback``).
# Every save, rollback and "make default" is a ``LogEntry`` naming the version numbers.

COLOUR_RE = re.compile(r"^#[0-9a-fA-F]{6}$")
PERMISSION_RE = re.compile(r"^[\w.-]+\.[\w.-]+$")


class PrettyJSONField(forms.JSONField):
    """A JSON form field shown indented, keys sorted (the form a person edits)."""

    def prepare_value(self, value):
        if isinstance(value, forms.fields.InvalidJSONInput):
            return value
        return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


class ToolsWidget(forms.Widget):
    """The agent's tools as a table: "Every tool" or a checkbox per tool, each with its approval
    policy beside it. Its value: ``{"all": bool, "tools": [names], "approval": {name: policy}}``.
    Posted as ``<name>-all``, ``<name>`` (the checked names) and ``<name>-approval-<tool>``."""

    choices: list[tuple[str, str]] = []

    def value_from_datadict(self, data, files, name):
        getlist = getattr(data, "getlist", lambda key: data.get(key) or [])
        return {
            "all": bool(data.get(f"{name}-all")),
            "tools": list(getlist(name)),
            "approval": {
                tool: data.get(f"{name}-approval-{tool}")
                for tool, _label in self.choices
                if data.get(f"{name}-approval-{tool}")
            },
        }

    def value_omitted_from_data(self, data, files, name):
        return False

    def render(self, name, value, attrs=None, renderer=None):
        value = value or {"all": True, "tools": [], "approval": {}}
        ident = (attrs or {}).get("id") or f"id_{name}"
        policies = [
            ("", _("The tool's own rule")),
            ("always_ask", _("Always ask")),
            ("always_allow", _("Always allow")),
        ]
        rows = []
        for tool, label in self.choices:
            chosen = value["approval"].get(tool, "")
            options = format_html_join(
                "",
                '<option value="{}"{}>{}</option>',
                ((v, " selected" if v == chosen else "", text) for v, text in policies),
            )
            rows.append(
                format_html(
                    '<tr><td><input type="checkbox" name="{}" value="{}" id="{}-{}"{}> '
                    '<label for="{}-{}" class="vCheckboxLabel">{}</label> '
                    '<code>{}</code></td><td><select name="{}-approval-{}" aria-label="{}">{}'
                    "</select></td></tr>",
                    name,
                    tool,
                    ident,
                    tool,
                    " checked" if tool in value["tools"] else "",
                    ident,
                    tool,
                    label,
                    tool,
                    name,
                    tool,
                    _("Approval for %(tool)s") % {"tool": label},
                    options,
                )
            )
        return format_html(
            '<div id="{}" class="ahentic-tools"><p><input type="checkbox" name="{}-all" '
            'id="{}-all"{}> '
            '<label for="{}-all" class="vCheckboxLabel">{}</label></p>'
            '<table><thead><tr><th scope="col">{}</th><th scope="col">{}</th></tr></thead>'
            "<tbody>{}</tbody></table></div>",
            ident,
            name,
            ident,
            " checked" if value["all"] else "",
            ident,
            _("Every tool the user may use (the boxes below are ignored)"),
            _("tool"),
            _("approval"),
            SafeString("".join(rows)),
        )


class ToolsField(forms.Field):
    widget = ToolsWidget

    def __init__(self, *, choices=(), **kwargs):
        super().__init__(**kwargs)
        self.widget.choices = list(choices)

    def clean(self, value):
        known = {tool for tool, _label in self.widget.choices}
        value = value or {"all": True, "tools": [], "approval": {}}
        unknown = sorted(set(value["tools"]) - known)
        policies = set(value["approval"].values()) - set(agents.APPROVALS)
        if unknown or policies:
            raise ValidationError(
                _("Choose among the tools and approval policies listed."), code="invalid"
            )
        return value


def _whole(amount):
    """An amount in USD as the JSON configuration holds it: a whole number stays whole."""
    number = float(amount)
    return int(number) if number.is_integer() else number


class AgentForm(forms.ModelForm):
    """The agent's fields, and its configuration twice: as fields a person fills in (the model,
    instructions, tools and their approval, MCP servers, memory, spend cap, roster) and as the
    raw JSON (``configuration``, the "Advanced" fold). A save starts from the JSON and applies
    each field whose value differs from what the latest version says (``FORM_KEYS``), so a form
    save makes the same version as the same settings typed as JSON. A post without the fields
    (``structured`` absent) is the JSON alone."""

    structured = forms.BooleanField(required=False, initial=True, widget=forms.HiddenInput)
    model = forms.ChoiceField(
        required=False,
        label=_("Model"),
        help_text=_(
            "The models with prices in AHENTIC['PRICES'] (their USD per million "
            "tokens: input / output)."
        ),
    )
    instructions = forms.CharField(
        required=False,
        strip=False,
        label=_("Instructions"),
        widget=forms.Textarea(attrs={"rows": 6, "cols": 80}),
        help_text=_("What the agent is told before every chat (SOUL). Empty: the site's."),
    )
    tools = ToolsField(
        required=False,
        label=_("Tools"),
        help_text=_(
            "The tools it may use, and whether each asks before it runs. An agent "
            "never gives a user a tool their own permissions refuse."
        ),
    )
    mcp_servers = forms.MultipleChoiceField(
        required=False,
        label=_("MCP servers"),
        widget=forms.CheckboxSelectMultiple,
        help_text=_("Whose tools it may call. None checked: the site's list."),
    )
    memory = forms.ChoiceField(
        required=False,
        label=_("Memory"),
        choices=[
            ("", _("Off")),
            ("user", _("Each user's own memory")),
            ("user+shared", _("Each user's own memory and the site's shared memory")),
        ],
    )
    spend_cap = forms.DecimalField(
        required=False,
        label=_("Spend cap (USD)"),
        min_value=Decimal("0.0001"),
        decimal_places=4,
        help_text=_("A chat's cost at which its run pauses. Empty: no cap."),
    )
    roster = forms.MultipleChoiceField(
        required=False,
        label=_("Roster"),
        widget=forms.CheckboxSelectMultiple,
        help_text=_("The agents its sub-agents may be."),
    )
    configuration = PrettyJSONField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 16, "cols": 80, "style": "font-family: monospace"}),
        help_text="The settings this agent overrides, as a JSON object of AHENTIC keys "
        f"({', '.join(agents.AGENT_KEYS)}); a key left out is the site's value. "
        "Saving a changed configuration makes a new version.",
    )
    change_note = forms.CharField(
        required=False,
        max_length=255,
        help_text="What this change is for (kept with the new version).",
    )
    # The latest version when the page was opened: a configuration saved over a newer one
    # (another staff member's) is refused instead of silently replacing it.
    based_on = forms.IntegerField(required=False, widget=forms.HiddenInput)

    class Meta:
        model = Agent
        fields = [
            "slug",
            "name",
            "description",
            "colour",
            "permission",
            "groups",
            "shows_on",
            "active",
        ]
        widgets = {"groups": forms.CheckboxSelectMultiple}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        latest = agents.latest_version(self.instance) if self.instance.pk else None
        self.latest = latest
        config = latest.config if latest else {}
        self.fields["configuration"].initial = config
        self.fields["based_on"].initial = latest.number if latest else 0
        # The choices: what the site has, and whatever the latest version names besides.
        current = config.get("MODEL")
        priced = sorted((agents.ahentic_settings.PRICES or {}).items())
        self.fields["model"].choices = [
            ("", _("The site's model (%(model)s)") % {"model": agents.ahentic_settings.MODEL}),
            *(
                (name, f"{name} (${price.get('input', '?')} / ${price.get('output', '?')})")
                for name, price in priced
            ),
            *(
                [(current, f"{current} ({_('no prices')})")]
                if current and current not in dict(priced)
                else []
            ),
        ]
        tools = agents.choices("TOOLS")
        named = [t for t in config.get("TOOLS") or [] if t not in dict(tools)]
        self.fields["tools"].widget.choices = [*tools, *((t, t) for t in named)]
        servers = agents.choices("MCP_SERVERS")
        self.fields["mcp_servers"].choices = [
            *servers,
            *((s, s) for s in config.get("MCP_SERVERS") or [] if s not in dict(servers)),
        ]
        others = Agent.objects.exclude(pk=self.instance.pk).order_by("name")
        self.fields["roster"].choices = [(a.slug, f"{a.name} ({a.slug})") for a in others]
        self.form_initial = self.from_config(config)
        for key, value in self.form_initial.items():
            self.fields[key].initial = value

    # The fields a person fills in, and the configuration keys each one sets.
    FORM_KEYS = {
        "model": ("MODEL",),
        "instructions": ("SOUL",),
        "tools": ("TOOLS", "APPROVAL"),
        "mcp_servers": ("MCP_SERVERS",),
        "memory": ("MEMORY",),
        "spend_cap": ("SPEND_CAP_USD",),
        "roster": ("ROSTER",),
    }

    @staticmethod
    def from_config(config: dict[str, Any]) -> dict[str, Any]:
        """The fields' values for a configuration."""
        cap = config.get("SPEND_CAP_USD")
        return {
            "model": config.get("MODEL") or "",
            "instructions": config.get("SOUL") or "",
            "tools": {
                "all": config.get("TOOLS") is None,
                "tools": list(config.get("TOOLS") or []),
                "approval": dict(config.get("APPROVAL") or {}),
            },
            "mcp_servers": list(config.get("MCP_SERVERS") or []),
            "memory": config.get("MEMORY") or "",
            "spend_cap": _whole(cap) if isinstance(cap, int | float) else None,
            "roster": list(config.get("ROSTER") or []),
        }

    def _apply(self, config: dict[str, Any], field: str, value: Any) -> None:
        """Set (or leave out, for "the site's"/"none") the keys ``field`` stands for."""
        if field == "tools":
            tools = dict(self.fields["tools"].widget.choices)
            order = [t for t in tools if t in value["tools"]]
            if value["all"]:
                config.pop("TOOLS", None)
            else:
                config["TOOLS"] = order
            approval = {t: value["approval"][t] for t in tools if value["approval"].get(t)}
            if approval:
                config["APPROVAL"] = approval
            else:
                config.pop("APPROVAL", None)
            return
        (key,) = self.FORM_KEYS[field]
        if field == "spend_cap" and value is not None:
            value = _whole(value)
        if value in ("", None, []):
            config.pop(key, None)
        else:
            config[key] = value

    def clean_instructions(self) -> str:
        return (self.cleaned_data.get("instructions") or "").replace("\r\n", "\n")

    def clean_spend_cap(self):
        value = self.cleaned_data.get("spend_cap")
        return _whole(value) if value is not None else None

    def clean_configuration(self) -> dict[str, Any]:
        config = self.cleaned_data.get("configuration")
        return {} if config is None else config

    def clean(self):
        cleaned = super().clean()
        config = cleaned.get("configuration")
        if config is None:
            return cleaned
        if isinstance(config, dict) and cleaned.get("structured"):
            config = dict(config)
            for field in self.FORM_KEYS:
                if field in cleaned and cleaned[field] != self.form_initial[field]:
                    self._apply(config, field, cleaned[field])
        try:
            config = agents.clean_config(config)
        except ValidationError as error:
            self.add_error("configuration", ValidationError(error.messages))
            return cleaned
        cleaned["configuration"] = config
        latest = self.latest
        if (
            latest is not None
            and config != latest.config
            and cleaned.get("based_on") != latest.number
        ):
            who = latest.created_by.get_username() if latest.created_by else "someone"
            self.add_error(
                "configuration",
                f"v{latest.number} was saved by {who} after you opened this page: reload it "
                "to see that version, then make your change again.",
            )
        return cleaned

    def clean_colour(self) -> str:
        colour = (self.cleaned_data.get("colour") or "").strip()
        if colour and not COLOUR_RE.match(colour):
            raise ValidationError("A colour is #rrggbb (or blank).")
        return colour

    def clean_permission(self) -> str:
        name = (self.cleaned_data.get("permission") or "").strip()
        if not name:
            return name
        if not PERMISSION_RE.match(name):
            raise ValidationError('A permission is "app_label.codename" (or blank).')
        app_label, codename = name.split(".", 1)
        found = Permission.objects.filter(content_type__app_label=app_label, codename=codename)
        if not found.exists():
            raise ValidationError(f"No permission {name!r} exists.")
        return name


def _version_number(request, key: str) -> int | None:
    try:
        return int(request.GET.get(key, ""))
    except ValueError:
        return None


def _json_cell(value: Any) -> SafeString:
    text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)
    return format_html('<pre style="white-space: pre-wrap; margin: 0">{}</pre>', text)


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    form = AgentForm
    list_display = ["slug", "name", "shows_on", "is_default", "active", "latest_version"]
    list_filter = ["shows_on", "is_default", "active"]
    search_fields = ["slug", "name", "description"]
    readonly_fields = ["is_default", "created_at", "updated_at", "versions_table"]
    actions = ["make_default"]
    fieldsets = [
        (
            None,
            {
                "fields": [
                    ("slug", "name"),
                    "description",
                    "colour",
                    ("shows_on", "active", "is_default"),
                ]
            },
        ),
        ("Who may use it", {"fields": ["permission", "groups"]}),
        (
            _("What it does"),
            {
                "fields": [
                    "structured",
                    "model",
                    "instructions",
                    "tools",
                    "mcp_servers",
                    "memory",
                    "spend_cap",
                    "roster",
                    "change_note",
                ]
            },
        ),
        (
            _("Advanced: the configuration as JSON"),
            {
                "classes": ["collapse"],
                "fields": ["configuration", "based_on"],
                "description": _(
                    "Every setting the version overrides, the fields above included. A field "
                    "above that you change wins over the same key changed here."
                ),
            },
        ),
        ("Versions", {"fields": ["versions_table", ("created_at", "updated_at")]}),
    ]

    def get_fieldsets(self, request, obj=None):
        if obj is None:  # a new agent has no versions yet
            return [s for s in self.fieldsets if s[0] != "Versions"]
        return self.fieldsets

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(latest_number=Max("versions__number"))

    @admin.display(description="latest version", ordering="latest_number")
    def latest_version(self, obj: Agent) -> str:
        number = getattr(obj, "latest_number", None)
        return f"v{number}" if number else "-"

    # Saving: the agent, then a version when the configuration changed.

    def save_model(self, request, obj, form, change) -> None:
        super().save_model(request, obj, form, change)
        config = form.cleaned_data["configuration"]
        latest = form.latest if change else None
        form.new_version = None
        if latest is None or latest.config != config:
            form.new_version = agents.version_save(
                obj, config=config, user=request.user, note=form.cleaned_data["change_note"]
            )

    def construct_change_message(self, request, form, formsets, add=False):
        message = super().construct_change_message(request, form, formsets, add)
        version = getattr(form, "new_version", None)
        if version is not None:
            message.append({"added": {"name": "version", "object": f"v{version.number}"}})
        return message

    # Deleting: an agent whose versions sessions pin is protected (Session.agent_version); the
    # delete page lists those sessions. A session pinned meanwhile is a message, not a 500.

    def delete_view(self, request, object_id, extra_context=None):
        try:
            return super().delete_view(request, object_id, extra_context)
        except ProtectedError:
            self.message_user(request, self._protected_message(), messages.ERROR)
            return HttpResponseRedirect(self._url("change", object_id))

    def changelist_view(self, request, extra_context=None):
        try:
            return super().changelist_view(request, extra_context)
        except ProtectedError:
            self.message_user(request, self._protected_message(), messages.ERROR)
            return HttpResponseRedirect(self._url("changelist"))

    @staticmethod
    def _protected_message() -> str:
        return (
            "The agent was not deleted: sessions use its versions. Make it inactive instead "
            "(its chats go on, no new chat starts with it), or delete those sessions first."
        )

    # Making an agent the default one.

    @admin.action(description="Make the selected agent the default", permissions=["change"])
    def make_default(self, request, queryset) -> None:
        chosen = list(queryset[:2])
        if len(chosen) != 1:
            self.message_user(request, "Select exactly one agent.", messages.WARNING)
            return
        self._make_default(request, chosen[0])

    def _make_default(self, request, agent: Agent) -> None:
        if not agent.active:
            self.message_user(
                request,
                f"{agent} is inactive: make it active before making it the default.",
                messages.ERROR,
            )
            return
        agents.default_set(agent)
        latest = agents.latest_version(agent)
        version = f" (latest version v{latest.number})" if latest else ""
        self.log_change(request, agent, f"Made the default agent{version}.")
        self.message_user(request, f"{agent} is now the default agent{version}.")

    # The versions: the table on the change page, their own page, compare and rollback.

    @admin.display(description="versions")
    def versions_table(self, obj: Agent) -> SafeString:
        versions = list(obj.versions.select_related("created_by").order_by("-number"))
        page = self._url("versions", obj.pk)
        rows = []
        for index, version in enumerate(versions):
            earlier = versions[index + 1] if index + 1 < len(versions) else None
            compare = (
                format_html(
                    '<a href="{}?a={}&amp;b={}">changes from v{}</a>',
                    self._url("versions_compare", obj.pk),
                    earlier.number,
                    version.number,
                    earlier.number,
                )
                if earlier
                else "-"
            )
            rows.append(
                (
                    f"v{version.number}",
                    zoned_time(version.created_at),
                    version.created_by.get_username() if version.created_by else "-",
                    version.note or "-",
                    compare,
                )
            )
        table = html_table(["version", "when", "who", "note", "diff"], rows)
        return format_html(
            '{}<p><a href="{}">All versions: compare any two, roll back</a></p>', table, page
        )

    def get_urls(self):
        wrap = self.admin_site.admin_view
        own = [
            path(
                "<path:object_id>/versions/",
                wrap(self.versions_view),
                name="sessions_app_agent_versions",
            ),
            path(
                "<path:object_id>/versions/compare/",
                wrap(self.compare_view),
                name="sessions_app_agent_versions_compare",
            ),
            path(
                "<path:object_id>/versions/<int:number>/rollback/",
                wrap(self.rollback_view),
                name="sessions_app_agent_versions_rollback",
            ),
            path(
                "<path:object_id>/make-default/",
                wrap(self.make_default_view),
                name="sessions_app_agent_make_default",
            ),
        ]
        return [*own, *super().get_urls()]  # before the catch-all change URL

    def _url(self, view: str, *args) -> str:
        return reverse(
            f"{self.admin_site.name}:sessions_app_agent_{view}", args=[quote(a) for a in args]
        )

    def _agent_or_redirect(self, request, object_id, *, change: bool = False):
        agent = self.get_object(request, unquote(object_id))
        if agent is None:
            return None, self._get_obj_does_not_exist_redirect(request, self.opts, object_id)
        allowed = (
            self.has_change_permission(request, agent)
            if change
            else self.has_view_or_change_permission(request, agent)
        )
        if not allowed:
            raise PermissionDenied
        return agent, None

    def _page(self, request, agent: Agent, template: str, title: str, **context):
        request.current_app = self.admin_site.name
        return TemplateResponse(
            request,
            template,
            {
                **self.admin_site.each_context(request),
                "opts": self.opts,
                "original": agent,
                "title": title,
                "agent_url": self._url("change", agent.pk),
                "versions_url": self._url("versions", agent.pk),
                "compare_url": self._url("versions_compare", agent.pk),
                **context,
            },
        )

    def versions_view(self, request, object_id):
        agent, redirect = self._agent_or_redirect(request, object_id)
        if redirect:
            return redirect
        versions = list(agent.versions.select_related("created_by").order_by("-number"))
        latest = versions[0].number if versions else None
        return self._page(
            request,
            agent,
            "admin/sessions_app/agent/versions.html",
            f"Versions of {agent}",
            versions=[
                {
                    "version": v,
                    "who": v.created_by.get_username() if v.created_by else "-",
                    "config": pretty_json(v.config) if v.config else "{} (the site's settings)",
                    "previous": versions[i + 1].number if i + 1 < len(versions) else None,
                    "rollback_url": self._url("versions_rollback", agent.pk, v.number),
                    "is_latest": v.number == latest,
                }
                for i, v in enumerate(versions)
            ],
            can_change=self.has_change_permission(request, agent),
        )

    def compare_view(self, request, object_id):
        agent, redirect = self._agent_or_redirect(request, object_id)
        if redirect:
            return redirect
        a, b = _version_number(request, "a"), _version_number(request, "b")
        found = {v.number: v for v in agent.versions.filter(number__in=[a, b])}
        if a not in found or b not in found:
            self.message_user(
                request, "Choose two versions of this agent to compare.", messages.WARNING
            )
            return HttpResponseRedirect(self._url("versions", agent.pk))
        rows = [
            (key, _json_cell(before), _json_cell(after))
            for key, before, after in agents.config_diff(found[a].config, found[b].config)
        ]
        return self._page(
            request,
            agent,
            "admin/sessions_app/agent/compare.html",
            f"{agent}: v{a} → v{b}",
            a=found[a],
            b=found[b],
            table=html_table(["setting", f"before (v{a})", f"after (v{b})"], rows)
            if rows
            else None,
            numbers=list(agent.versions.order_by("-number").values_list("number", flat=True)),
        )

    def rollback_view(self, request, object_id, number: int):
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        agent, redirect = self._agent_or_redirect(request, object_id, change=True)
        if redirect:
            return redirect
        version = agent.versions.filter(number=number).first()
        latest = agents.latest_version(agent)
        if version is None:
            self.message_user(request, f"{agent} has no version v{number}.", messages.ERROR)
        elif version.pk == latest.pk:
            self.message_user(
                request, f"v{number} is already the latest version of {agent}.", messages.INFO
            )
        else:
            new = agents.rollback(version, user=request.user)
            self.log_change(
                request, agent, f"Rolled back to v{version.number}: new version v{new.number}."
            )
            self.message_user(
                request,
                f"{agent} is back to v{version.number}'s configuration as v{new.number}. "
                "Chats already started keep their version.",
            )
        return HttpResponseRedirect(self._url("versions", agent.pk))

    def make_default_view(self, request, object_id):
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        agent, redirect = self._agent_or_redirect(request, object_id, change=True)
        if redirect:
            return redirect
        self._make_default(request, agent)
        return HttpResponseRedirect(self._url("change", agent.pk))

    def change_view(self, request, object_id, form_url="", extra_context=None):
        extra_context = {
            **(extra_context or {}),
            "versions_url": self._url("versions", unquote(object_id)),
            "make_default_url": self._url("make_default", unquote(object_id)),
        }
        return super().change_view(request, object_id, form_url, extra_context)


# The agents' memory pages (they build on ``base``).
from . import memory  # noqa: E402, F401
