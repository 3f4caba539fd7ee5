"""Context accounting: the token estimator, the viewport and ``contextUsage``.

The estimator follows the counting rule documented in ``localapi`` (ceil(utf-8 bytes / 4) per
piece, 4 tokens per message), and ``contextUsage`` is calibrated by the real ``input_tokens``
of the last call, so it tracks the real API within a few percent.

Viewport (from Anima): the window holds whole events, newest first; its start only moves when
the next request would exceed ``CONTEXT_BUDGET_TOKENS``, and then in one batch down to
``CONTEXT_EVICT_TO`` of it, so the cached prefix survives many steps between evictions.

``contextUsage`` predicts the next request: what a message typed now would send. It is computed
when a step ends (``predicted_usage``, from the window the step sent plus the events the step
added, so it costs one small query and no model call) and calibrated by the real input tokens
of the step's model call. Between steps nothing that the request holds changes, except memory
written by the background task, which shows at the next step.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import Any

from sessions_app.conf import ahentic_settings
from sessions_app.models import Event, Session
from sessions_app.tokens import estimate_tokens

from . import prompt
from .prompt import CONTEXT_HEADER, MODE_SECTION, PAGE_SECTION, WINDOW_OPENER
from .tools import Tool

ROLE_OVERHEAD = 4
# A sub-agent report is sent as a synthetic subagent_message tool_use (~15 tokens) plus the
# result: one more message of role overhead than its own content.
SUBAGENT_LABEL_TOKENS = 24


# The one token-estimate rule (ceil(utf-8 bytes / 4), at least 1), stored with every event.
tokens = estimate_tokens


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _plain(block: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in block.items() if k != "cache_control"}


def block_tokens(block: dict[str, Any]) -> int:
    kind = block.get("type")
    if kind == "text":
        return tokens(block.get("text", ""))
    if kind == "tool_use":
        return tokens(_dumps({"name": block.get("name"), "input": block.get("input")}))
    if kind == "tool_result":
        content = block.get("content") or ""
        return tokens(content if isinstance(content, str) else _dumps([_plain(b) for b in content]))
    return tokens(_dumps(_plain(block)))


# The contextUsage buckets (REST ``contextUsage.buckets``), in display order.
BUCKETS = (
    "systemPrompt",
    "tools",
    "history",
    "toolResults",
    "memory",
    "pageContext",
    "planArtifacts",
)


def buckets(request: dict[str, Any], memory_blocks: int = 0) -> dict[str, int]:
    """Estimated tokens of a request by bucket. ``memory_blocks``: how many system blocks
    (the last ones) hold memory snapshots. In the step context, the page context has its own
    bucket; goals, plan and artifact pointers count as ``planArtifacts``; the header and the
    mode line as history."""
    result = dict.fromkeys(BUCKETS, 0)
    for tool in request.get("tools") or []:
        result["tools"] += tokens(_dumps(_plain(tool)))
    system = request.get("system") or []
    for index, block in enumerate(system):
        bucket = "memory" if index >= len(system) - memory_blocks else "systemPrompt"
        result[bucket] += tokens(block["text"])
    for message in request.get("messages") or []:
        result["history"] += ROLE_OVERHEAD
        for block in message["content"]:
            text = block.get("text", "") if block.get("type") == "text" else ""
            if block.get("type") == "tool_result":
                result["toolResults"] += block_tokens(block)
            elif text.startswith(CONTEXT_HEADER):
                # Sections are blank-line separated; header and mode count as history.
                header, *sections = text.split("\n\n")
                page = sum(tokens(p) for p in sections if p.startswith(PAGE_SECTION))
                plain = tokens(header) + sum(
                    tokens(p) for p in sections if p.startswith(MODE_SECTION)
                )
                result["history"] += plain
                result["pageContext"] += page
                result["planArtifacts"] += max(0, block_tokens(block) - page - plain)
            else:
                result["history"] += block_tokens(block)
    return result


def estimate(request: dict[str, Any]) -> int:
    return sum(buckets(request).values())


def usage_snapshot(
    request: dict[str, Any], memory_blocks: int, calibration: float
) -> dict[str, Any]:
    """``contextUsage`` for the session payload: the next request's fill, calibrated."""
    parts = buckets(request, memory_blocks)
    used = round(sum(parts.values()) * calibration)
    budget = int(ahentic_settings.CONTEXT_BUDGET_TOKENS)
    return {
        "budgetTokens": budget,
        "usedTokens": used,
        "percent": round(100 * used / budget, 1) if budget else 0,
        "buckets": {k: round(v * calibration) for k, v in parts.items()},
        "estimatedTokens": sum(parts.values()),
        "calibration": round(calibration, 4),
    }


def event_tokens(event: Event) -> int:
    """An upper bound of what the event adds to a request (as prompt.build_messages sends it)."""
    if event.kind == Event.Kind.SYSTEM_MESSAGE:
        return 0  # UI notes are not sent
    if event.kind == Event.Kind.TOOL_CALL:
        payload = event.payload
        own = tokens(_dumps({"name": payload.get("tool"), "input": payload.get("input") or {}}))
    elif event.kind == Event.Kind.SUBAGENT_MESSAGE:
        own = event.token_count + SUBAGENT_LABEL_TOKENS
    else:
        own = event.token_count
    extra = tokens(event.payload["context"]) if event.payload.get("context") else 0
    return own + ROLE_OVERHEAD + extra


def select_window(
    events: list[Event], start_id: int | None, fixed_tokens: int
) -> tuple[list[Event], int | None]:
    """The events to send and the (possibly moved) window start.

    Returns ``(window, new_start)``; ``new_start`` is None when the start did not move.
    """
    budget = int(ahentic_settings.CONTEXT_BUDGET_TOKENS)
    # A window that opens on an assistant turn gets prompt.WINDOW_OPENER in front.
    fixed_tokens += tokens(WINDOW_OPENER) + ROLE_OVERHEAD
    window = [e for e in events if start_id is None or e.pk >= start_id]
    if fixed_tokens + sum(event_tokens(e) for e in window) <= budget or len(window) <= 1:
        return window, None
    target = float(ahentic_settings.CONTEXT_EVICT_TO) * budget - fixed_tokens
    kept: list[Event] = []
    total = 0
    for event in reversed(window):
        cost = event_tokens(event)
        if kept and total + cost > target:
            break
        kept.append(event)
        total += cost
    kept.reverse()
    kept = drop_leading_answers(kept)
    return kept, kept[0].pk


def drop_leading_answers(events: list[Event]) -> list[Event]:
    """Never open a window on the answer half of a tool pair (its call is cut off)."""
    while len(events) > 1 and events[0].kind == Event.Kind.TOOL_RESPONSE:
        events = events[1:]
    return events


def inherited_context(parent_events: list[Event], room: int) -> list[Event]:
    """A sub-agent's view of its parent: the newest parent events before the fork that fit in
    ``room`` tokens (whole events; the prefix is stable, so it caches like any other)."""
    taken: list[Event] = []
    total = 0
    for event in reversed(parent_events):
        cost = event_tokens(event)
        if total + cost > room:
            break
        taken.append(event)
        total += cost
    taken.reverse()
    return drop_leading_answers(taken) if taken else []


@dataclass
class Assembly:
    """What one request is made of, chosen without writing anything."""

    system: list[dict[str, Any]]
    memory_blocks: int
    tools: list[dict[str, Any]]
    step_context: str
    window: list[Event]  # the session's own events to send
    new_start: int | None  # the window start, when it has to move for this request
    inherited: list[Event] = field(default_factory=list)  # a sub-agent's view of its parent

    def request(self, session_id) -> dict[str, Any]:
        return {
            "system": self.system,
            "tools": self.tools,
            "messages": prompt.build_messages(self.inherited + self.window, session_id),
        }


def assemble(session: Session, tools: list[Tool], events: list[Event]) -> Assembly:
    """The request for ``session`` over ``events`` (chronological, at least the window)."""
    step_context = prompt.step_context(session)
    system, memory_blocks = prompt.system_blocks(session)
    tool_defs = prompt.tool_definitions(tools)
    # Room for the step context is reserved before the window is chosen; the context is then
    # compared with what the window (not evicted history) already carries.
    fixed = estimate({"system": system, "tools": tool_defs}) + tokens(step_context)
    window, new_start = select_window(events, session.viewport_start_event_id, fixed)
    inherited: list[Event] = []
    if session.parent_id and session.fork_event_id:
        # A sub-agent fills the rest of its budget with what its parent saw before the fork.
        budget = int(ahentic_settings.CONTEXT_BUDGET_TOKENS) * float(
            ahentic_settings.CONTEXT_EVICT_TO
        )
        room = int(budget) - fixed - sum(event_tokens(e) for e in window)
        parent_events = (
            Event.objects.filter(session_id=session.parent_id, pk__lte=session.fork_event_id)
            .order_by("seq")
            .rows()
        )
        inherited = inherited_context(parent_events, room)
    return Assembly(system, memory_blocks, tool_defs, step_context, window, new_start, inherited)


# The words of the message the prediction imagines (unknown, so as short as a message gets).
TYPED_MESSAGE = "…"


def predicted_usage(
    session: Session, tools: list[Tool], events: list[Event], calibration: float
) -> dict[str, Any]:
    """``contextUsage`` of the request a message typed now would send: ``events`` (the window
    and what followed it) plus that message, which carries the step context when it differs
    from the one the window holds; the window moves first if that request would not fit."""
    typed = Event(
        pk=sys.maxsize,  # never saved; newer than every stored event
        session_id=session.pk,
        kind=Event.Kind.USER_MESSAGE,
        content=TYPED_MESSAGE,
        payload={},
        token_count=tokens(TYPED_MESSAGE),
    )
    assembly = assemble(session, tools, [*events, typed])
    if prompt.context_carrier(assembly.window, assembly.step_context) is typed:
        typed.payload = {"context": assembly.step_context}
    return usage_snapshot(assembly.request(session.pk), assembly.memory_blocks, calibration)
