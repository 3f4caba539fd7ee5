"""The session payload (the sidebar's poll target): what it reads. ``serializers.py`` renders
it (``SessionPayloadSerializer``).

``session_payload`` runs a fixed number of queries whatever the session's size: one per child
table, each bounded by a window (``MESSAGES_WINDOW``, ``TRACE_POLL_WINDOW``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.core.cache import cache
from django.db.models import OuterRef, Q, QuerySet, Subquery

from artifacts_app import store
from artifacts_app.models import Artifact
from sessions_app.conf import ahentic_settings
from sessions_app.models import AgentVersion, Event, Goal, PendingMessage, Session, TraceEvent
from sessions_app.runstate import PendingTool

from ..loop import context
from ..tools import get_tool, label_for
from .serializers import MessageSerializer, SessionPayloadSerializer, TraceEnvelopeSerializer

# Basic view: conversation text and system events, no tool traffic.
BASIC_KINDS = [
    Event.Kind.USER_MESSAGE,
    Event.Kind.AGENT_MESSAGE,
    Event.Kind.SYSTEM_MESSAGE,
    Event.Kind.SUBAGENT_MESSAGE,
]
# Tool results that record a user's decision (an approval or a denial) show in the basic view
# too, without their content: the sidebar draws them as "Allowed once" / "Denied: reason"; so
# does a save that changed nothing and so asked nothing ("unchanged"), and a call that failed,
# with its reason ("failure": a save the admin form refused, say).
USER_DECISIONS = ("allow_once", "allow_session", "always_allow")
DECISION_RESULTS = Q(kind=Event.Kind.TOOL_RESPONSE) & (
    Q(payload__has_key="denied")
    | Q(payload__has_key="unchanged")
    | Q(payload__has_key="failure")
    | Q(payload__approved__in=USER_DECISIONS)
)


def events_for_view(session_id, view_mode: str):
    events = Event.objects.filter(session_id=session_id)
    if view_mode == Session.ViewMode.BASIC:
        # Synthetic user turns (the max_tokens nudge) are for the model, not the reader. The
        # marker is a top-level key: a nested key lookup is NULL on PostgreSQL for rows
        # without "meta", and NOT(NULL) would hide every user message.
        events = events.filter(Q(kind__in=BASIC_KINDS) | DECISION_RESULTS).exclude(
            kind=Event.Kind.USER_MESSAGE, payload__has_key="synthetic"
        )
    return events


def pending_tool_json(stored: dict | None, session: Session) -> dict | None:
    """Storage keeps snake_case keys and a from_memory key only; REST shows camelCase.

    While awaiting the browser, the input is shown with ``from_memory`` expanded, so the sidebar
    runs it without loading artifacts itself (storage is not changed). An approval card keeps
    the key: a body never goes into the Allow card.
    """
    pending = PendingTool.from_json(stored)
    if pending is None:
        return None
    tool_input = pending.input
    memory_error = None
    if session.status == Session.Status.AWAITING_BROWSER and store.FROM_MEMORY in tool_input:
        tool = get_tool(pending.name)
        if tool is not None and tool.artifact_field:
            try:
                tool_input, _ = store.apply_from_memory(
                    session.pk, tool_input, tool.artifact_field, tool.artifact_kinds
                )
            except store.ArtifactError as exc:
                memory_error = exc.message
    data = {
        "name": pending.name,
        "label": pending.label or label_for(pending.name),
        "input": tool_input,
        "summary": pending.summary,
        "callId": pending.call_id,
        "runtime": pending.runtime,
        "approved": pending.approved,
        "nonPreallowable": pending.non_preallowable,
        "artifactKey": pending.artifact_key,
        "memory": pending.memory,
        "changes": pending.changes,
    }
    if pending.artifact_key:
        data["memory"] = store.memory_summary(session.pk, pending.artifact_key)
    if memory_error:
        data["memoryError"] = memory_error
    return data


def context_usage_json(stored: dict | None) -> dict[str, Any]:
    if stored:
        return stored
    return {
        "budgetTokens": ahentic_settings.CONTEXT_BUDGET_TOKENS,
        "usedTokens": 0,
        "percent": 0,
        "buckets": {name: 0 for name in context.BUCKETS},
    }


# Completed goals the payload shows besides the active ones (the most recently completed).
COMPLETED_GOALS_SHOWN = 5


def goals_shown(session_id) -> list[Goal]:
    """The active goals and the latest completed ones, at most ``GOALS_WINDOW`` in all, read
    in one bounded query (active first); abandoned and older goals are history the sidebar
    does not show, so a long chat does not grow the poll."""
    # Active first: "active" sorts before "completed" (a plain column order compiles in a
    # fraction of a CASE's time, and every first poll after a change runs it).
    rows = Goal.objects.filter(
        session_id=session_id, status__in=[Goal.Status.ACTIVE, Goal.Status.COMPLETED]
    ).order_by("status", "-completed_at", "-id")[: ahentic_settings.GOALS_WINDOW]
    active = [g for g in rows if g.status == Goal.Status.ACTIVE]
    completed = [g for g in rows if g.status == Goal.Status.COMPLETED][:COMPLETED_GOALS_SHOWN]
    return sorted(active + completed, key=lambda goal: goal.pk)


def with_agent(sessions: QuerySet[Session]) -> QuerySet[Session]:
    """``sessions`` read with their pinned version and its agent, and the agent's latest
    version number (``agent_latest``), in the same query; unordered (the caller reads one
    row: ``first()``'s ORDER BY and LIMIT were a sixth of the read's calls)."""
    latest = AgentVersion.objects.filter(agent_id=OuterRef("agent_version__agent_id"))
    return (
        sessions.select_related("agent_version__agent")
        .order_by()
        .annotate(agent_latest=Subquery(latest.order_by("-number").values("number")[:1]))
    )


def agent_json(session: Session) -> dict[str, Any] | None:
    """The payload's ``agent``: the agent and version the session pins (None for a session
    pinned to none). Read with the session by ``with_agent`` (lazily otherwise)."""
    version = session.agent_version
    if version is None:
        return None
    agent = version.agent
    latest = getattr(session, "agent_latest", None)
    if latest is None:
        latest = agent.versions.order_by("-number").values_list("number", flat=True).first()
    return {
        "slug": agent.slug,
        "name": agent.name,
        "colour": agent.colour,
        "version": version.number,
        "latest_version": latest or version.number,
    }


# What an artifact pointer shows (``serializers.ArtifactPointerSerializer``).
ARTIFACT_POINTER_COLUMNS = (
    "key",
    "kind",
    "status",
    "title",
    "bytes",
    "block_count",
    "step",
    "updated_at",
)


@dataclass
class PayloadSource:
    """What ``SessionPayloadSerializer`` renders: the session row and the bounded windows read
    with it, in a fixed number of queries whatever the session's size."""

    session: Session
    agent: dict[str, Any] | None
    messages: list[dict[str, Any]]  # rendered (``messages_window``)
    has_more: bool
    pending_messages: list[PendingMessage]
    trace: list[dict[str, Any]]  # rendered (``trace_window``)
    children: list[dict[str, Any]]
    artifacts: list[Artifact] | list[dict[str, Any]]  # pointer rows without ?include=artifacts
    goals: list[Goal]  # the top-level ones; ``sub_goals`` holds the rest by parent id
    sub_goals: dict[int | None, list[Goal]] = field(repr=False)
    progress: dict | None
    plan: dict | None
    pending_tool: dict | None
    active_skills: list[str]
    active_workflow: str | None
    context_usage: dict[str, Any]
    # Set by POST messages when the message was queued (``pendingMessage``); absent otherwise.
    # pending_message: PendingMessage
    # Set by POST agent/latest (``changes``): what the move changed; absent otherwise.
    # changes: list[dict[str, Any]]


def payload_source(session: Session, *, include_artifacts: bool = False) -> PayloadSource:
    messages, has_more = messages_window(session)
    artifacts = Artifact.objects.filter(session_id=session.pk)
    if not include_artifacts:
        # Pointers: the columns ``ArtifactPointerSerializer`` shows, as ``values()`` rows
        # (a ``defer()`` of the body cost more to compile than the rows to read).
        artifacts = artifacts.values(*ARTIFACT_POINTER_COLUMNS)
    by_parent = sub_goals(goals_shown(session.pk))
    return PayloadSource(
        session=session,
        agent=agent_json(session),
        messages=messages,
        has_more=has_more,
        pending_messages=list(
            PendingMessage.objects.filter(session_id=session.pk).order_by("id")[
                : ahentic_settings.MAX_PENDING_MESSAGES
            ]
        ),
        trace=trace_window(session),
        children=children_rows(session.pk),
        artifacts=list(artifacts),
        goals=by_parent.get(None, []),
        sub_goals=by_parent,
        progress=session.progress or None,
        plan=session.plan or None,
        pending_tool=pending_tool_json(session.pending_tool, session),
        active_skills=list(session.active_skills or []),
        active_workflow=session.active_workflow or None,
        context_usage=context_usage_json(session.context_usage),
    )


def children_rows(session_id) -> list[dict[str, Any]]:
    """The sub-agents' chats as ``ChildSessionSerializer`` shows them, newest first. A
    sub-agent's chat deleted on its own leaves the list (its trash moves this session's
    version). ``tokens_used`` is summed here: an annotation cost a quarter of the query's
    build."""
    rows = Session.objects.filter(parent_id=session_id, deleted_at__isnull=True).values(
        "id", "title", "status", "tokens_in", "tokens_out"
    )
    return [{**row, "tokens_used": row["tokens_in"] + row["tokens_out"]} for row in rows]


@dataclass(frozen=True)
class RenderedMessages:
    """The payload's messages as rendered once, and the newest seq they cover."""

    last_seq: int
    items: tuple[tuple[int, dict[str, Any]], ...]  # (seq, rendered), oldest first
    has_more: bool


def messages_window(session: Session) -> tuple[list[dict[str, Any]], bool]:
    """The last ``MESSAGES_WINDOW`` events of the session's view, rendered by
    ``MessageSerializer``, and whether older ones exist.

    An event, once written, changes only through a write that moves ``Session.edit_version``
    (an admin edit, retention pruning, the step context stored with an earlier turn; the
    ``started`` note on a running tool call is not rendered). So the rendered window is cached
    by ``(session, edit_version, view mode)`` with the ``last_seq`` it covers, and the first
    poll after a change reads and renders only the events past it. Seqs are reserved in the
    transaction that inserts them, under the session row's lock: every event up to the
    ``last_seq`` read with the session is committed, so none is skipped."""
    window = int(ahentic_settings.MESSAGES_WINDOW)
    view_mode = session.view_mode
    key = f"ahentic:messages:{session.pk}:{session.edit_version}:{view_mode}:{window}"
    kept = cache.get(key)
    if kept is not None and kept.last_seq > session.last_seq:
        kept = None  # written by a poll that read a newer session row: not for this one
    if kept is not None and kept.last_seq == session.last_seq:
        return [item for _, item in kept.items], kept.has_more

    events = events_for_view(session.pk, view_mode).filter(seq__lte=session.last_seq)
    if kept is not None:
        events = events.filter(seq__gt=kept.last_seq)
    newest = list(events.order_by("-seq")[: window + 1])[::-1]
    serializer = MessageSerializer(many=True, context={"view_mode": view_mode})
    rendered = tuple(
        zip((e.seq for e in newest), serializer.to_representation(newest), strict=True)
    )
    if kept is None or len(newest) > window:
        items, has_more = rendered[-window:], len(newest) > window
    else:
        items = (kept.items + rendered)[-window:]
        has_more = kept.has_more or len(kept.items) + len(rendered) > window
    cache.set(key, RenderedMessages(session.last_seq, items, has_more), timeout=PART_CACHE_S)
    return [item for _, item in items], has_more


TRACE_COLUMNS = ("id", "at", "ms", "run", "type", "step", "summary")


def trace_window(session: Session) -> list[dict[str, Any]]:
    """The payload's trace: the last ``TRACE_POLL_WINDOW`` rows, rendered by
    ``TraceEnvelopeSerializer`` and cached by ``(session, trace_count)``.

    Trace rows are written with the count that numbers them, in one transaction, and never
    change; the cap drops only rows older than the newest ``TRACE_CAP - TRACE_HEAD - 1``. So
    the rows numbered up to a count, within that tail, are the same whenever they are read:
    a poll after a step that added no trace, or many polls of one version, render them once.
    A window wider than the tail (the gap row may move into it) is read every time."""
    window = int(ahentic_settings.TRACE_POLL_WINDOW)
    count = session.trace_count

    def render() -> list[dict[str, Any]]:
        # Built on a miss only: building the query cost more than the cache hit it precedes.
        rows = (
            TraceEvent.objects.filter(session_id=session.pk, seq__lte=count)
            .order_by("-seq")
            .values(*TRACE_COLUMNS)
        )
        return list(TraceEnvelopeSerializer(list(rows[:window])[::-1], many=True).data)

    tail = int(ahentic_settings.TRACE_CAP) - int(ahentic_settings.TRACE_HEAD) - 1
    if window > tail:
        return render()
    key = f"ahentic:trace:{session.pk}:{count}:{window}"
    found = cache.get(key)
    if found is None:
        found = render()
        cache.set(key, found, timeout=PART_CACHE_S)
    return found


# How long a rendered part stays cached (its key never serves stale data; this bounds memory).
PART_CACHE_S = 300


def session_payload(session: Session, *, include_artifacts: bool = False, **extra) -> dict:
    """The payload of ``session`` (``SessionPayloadSerializer``); ``extra`` sets attributes of
    its source (``pending_message``)."""
    source = payload_source(session, include_artifacts=include_artifacts)
    for name, value in extra.items():
        setattr(source, name, value)
    context = {
        "view_mode": session.view_mode,
        "include_artifacts": include_artifacts,
        "sub_goals": source.sub_goals,
    }
    return SessionPayloadSerializer(source, context=context).data


def sub_goals(goals: list[Goal]) -> dict[int | None, list[Goal]]:
    """Parent id -> shown goals; a sub-goal whose parent is not shown stands at the top level
    (key None), where ``SessionPayloadSerializer`` starts."""
    shown = {goal.pk for goal in goals}
    by_parent: dict[int | None, list[Goal]] = {}
    for goal in goals:
        parent = goal.parent_id if goal.parent_id in shown else None
        by_parent.setdefault(parent, []).append(goal)
    return by_parent
