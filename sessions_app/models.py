"""Agent sessions and everything that grows with them.

Scalars are typed columns, small structured state is JSON, and anything that grows (events,
trace, pending messages, goals, snapshots) is a child table so an append never rewrites a blob.
Writes go through ``sessions_app.services``, and every UPDATE of the session row through
``sessions_app.runstate``; nothing else saves these models.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.functions import Greatest, Lower, StrIndex, Substr

from . import db

# What a search shows of a matching message (``SessionQuerySet.search``): this many characters
# before the match, and this many in all.
MATCH_LEAD = 60
MATCH_LENGTH = 180


class SessionQuerySet(models.QuerySet):
    def for_user(self, user) -> SessionQuerySet:
        """The only way views and tools read sessions: the user's own, nothing else."""
        if user is None or not user.is_authenticated:
            return self.none()
        return self.filter(owner=user, deleted_at__isnull=True)

    def deleted_for_user(self, user) -> SessionQuerySet:
        """The user's chats deleted and not yet purged (what an undo may restore): not a
        sub-agent's chat whose parent is deleted too (it comes back with its parent)."""
        if user is None or not user.is_authenticated:
            return self.none()
        return self.filter(owner=user, deleted_at__isnull=False).filter(
            Q(parent__isnull=True) | Q(parent__deleted_at__isnull=True)
        )

    def roots(self) -> SessionQuerySet:
        return self.filter(parent__isnull=True)

    def search(self, text: str) -> SessionQuerySet:
        """The sessions whose title or a conversation message (the user's or the agent's)
        holds ``text``, case-insensitively, each annotated with ``match``: the text around it
        in its newest such message (None when only the title matched). One query: the message
        test is a correlated subquery, not a join, so a chat matching in many messages is
        listed once."""
        messages = Event.objects.filter(
            session=models.OuterRef("pk"),
            kind__in=(Event.Kind.USER_MESSAGE, Event.Kind.AGENT_MESSAGE),
            content__icontains=text,
        )
        at = StrIndex(Lower("content"), Lower(models.Value(text)))
        snippet = Substr("content", Greatest(at - MATCH_LEAD, models.Value(1)), MATCH_LENGTH)
        first = messages.order_by("-seq").annotate(snippet=snippet).values("snippet")[:1]
        return self.filter(Q(title__icontains=text) | models.Exists(messages)).annotate(
            match=models.Subquery(first)
        )


class SessionStatus(models.TextChoices):
    IDLE = "idle"
    RUNNING = "running"
    AWAITING_HUMAN = "awaiting_human"
    AWAITING_BROWSER = "awaiting_browser"
    ERROR = "error"
    CANCELLED = "cancelled"
    DONE = "done"  # reserved, never written


# Every status transition, from -> the statuses it may go to (SPEC section 3). The run-state
# writers (``sessions_app.runstate``) refuse any other; docs/concepts/runs.md shows this table.
STATUS_TRANSITIONS: dict[str, frozenset[str]] = {
    # A message, queued messages or an action start a run.
    SessionStatus.IDLE: frozenset({SessionStatus.RUNNING}),
    SessionStatus.RUNNING: frozenset(
        {
            SessionStatus.IDLE,  # final reply, ask_user, refusal
            SessionStatus.AWAITING_HUMAN,  # a tool needs approval
            SessionStatus.AWAITING_BROWSER,  # a tool runs in the browser
            SessionStatus.ERROR,  # model failure, max steps, soft budget, daily limit
            SessionStatus.CANCELLED,  # stop
        }
    ),
    SessionStatus.AWAITING_HUMAN: frozenset(
        {
            SessionStatus.RUNNING,  # allow or deny
            SessionStatus.IDLE,  # a new message instead of a decision (then a new run)
            SessionStatus.CANCELLED,
        }
    ),
    SessionStatus.AWAITING_BROWSER: frozenset(
        {SessionStatus.RUNNING, SessionStatus.CANCELLED}  # result, error or timeout; stop
    ),
    SessionStatus.ERROR: frozenset({SessionStatus.RUNNING, SessionStatus.CANCELLED}),
    SessionStatus.CANCELLED: frozenset({SessionStatus.RUNNING}),
    SessionStatus.DONE: frozenset(),  # reserved, never written
}


class SessionMode(models.TextChoices):
    AGENT = "agent"
    ASK = "ask"


class Agent(models.Model):
    """A named agent of the site: who may use it and where it shows. What shapes its runs is
    in its versions (``AgentVersion``, one per saved change, never rewritten); a session pins
    the version it started with. Written through ``sessions_app.agents``."""

    class Place(models.TextChoices):
        SITE = "site", "Site pages"
        ADMIN = "admin", "Admin"
        BOTH = "both", "Site pages and admin"

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=128)
    description = models.TextField(blank=True, default="")
    colour = models.CharField(max_length=7, blank=True, default="", help_text="#rrggbb")
    # "app_label.codename" a user needs to use the agent; blank: AHENTIC["PERMISSION"].
    permission = models.CharField(max_length=255, blank=True, default="")
    # When any are set, the user must also be in one of them (superusers excepted).
    groups = models.ManyToManyField("auth.Group", blank=True, related_name="ahentic_agents")
    shows_on = models.CharField(max_length=8, choices=Place.choices, default=Place.BOTH)
    # The agent of a session that names none (one at a time: ``agents.agent_save``).
    is_default = models.BooleanField(default=False)
    # An inactive agent starts no new chat; its chats go on with their pinned version.
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "slug"]

    def __str__(self) -> str:
        return self.name or self.slug


class AgentVersion(models.Model):
    """One saved state of an agent: the settings it overrides (``config``, keys of
    ``sessions_app.agents.AGENT_KEYS``; a key left out is the site's ``AHENTIC`` value).
    Immutable: a change, a rollback included, is a new version."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    config = models.JSONField(default=dict, blank=True)
    note = models.CharField(max_length=255, blank=True, default="")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["agent", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["agent", "number"], name="ahentic_agent_version_number")
        ]

    def __str__(self) -> str:
        return f"{self.agent} v{self.number}"


class Session(models.Model):
    # Defined at module level so Meta.constraints can name their values.
    Status = SessionStatus
    Mode = SessionMode

    class ViewMode(models.TextChoices):
        BASIC = "basic"
        VERBOSE = "verbose"
        DEBUG = "debug"

    class TitleSource(models.TextChoices):
        DEFAULT = "default"
        AUTO = "auto"
        USER = "user"

    # Statuses that accept a new user message (a new goal or a resume cue).
    ACCEPTS_MESSAGE = (Status.IDLE, Status.ERROR, Status.CANCELLED)
    # Statuses of a run in progress (a worker, the user or the browser is about to act).
    LIVE = (Status.RUNNING, Status.AWAITING_HUMAN, Status.AWAITING_BROWSER)
    # Statuses a cancel can stop.
    CANCELLABLE = (*LIVE, Status.ERROR)

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agent_sessions"
    )
    title = models.CharField(max_length=255, default="New Agent")
    title_source = models.CharField(
        max_length=16, choices=TitleSource.choices, default=TitleSource.DEFAULT
    )
    status = models.CharField(max_length=24, choices=Status.choices, default=Status.IDLE)
    mode = models.CharField(max_length=8, choices=Mode.choices, default=Mode.AGENT)
    view_mode = models.CharField(max_length=8, choices=ViewMode.choices, default=ViewMode.BASIC)

    # Sub-agents
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="children"
    )
    fork_event_id = models.BigIntegerField(null=True, blank=True)
    prompt = models.TextField(blank=True, default="")
    granted_tools = models.JSONField(null=True, blank=True)  # null = every tool
    # The agent version the session runs with, pinned at creation (``agents``); null only for
    # rows written before agents existed and not migrated (``0010_agents`` pins them all).
    agent_version = models.ForeignKey(
        AgentVersion, on_delete=models.PROTECT, null=True, blank=True, related_name="sessions"
    )

    # Run state
    run_seq = models.PositiveIntegerField(default=0)
    step_count = models.PositiveIntegerField(default=0)
    progress = models.JSONField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    pending_tool = models.JSONField(null=True, blank=True)
    plan = models.JSONField(null=True, blank=True)
    page_context = models.JSONField(null=True, blank=True)
    context_usage = models.JSONField(null=True, blank=True)
    hitl_allows = models.JSONField(default=list, blank=True)
    capability_requests = models.JSONField(default=list, blank=True)
    last_error = models.TextField(blank=True, default="")
    last_error_code = models.CharField(max_length=64, blank=True, default="")
    job_resumable = models.BooleanField(default=False)
    content_work = models.BooleanField(default=False)
    active_skills = models.JSONField(default=list, blank=True)
    active_workflow = models.CharField(max_length=128, blank=True, default="")
    viewport_start_event_id = models.BigIntegerField(null=True, blank=True)
    browser_paused_at = models.DateTimeField(null=True, blank=True)
    # Whether a browser (the user's sidebar) can serve the current run: set when the run
    # starts (``runs.message_post`` and the chat API's routes). A run nobody watches (a
    # schedule, an MCP client's call, host code) is never offered browser tools.
    browser_available = models.BooleanField(default=False)
    lease_token = models.CharField(max_length=64, blank=True, default="")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    # Conversation messages counted when the brain last named the session (0 = never).
    named_at_messages = models.PositiveIntegerField(default=0)
    # Set when the owner deleted the chat: hidden from every route at once, restorable for
    # HISTORY_UNDO_S seconds, then purged with all it holds (``control.history``).
    deleted_at = models.DateTimeField(null=True, blank=True)

    # Accounting (running sums of orchestrator_app.UsageRecord)
    tokens_in = models.BigIntegerField(default=0)
    tokens_out = models.BigIntegerField(default=0)
    cache_read_tokens = models.BigIntegerField(default=0)
    cache_write_tokens = models.BigIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=14, decimal_places=6, null=True, blank=True)
    # Staff's cap for this chat in USD, over its agent's SPEND_CAP_USD (a schedule sets it from
    # its own); null: the agent's cap.
    spend_cap_usd = models.DecimalField(max_digits=12, decimal_places=4, null=True, blank=True)
    # Highest soft-budget boundary (in tokensUsed) the user acknowledged with continue.
    soft_budget_acked = models.BigIntegerField(default=0)

    # Counters that never go backwards, so pruning can never reuse a number.
    last_seq = models.BigIntegerField(default=0)
    trace_count = models.BigIntegerField(default=0)
    version = models.BigIntegerField(default=1)
    # Moves whenever an event already written changes or goes (an admin edit, retention
    # pruning, a payload note added to an earlier event): a worker that kept the window's rows
    # (``sessions_app.window``) reads them again. Appends do not move it.
    edit_version = models.BigIntegerField(default=0)

    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = SessionQuerySet.as_manager()

    class Meta:
        ordering = ["-updated_at"]
        permissions = [
            ("use_agent", "Can use the AI agent"),
            ("control_runs", "Can cancel, continue and repair agent runs (admin)"),
            ("exceed_spend_cap", "Can continue a chat past its spend cap"),
        ]
        indexes = [
            # GET sessions: the owner's root sessions, newest first.
            models.Index(fields=["owner", "-updated_at"], name="ahentic_session_owner_upd"),
            # ahentic_recover: running sessions whose lease expired.
            models.Index(fields=["status", "lease_expires_at"], name="ahentic_session_lease"),
            # The purge: chats deleted before the undo window's start.
            models.Index(fields=["deleted_at"], name="ahentic_session_deleted"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=SessionStatus.values), name="ahentic_session_status"
            ),
            models.CheckConstraint(
                condition=Q(mode__in=SessionMode.values), name="ahentic_session_mode"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.title} ({self.status})"

    @property
    def tokens_used(self) -> int:
        return self.tokens_in + self.tokens_out

    @property
    def auto_title(self) -> bool:
        return self.title_source != self.TitleSource.USER

    def next_view_mode(self) -> str:
        """The view mode after this one: basic -> verbose -> debug -> basic."""
        order = list(self.ViewMode.values)
        current = self.view_mode if self.view_mode in order else order[-1]
        return order[(order.index(current) + 1) % len(order)]


@dataclass(frozen=True, slots=True)
class EventRow:
    """An event read for building a request: the fields the context engine uses, without a
    model instance (a step reads its whole window; instances cost most of that read).

    Immutable: a window's rows are kept by the process (``sessions_app.window``) and handed to
    every step of the session it runs, so nothing may change one in place (a changed event is a
    new row: ``with_payload``). Its ``payload`` dict is shared the same way and is read-only.
    """

    pk: int
    session_id: Any
    seq: int
    kind: str
    content: str
    payload: dict[str, Any]
    tool_use_id: str
    run: int
    token_count: int
    # What the request builder made of the row (``prompt.event_parts``): derived from the
    # values above only, computed once (``remember_parts``) and kept with the row.
    parts: Any = field(default=None, compare=False, repr=False)

    @property
    def id(self) -> int:
        return self.pk

    def with_payload(self, payload: dict[str, Any]) -> EventRow:
        """The same event with another payload (what the request builder made of it is not
        kept: it depends on the payload)."""
        return replace(self, payload=payload, parts=None)

    def remember_parts(self, parts: Any) -> None:
        """Keep what the request builder made of the row (set once: a pure function of the
        row's values, so every reader would compute the same)."""
        object.__setattr__(self, "parts", parts)


# The columns an EventRow is read from, in its fields' order after ``session_id`` (the caller
# knows it: every row of a read is of one session).
EVENT_ROW_COLUMNS = ("pk", "seq", "kind", "content", "payload", "tool_use_id", "run", "token_count")


def _as_event_rows(session_id, rows) -> list[EventRow]:
    """``EventRow``s of the session ``session_id`` from rows of ``EVENT_ROW_COLUMNS``."""
    session_id = Session._meta.pk.to_python(session_id)  # a task passes it as text
    return [
        EventRow(pk, session_id, seq, kind, content, payload or {}, tool_use_id, run, tokens)
        for pk, seq, kind, content, payload, tool_use_id, run, tokens in rows
    ]


def event_rows(
    session_id,
    *,
    from_id: int | None = None,
    after_id: int | None = None,
    through_id: int | None = None,
    where: Q | None = None,
) -> list[EventRow]:
    """A session's events from ``from_id`` on or after ``after_id``, and through
    ``through_id`` (and matching ``where``, when given), by seq, as ``EventRow``s, read from
    the write database (a worker reads what it acts on). A step's window goes through
    ``sessions_app.window``, which keeps what it read. Earlier attempts (``superseded_by``)
    are left out: what the model is sent never holds them."""
    bounds = {"pk__gte": from_id, "pk__gt": after_id, "pk__lte": through_id}
    events = db.primary(Event).filter(
        session_id=session_id,
        superseded_by__isnull=True,  # an earlier attempt is the reader's, not the model's
        **{k: v for k, v in bounds.items() if v is not None},
    )
    if where is not None:
        events = events.filter(where)
    return _as_event_rows(session_id, events.order_by("seq").values_list(*EVENT_ROW_COLUMNS))


def open_tool_call_rows(session_id) -> list[EventRow]:
    """A session's tool calls without a tool_response, by seq, as ``EventRow``s."""
    events = db.primary(Event).filter(session_id=session_id, superseded_by__isnull=True)
    answered = events.filter(kind=Event.Kind.TOOL_RESPONSE).values("tool_use_id")
    calls = events.filter(kind=Event.Kind.TOOL_CALL).exclude(tool_use_id__in=answered)
    return _as_event_rows(session_id, calls.order_by("seq").values_list(*EVENT_ROW_COLUMNS))


class Event(models.Model):
    class Kind(models.TextChoices):
        USER_MESSAGE = "user_message"
        AGENT_MESSAGE = "agent_message"
        TOOL_CALL = "tool_call"
        TOOL_RESPONSE = "tool_response"
        SYSTEM_MESSAGE = "system_message"
        SUBAGENT_MESSAGE = "subagent_message"

    id = models.BigAutoField(primary_key=True)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="events")
    seq = models.BigIntegerField()
    kind = models.CharField(max_length=24, choices=Kind.choices)
    content = models.TextField(blank=True, default="")
    payload = models.JSONField(default=dict, blank=True)
    # Pairs a tool_call with its tool_response (healing and the viewport look it up).
    tool_use_id = models.CharField(max_length=128, blank=True, default="", db_index=True)
    run = models.PositiveIntegerField(default=0)
    # What the event adds to a model request (sessions_app.services.event_token_count).
    token_count = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    # An earlier attempt: the run of the retry or edit that set this event aside
    # (``services.events_supersede``). Kept for the reader, never sent to the model again.
    superseded_by = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        # By the key column, not the relation (which would join and sort by the session's
        # own ordering); within a session, seq is history order.
        ordering = ["session_id", "seq"]
        constraints = [
            # Also the index behind every "messages by seq" query.
            models.UniqueConstraint(fields=["session", "seq"], name="ahentic_event_session_seq"),
            # Exactly one answer per tool call: a late or redelivered result cannot duplicate it.
            models.UniqueConstraint(
                fields=["session", "tool_use_id"],
                condition=Q(kind="tool_response"),
                name="ahentic_event_one_response",
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.seq} {self.kind}"


class PendingMessage(models.Model):
    class SourceType(models.TextChoices):
        USER = "user"
        SUBAGENT = "subagent"

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="pending_messages")
    content = models.TextField()
    source_type = models.CharField(
        max_length=16, choices=SourceType.choices, default=SourceType.USER
    )
    source_name = models.CharField(max_length=128, blank=True, default="")
    # What the user attached to the message (``sessions_app.attachments.refs``), sent with it.
    attachments = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"pending {self.source_type}: {self.content[:40]}"


class Attachment(models.Model):
    """A file the user attached to a message (an image or a PDF), or an image a tool returned.

    The bytes live in Django's storage API (``sessions_app.attachments.storage``); the row
    holds what was read of them when they were stored (the type from their magic bytes, an
    image's size, a PDF's pages), so a request is built and sized without reading the file.
    The owner is the session's: the routes reach an attachment only through the user's own
    session. The stored file is deleted when the row is (with its session or its user)."""

    class Source(models.TextChoices):
        UPLOAD = "upload"
        TOOL = "tool"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="attachments")
    source = models.CharField(max_length=8, choices=Source.choices, default=Source.UPLOAD)
    name = models.CharField(max_length=255)
    content_type = models.CharField(max_length=32)
    size = models.PositiveBigIntegerField()
    sha256 = models.CharField(max_length=64)
    storage_name = models.CharField(max_length=512)
    width = models.PositiveIntegerField(null=True, blank=True)
    height = models.PositiveIntegerField(null=True, blank=True)
    pages = models.PositiveIntegerField(default=0)
    # What it adds to a model request (``media.attachment_tokens``).
    token_count = models.PositiveIntegerField(default=1)
    # A message took it (posted or queued): it cannot be attached to another one.
    sent = models.BooleanField(default=False)
    # How a PDF goes to the model, decided when a request first carries it and never changed
    # (the prompt cache holds its bytes): "" (not sent yet), "base64", or "file" (uploaded to
    # the Files API as ``file_id``; ``AHENTIC["FILES_API"]``). Images are always base64.
    sent_as = models.CharField(max_length=8, blank=True, default="")
    file_id = models.CharField(max_length=255, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.content_type}, {self.size} bytes)"


class AttachmentQuota(models.Model):
    """A user's row for the attachment quota (``ATTACHMENT_QUOTA_BYTES``), made with their
    first stored file. ``attachments.store_files`` locks it while it sums the user's files and
    inserts new ones, so uploads into different chats of one user are counted one after the
    other and never pass the quota together. It holds no count: the sum is taken from the
    attachments, so deleting a file or a chat needs no bookkeeping here. The app's own row
    rather than the user's: the user table may live in another database and is the host's."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="+",
    )

    def __str__(self) -> str:
        return f"attachment quota of user {self.user_id}"


class TraceEvent(models.Model):
    GAP = "trace_gap"

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="trace_events")
    seq = models.BigIntegerField()
    run = models.PositiveIntegerField(default=0)
    type = models.CharField(max_length=64)
    step = models.PositiveIntegerField(default=0)
    summary = models.CharField(max_length=500, blank=True, default="")
    data = models.JSONField(default=dict, blank=True)
    ms = models.BigIntegerField()
    at = models.DateTimeField()

    class Meta:
        ordering = ["session_id", "seq"]  # see Event
        constraints = [
            # Also serves the poll's "last N trace rows" query.
            models.UniqueConstraint(fields=["session", "seq"], name="ahentic_trace_session_seq"),
        ]

    def __str__(self) -> str:
        return f"{self.type} #{self.seq}"


class Goal(models.Model):
    class Status(models.TextChoices):
        ACTIVE = "active"
        COMPLETED = "completed"
        ABANDONED = "abandoned"

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="goals")
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="sub_goals"
    )
    description = models.TextField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    completed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return self.description[:60]


class Snapshot(models.Model):
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="snapshots")
    level = models.PositiveSmallIntegerField(default=1)
    from_event_id = models.BigIntegerField()
    to_event_id = models.BigIntegerField()
    text = models.TextField()
    token_count = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["from_event_id"]
        constraints = [
            models.CheckConstraint(condition=Q(level__in=[1, 2]), name="ahentic_snapshot_level"),
        ]

    def __str__(self) -> str:
        return f"L{self.level} {self.from_event_id}..{self.to_event_id}"


class LiveText(models.Model):
    """The text of the model reply a worker is streaming right now, for the sidebar's live
    view (``GET sessions/{id}/live``). Its own table: the worker rewrites it a few times a
    second, which must neither move the session's version (ETag) nor lock the session row.
    The reply's event replaces it when the call ends; a cancelled or failed call clears it."""

    session = models.OneToOneField(
        Session, on_delete=models.CASCADE, primary_key=True, related_name="live_text"
    )
    run = models.PositiveIntegerField()
    text = models.TextField(blank=True, default="")
    updated_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"live text of run {self.run}"


class MemoryFile(models.Model):
    """One file of an agent's memory (the memory tool's ``/memories`` tree): a user's own
    (``owner`` set) or the agent's memory shared by all its users (``owner`` null). ``path``
    is relative to ``/memories``; directories are implied by the paths of their files.
    Written through ``sessions_app.memory`` only, each change recorded as a ``MemoryChange``."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="memory_files")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="ahentic_memory_files",
    )
    path = models.CharField(max_length=255)
    content = models.TextField(blank=True, default="")
    size = models.PositiveIntegerField(default=0)  # bytes of content (UTF-8)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["agent", "owner", "path"]
        constraints = [
            models.UniqueConstraint(
                fields=["agent", "owner", "path"],
                condition=Q(owner__isnull=False),
                name="ahentic_memory_file_user_path",
            ),
            models.UniqueConstraint(
                fields=["agent", "path"],
                condition=Q(owner__isnull=True),
                name="ahentic_memory_file_shared_path",
            ),
        ]

    def __str__(self) -> str:
        return f"/memories/{self.path}"


class MemoryChange(models.Model):
    """One versioned change of a memory file: who wrote it (the agent in a session, the user,
    staff), the command, and the content before and after (null: no file)."""

    class Author(models.TextChoices):
        AGENT = "agent", "Agent"
        USER = "user", "User"
        STAFF = "staff", "Staff"

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="memory_changes")
    # Whose memory (null: the agent's shared memory); deleting the user deletes these rows.
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="ahentic_memory_changes",
    )
    path = models.CharField(max_length=255)
    command = models.CharField(max_length=16)
    author = models.CharField(max_length=8, choices=Author.choices)
    # The user or staff member who made it (the session's owner for the agent).
    by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    session = models.ForeignKey(
        Session, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    # Null: no file (before a create, after a delete), apart from an empty one.
    before = models.TextField(null=True, blank=True)  # noqa: DJ001
    after = models.TextField(null=True, blank=True)  # noqa: DJ001
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["agent", "owner", "path"], name="ahentic_memchange_path")]

    def __str__(self) -> str:
        return f"{self.command} /memories/{self.path} by {self.author}"
