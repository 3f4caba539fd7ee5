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

Agents are edited in ``agent_admin`` (``AgentAdmin``, the one admin that writes through a
form): a save whose configuration changed makes a new version; versions are listed, compared
and rolled back to on the agent's pages, never edited.
"""

from __future__ import annotations

import uuid

from django.contrib import admin, messages
from django.contrib.admin.options import IS_POPUP_VAR
from django.contrib.admin.utils import quote, unquote
from django.db.models import Count, F
from django.http import HttpResponseBase, HttpResponseNotAllowed, HttpResponseRedirect
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


# The agents (``agent_admin``) and their memory pages (``memory``); they build on ``base``.
from . import memory  # noqa: E402, F401
from .agent_admin import AgentAdmin, AgentForm  # noqa: E402, F401
