"""The session payload (the sidebar's poll target) and message serialization.

``session_payload`` runs a fixed number of queries whatever the session's size: one per child
table, each bounded by a window (``MESSAGES_WINDOW``, ``TRACE_POLL_WINDOW``).
"""

from __future__ import annotations

from typing import Any

from django.db.models import Case, Q, When

from artifacts_app import store
from artifacts_app.models import Artifact
from sessions_app.conf import ahentic_settings
from sessions_app.models import Event, Goal, PendingMessage, Session, TraceEvent
from sessions_app.runstate import PendingTool

from .. import context
from ..diagnostics import iso, trace_envelope
from ..tools import get_tool

ROLE_BY_KIND = {
    Event.Kind.USER_MESSAGE: "user",
    Event.Kind.AGENT_MESSAGE: "assistant",
    Event.Kind.TOOL_CALL: "assistant",
    Event.Kind.TOOL_RESPONSE: "tool",
    Event.Kind.SYSTEM_MESSAGE: "event",
    Event.Kind.SUBAGENT_MESSAGE: "user",
}
# Basic view: conversation text and system events, no tool traffic.
BASIC_KINDS = [
    Event.Kind.USER_MESSAGE,
    Event.Kind.AGENT_MESSAGE,
    Event.Kind.SYSTEM_MESSAGE,
    Event.Kind.SUBAGENT_MESSAGE,
]
# Tool results that record a user's decision (an approval or a denial) show in the basic view
# too, without their content: the sidebar draws them as "Allowed once" / "Denied: reason".
USER_DECISIONS = ("allow_once", "allow_session", "always_allow")
DECISION_RESULTS = Q(kind=Event.Kind.TOOL_RESPONSE) & (
    Q(payload__has_key="denied") | Q(payload__approved__in=USER_DECISIONS)
)
VERBOSE_CUT = 500
TOOL_RESULT_META_KEYS = (
    "ok",
    "error",
    "browser",
    "approved",
    "artifactKey",
    "denied",
    "skipped",
    "reason",
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


def message_json(event: Event, view_mode: str) -> dict[str, Any]:
    payload = event.payload or {}
    content = event.content
    if event.kind == Event.Kind.TOOL_CALL:
        meta = {
            "tool": payload.get("tool"),
            "callId": event.tool_use_id,
            "input": payload.get("input"),
        }
    elif event.kind == Event.Kind.TOOL_RESPONSE:
        meta = {"tool": payload.get("tool"), "callId": event.tool_use_id}
        meta.update({k: payload[k] for k in TOOL_RESULT_META_KEYS if k in payload})
    elif event.kind == Event.Kind.SUBAGENT_MESSAGE:
        meta = {"source": "subagent", "name": payload.get("name", ""), **payload.get("meta", {})}
    else:
        meta = dict(payload.get("meta", {}))
    if view_mode == Session.ViewMode.BASIC and event.kind == Event.Kind.TOOL_RESPONSE:
        content = ""  # a decision line: the result itself is tool traffic
    elif view_mode == Session.ViewMode.VERBOSE and event.kind in (
        Event.Kind.TOOL_CALL,
        Event.Kind.TOOL_RESPONSE,
    ):
        if len(content) > VERBOSE_CUT:
            content = content[:VERBOSE_CUT] + "…"
    return {
        "id": event.pk,
        "seq": event.seq,
        "role": ROLE_BY_KIND.get(event.kind, "event"),
        "kind": event.kind,
        "content": content,
        "createdAt": iso(event.created_at),
        "meta": meta,
    }


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
        "input": tool_input,
        "summary": pending.summary,
        "callId": pending.call_id,
        "runtime": pending.runtime,
        "approved": pending.approved,
        "nonPreallowable": pending.non_preallowable,
        "artifactKey": pending.artifact_key,
        "memory": pending.memory,
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


def artifact_pointer_json(artifact: Artifact, *, with_payload: bool = False) -> dict[str, Any]:
    data = {**store.pointer_json(artifact), "updatedAt": iso(artifact.updated_at)}
    if with_payload:
        data["payload"] = artifact.payload
        data["source"] = artifact.source
        data["createdAt"] = iso(artifact.created_at)
    return data


def goals_json(goals: list[Goal]) -> list[dict[str, Any]]:
    by_parent: dict[int | None, list[Goal]] = {}
    for goal in goals:
        by_parent.setdefault(goal.parent_id, []).append(goal)

    def node(goal: Goal) -> dict[str, Any]:
        return {
            "id": goal.pk,
            "description": goal.description,
            "status": goal.status,
            "subGoals": [node(child) for child in by_parent.get(goal.pk, [])],
        }

    # A sub-goal whose parent is not shown stands at the top level.
    shown = {goal.pk for goal in goals}
    tops = [goal for goal in goals if goal.parent_id is None or goal.parent_id not in shown]
    return [node(goal) for goal in tops]


# Completed goals the payload shows besides the active ones (the most recently completed).
COMPLETED_GOALS_SHOWN = 5


def goals_shown(session_id) -> list[Goal]:
    """The active goals and the latest completed ones, at most ``GOALS_WINDOW`` in all, read
    in one bounded query (active first); abandoned and older goals are history the sidebar
    does not show, so a long chat does not grow the poll."""
    rows = Goal.objects.filter(
        session_id=session_id, status__in=[Goal.Status.ACTIVE, Goal.Status.COMPLETED]
    ).order_by(Case(When(status=Goal.Status.ACTIVE, then=0), default=1), "-completed_at", "-id")[
        : ahentic_settings.GOALS_WINDOW
    ]
    active = [g for g in rows if g.status == Goal.Status.ACTIVE]
    completed = [g for g in rows if g.status == Goal.Status.COMPLETED][:COMPLETED_GOALS_SHOWN]
    return sorted(active + completed, key=lambda goal: goal.pk)


def pending_message_json(pending: PendingMessage) -> dict[str, Any]:
    return {
        "id": pending.pk,
        "content": pending.content,
        "sourceType": pending.source_type,
        "createdAt": iso(pending.created_at),
    }


def decimal_json(value) -> float | None:
    return None if value is None else float(value)


def session_payload(session: Session, *, include_artifacts: bool = False) -> dict[str, Any]:
    window = ahentic_settings.MESSAGES_WINDOW
    recent = list(events_for_view(session.pk, session.view_mode).order_by("-seq")[: window + 1])
    has_more = len(recent) > window
    messages = [message_json(e, session.view_mode) for e in reversed(recent[:window])]
    trace = list(
        TraceEvent.objects.filter(session_id=session.pk)
        .order_by("-seq")
        .defer("data")[: ahentic_settings.TRACE_POLL_WINDOW]
    )
    pending = list(session.pending_messages.order_by("id")[: ahentic_settings.MAX_PENDING_MESSAGES])
    children = list(
        Session.objects.filter(parent_id=session.pk).values(
            "id", "title", "status", "tokens_in", "tokens_out"
        )
    )
    artifacts = Artifact.objects.filter(session_id=session.pk)
    if not include_artifacts:
        artifacts = artifacts.defer("payload")
    goals = goals_shown(session.pk)
    progress = session.progress or None
    return {
        "id": str(session.pk),
        "title": session.title,
        "autoTitle": session.auto_title,
        "status": session.status,
        "mode": session.mode,
        "viewMode": session.view_mode,
        "parentId": str(session.parent_id) if session.parent_id else None,
        "children": [
            {
                "id": str(c["id"]),
                "title": c["title"],
                "status": c["status"],
                "tokensUsed": c["tokens_in"] + c["tokens_out"],
            }
            for c in children
        ],
        "messages": messages,
        "hasMore": has_more,
        "pendingMessages": [pending_message_json(p) for p in pending],
        "trace": [trace_envelope(t) for t in reversed(trace)],
        "traceCount": session.trace_count,
        "progress": progress,
        "heartbeatAt": iso(session.heartbeat_at),
        "plan": session.plan or None,
        "pendingTool": pending_tool_json(session.pending_tool, session),
        "artifacts": [artifact_pointer_json(a, with_payload=include_artifacts) for a in artifacts],
        "goals": goals_json(goals),
        "activeSkills": list(session.active_skills or []),
        "activeWorkflow": session.active_workflow or None,
        "tokensIn": session.tokens_in,
        "tokensOut": session.tokens_out,
        "tokensUsed": session.tokens_used,
        "cacheReadTokens": session.cache_read_tokens,
        "cacheWriteTokens": session.cache_write_tokens,
        "costUsd": decimal_json(session.cost_usd),
        "contextUsage": context_usage_json(session.context_usage),
        "stepCount": session.step_count,
        "runSeq": session.run_seq,
        "lastError": session.last_error,
        "lastErrorCode": session.last_error_code,
        "jobResumable": session.job_resumable,
        "contentWork": session.content_work,
        "browserPausedAt": iso(session.browser_paused_at),
        "version": session.version,
        "createdAt": iso(session.created_at),
        "modifiedAt": iso(session.updated_at),
    }
