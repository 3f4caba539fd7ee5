"""Tool-call answers: every tool_use is answered by exactly one tool_response event.

The open calls of a session, recording an answer (a late or repeated one is ignored by the
database's one-response constraint), answering the rest of a denied turn, and the staff repair
of calls no worker will ever answer.
"""

from __future__ import annotations

import json
from typing import Any

from django.db import IntegrityError

from sessions_app import db, runstate
from sessions_app import services as session_services
from sessions_app.models import Event, EventRow, Session, open_tool_call_rows

# The id of a call an MCP client made (``mcp/calls.py``): its run ends with its answer.
MCP_CALL_PREFIX = "toolu_mcp_"
# The key of the ``meta`` of the user turn an MCP call's run begins with (the token's name).
MCP_META = "mcp"


def is_mcp_call(call_id: str) -> bool:
    return call_id.startswith(MCP_CALL_PREFIX)


def unanswered_tool_calls(session_id) -> list[EventRow]:
    """Tool calls without a tool_response, oldest first. (A step finds its open calls in the
    window it reads anyway: ``window.open_calls``.)"""
    return open_tool_call_rows(session_id)


def result_text(result: Any) -> str:
    return (
        result if isinstance(result, str) else json.dumps(result, ensure_ascii=False, default=str)
    )


# The reason a failed call shows in the transcript, in every view mode (``failure_text``); a
# denial and the calls it skipped show as the denial instead.
FAILURE_CHARS = 300
NOT_FAILURES = ("user_denied", "skipped")


def failure_text(result: Any) -> str:
    """A failed result's reason in a line: its message and the fields' errors an admin form
    gave (``{"errors": {"url": ["... already exists."]}}``), cut to ``FAILURE_CHARS``."""
    if not isinstance(result, dict):
        return ""
    parts = [str(result.get("message") or "").strip().rstrip(".")]
    errors = result.get("errors")
    if isinstance(errors, dict):
        for field, messages in errors.items():
            listed = " ".join(map(str, messages if isinstance(messages, list) else [messages]))
            # The form's own errors (NON_FIELD_ERRORS) need no field name.
            parts.append(listed if field == "__all__" else f"{field}: {listed}")
    text = ": ".join(part for part in parts if part)
    return text[:FAILURE_CHARS]


def tool_response_record(
    *,
    session_id,
    call: Event,
    result: Any,
    ok: bool,
    meta: dict[str, Any] | None = None,
    lease: runstate.Lease | None = None,
    session_fields: dict[str, Any] | None = None,
) -> Event | None:
    """Answer a tool call. Returns None when it was already answered (a late or repeated
    result), or with a ``lease``, when the lease was lost (nothing written). ``session_fields``:
    more of the session row to write with it (``services.events_append``)."""
    payload = {"tool": call.payload.get("tool"), "ok": ok, **(meta or {})}
    if not ok and isinstance(result, dict) and result.get("error"):
        payload["error"] = result["error"]
        failure = failure_text(result) if result["error"] not in NOT_FAILURES else ""
        if failure:
            payload["failure"] = failure
    try:
        with db.atomic():
            item = {
                "kind": Event.Kind.TOOL_RESPONSE,
                "content": result_text(result),
                "payload": payload,
                "tool_use_id": call.tool_use_id,
                "run": call.run,
            }
            events = session_services.events_append(
                session_id=session_id,
                items=[item],
                lease=lease,
                prune=False,  # the next assistant turn prunes (once a step)
                session_fields=session_fields,
            )
            return events[0] if events else None
    except IntegrityError:
        return None


def answer_unanswered(
    *, session_id, code: str, message: str, only: list[Event] | None = None
) -> int:
    """Answer open tool calls with an error result so no tool_use is left unanswered."""
    calls = unanswered_tool_calls(session_id) if only is None else only
    answered = 0
    for call in calls:
        result = {"ok": False, "error": code, "message": message}
        if tool_response_record(session_id=session_id, call=call, result=result, ok=False):
            answered += 1
    return answered


def deny_turn(*, session_id, call_id: str | None, reason: str, denied: str, skipped: str) -> None:
    """Answer the denied call ``user_denied`` (with the reason) and the rest of its turn
    ``skipped``, so no tool_use is left unanswered."""
    for call in unanswered_tool_calls(session_id):
        if call.tool_use_id == call_id:
            result = {"ok": False, "error": "user_denied", "message": denied, "reason": reason}
            meta = {"denied": True, "reason": reason}
        else:
            result = {"ok": False, "error": "skipped", "message": skipped}
            meta = {"skipped": True, "reason": reason}
        tool_response_record(session_id=session_id, call=call, result=result, ok=False, meta=meta)


def heal_orphans(*, session_id) -> int:
    """Staff repair: answer tool calls no worker will ever answer (admin action).

    A run a live worker holds is left alone, and so is the call a pause is waiting on.
    """
    session = Session.objects.filter(pk=session_id).first()
    if session is None:
        return 0
    if session.status == Session.Status.RUNNING and not runstate.lease_is_stale(session):
        return 0
    waiting = (
        (session.pending_tool or {}).get("call_id") if session.status in Session.LIVE else None
    )
    calls = [c for c in unanswered_tool_calls(session_id) if c.tool_use_id != waiting]
    healed = answer_unanswered(
        session_id=session_id,
        code="tool_interrupted",
        message="Interrupted, outcome unknown: this call was repaired by staff.",
        only=calls,
    )
    if healed:
        session_services.trace_record(
            session_id=session_id, type="tool_healed", summary=f"{healed} call(s) healed by staff"
        )
    return healed
