"""Context accounting: the token estimator, the viewport and ``contextUsage``.

The estimator follows the counting rule documented in ``localapi`` (ceil(utf-8 bytes / 4) per
piece, 4 tokens per message), and ``contextUsage`` is calibrated by the real ``input_tokens``
of the last call, so it tracks the real API within a few percent.

Viewport (from Anima): the window holds whole events, newest first; its start only moves when
the next request would exceed ``CONTEXT_BUDGET_TOKENS``, and then in one batch down to
``CONTEXT_EVICT_TO`` of it, so the cached prefix survives many steps between evictions.

``contextUsage`` predicts the next request: what a message typed now would send. It is computed
when a step ends (``predicted_usage_after``: the request the step sent plus the events it added,
building only the messages after the window's last turn; ``predicted_usage`` assembles it
afresh when the window would move) and calibrated by the real input tokens of the step's model
call. Between steps nothing that the request holds changes, except memory
written by the background task, which shows at the next step.
"""

from __future__ import annotations

import copy
import sys
from dataclasses import dataclass, field
from typing import Any

from sessions_app import agents
from sessions_app.conf import ahentic_settings
from sessions_app.models import Event, Session, event_rows
from sessions_app.tokens import definition_tokens, estimate_tokens

from ..tools import Tool
from ..tools import memory as memory_tool
from . import prompt
from .prompt import (
    ROLE_OVERHEAD,
    SUBAGENT_MESSAGE,
    SYSTEM_MESSAGE,
    TOOL_CALL,
    TOOL_RESPONSE,
    WINDOW_OPENER,
)

# A sub-agent report is sent as a synthetic subagent_message tool_use (~15 tokens) plus the
# result: one more message of role overhead than its own content.
SUBAGENT_LABEL_TOKENS = 24


# The one token-estimate rule (ceil(utf-8 bytes / 4), at least 1), stored with every event.
tokens = estimate_tokens


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


def buckets(request: dict[str, Any] | prompt.Request, memory_blocks: int = 0) -> dict[str, int]:
    """Estimated tokens of a request by bucket: a ``prompt.Request`` (its messages sized as
    they were built) or a request body. ``memory_blocks``: how many system blocks (the last
    ones) hold memory snapshots. In the step context, the page context has its own bucket;
    goals, plan and artifact pointers count as ``planArtifacts``; the header and the mode line
    as history (``prompt.block_weights``)."""
    built = request if isinstance(request, prompt.Request) else None
    body = built.body if built is not None else request
    result = dict.fromkeys(BUCKETS, 0)
    for tool in body.get("tools") or []:
        result["tools"] += (
            tool.tokens if type(tool) is prompt.SizedBlock else definition_tokens(tool)
        )
    system = body.get("system") or []
    for index, block in enumerate(system):
        bucket = "memory" if index >= len(system) - memory_blocks else "systemPrompt"
        result[bucket] += tokens(block["text"])
    if built is not None:
        _add_weights(result, built.message_weights)
    else:
        _add_message_buckets(result, body.get("messages") or [])
    return result


MESSAGE_BUCKETS = ("history", "toolResults", "pageContext", "planArtifacts")


def _add_weights(result: dict[str, int], weights: prompt.Weights, sign: int = 1) -> None:
    for bucket, value in zip(MESSAGE_BUCKETS, weights, strict=True):
        result[bucket] += sign * value


def _add_message_buckets(result: dict[str, int], messages: list[dict[str, Any]]) -> None:
    """The buckets of a request body's messages, every block measured as sent."""
    for message in messages:
        result["history"] += ROLE_OVERHEAD
        for block in message["content"]:
            _add_weights(result, prompt.block_weights(block))


def estimate(request: dict[str, Any]) -> int:
    return sum(buckets(request).values())


def budget_of(session: Session, settings: agents.AgentSettings | None = None) -> int:
    """The context budget of the session's agent (``CONTEXT_BUDGET_TOKENS``; ``settings``:
    its agent's settings when the caller holds them)."""
    if settings is None:
        settings = agents.settings_for(session)
    return int(settings.CONTEXT_BUDGET_TOKENS)


def usage_snapshot(parts: dict[str, int], calibration: float, budget: int) -> dict[str, Any]:
    """``contextUsage`` for the session payload from a request's buckets, calibrated."""
    used = round(sum(parts.values()) * calibration)
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
    if event.kind == SYSTEM_MESSAGE:
        return 0  # UI notes are not sent
    if event.kind == SUBAGENT_MESSAGE:
        own = event.token_count + SUBAGENT_LABEL_TOKENS
    else:
        own = event.token_count
    extra = tokens(event.payload["context"]) if event.payload.get("context") else 0
    return own + ROLE_OVERHEAD + extra


def events_tokens(events: list[Event]) -> int:
    """``event_tokens`` summed over ``events``, in one loop (a window holds thousands)."""
    total = 0
    for event in events:
        kind = event.kind
        if kind == SYSTEM_MESSAGE:
            continue
        total += event.token_count + ROLE_OVERHEAD
        if kind == SUBAGENT_MESSAGE:
            total += SUBAGENT_LABEL_TOKENS
        context = event.payload.get("context")
        if context:
            total += tokens(context)
    return total


def fits(fixed_tokens: int, event_tokens_sum: int, budget: int) -> bool:
    """Whether a request of ``fixed_tokens`` (system, tools, step context) and events of
    ``event_tokens_sum`` (``event_tokens``) keeps its window start within ``budget``."""
    # A window that opens on an assistant turn gets prompt.WINDOW_OPENER in front.
    opener = tokens(WINDOW_OPENER) + ROLE_OVERHEAD
    return fixed_tokens + opener + event_tokens_sum <= budget


def select_window(
    events: list[Event], start_id: int | None, fixed_tokens: int, budget: int
) -> tuple[list[Event], int | None, int]:
    """The events to send, the (possibly moved) window start and the events' ``event_tokens``.

    Returns ``(window, new_start, window_tokens)``; ``new_start`` is None when the start did
    not move.
    """
    window = [e for e in events if start_id is None or e.pk >= start_id]
    window_tokens = events_tokens(window)
    if fits(fixed_tokens, window_tokens, budget) or len(window) <= 1:
        return window, None, window_tokens
    fixed_tokens += tokens(WINDOW_OPENER) + ROLE_OVERHEAD
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
    if kept[0].kind == TOOL_RESPONSE:
        # Only an answer fits (the budget is smaller than one tool pair beside the fixed
        # parts): its call comes too, since a request of orphan answers has no message.
        call = next(
            (
                i
                for i, e in enumerate(window)
                if e.kind == TOOL_CALL and e.tool_use_id == kept[0].tool_use_id
            ),
            None,
        )
        if call is not None:
            kept = window[call:]
    return kept, kept[0].pk, events_tokens(kept)


def drop_leading_answers(events: list[Event]) -> list[Event]:
    """Never open a window on the answer half of a tool pair (its call is cut off)."""
    while len(events) > 1 and events[0].kind == TOOL_RESPONSE:
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
    window_tokens: int  # the window's event_tokens (what select_window compared)
    inherited: list[Event] = field(default_factory=list)  # a sub-agent's view of its parent

    def attachment_refs(self) -> list[dict[str, Any]]:
        """The attachment refs the request's events carry (a message's files, a tool's
        images): the PDFs among them are prepared before it is sent (``loop.files``)."""
        return [
            item
            for event in (*self.inherited, *self.window)
            for item in (event.payload or {}).get("attachments") or ()
        ]

    def request(self, session_id) -> prompt.Request:
        """The request the model call sends (``prompt.request``, the one assembly)."""
        return prompt.request(self.system, self.tools, self.inherited + self.window, session_id)


def memory_offered(
    session: Session, tools: list[Tool], settings: agents.AgentSettings
) -> tuple[list[Tool], list[dict[str, Any]]]:
    """The request's site tools without the registry's memory tool (never sent as a custom
    tool), and its typed definition to send with the server tools when the agent keeps memory
    (``MEMORY``; ``tools/memory.py``) and the session is granted it."""
    rest = [t for t in tools if t.name != memory_tool.NAME]
    granted = session.granted_tools is None or memory_tool.NAME in session.granted_tools
    return rest, ([memory_tool.DEFINITION] if granted and settings.MEMORY else [])


def assemble(
    session: Session,
    tools: list[Tool],
    events: list[Event],
    settings: agents.AgentSettings | None = None,
) -> Assembly:
    """The request for ``session`` over ``events`` (chronological, at least the window);
    ``settings``: its agent's settings when the caller holds them."""
    if settings is None:
        settings = agents.settings_for(session)
    step_context = prompt.step_context(session)
    system, memory_blocks = prompt.system_blocks(session, settings)
    budget = int(settings.CONTEXT_BUDGET_TOKENS)
    # The memory tool goes typed, before the server tools.
    tools, typed = memory_offered(session, tools, settings)
    tool_defs = prompt.tool_definitions(
        tools, typed + prompt.server_tools(prompt.session_mode(session), settings)
    )
    # Room for the step context is reserved before the window is chosen; the context is then
    # compared with what the window (not evicted history) already carries.
    fixed = estimate({"system": system, "tools": tool_defs}) + tokens(step_context)
    window, new_start, window_tokens = select_window(
        events, session.viewport_start_event_id, fixed, budget
    )
    inherited: list[Event] = []
    if session.parent_id and session.fork_event_id:
        # A sub-agent fills the rest of its budget with what its parent saw before the fork.
        room = (
            int(budget * float(ahentic_settings.CONTEXT_EVICT_TO))
            - fixed
            - sum(event_tokens(e) for e in window)
        )
        parent_events = event_rows(session.parent_id, through_id=session.fork_event_id)
        inherited = inherited_context(parent_events, room)
    return Assembly(
        system, memory_blocks, tool_defs, step_context, window, new_start, window_tokens, inherited
    )


# The words of the message the prediction imagines (unknown, so as short as a message gets).
TYPED_MESSAGE = "…"


def as_a_message_finds_it(session: Session) -> Session:
    """The session as a message typed now would find it: when the message starts a new run,
    that run starts without the last run's plan (``runs.message_post``)."""
    if session.status not in Session.ACCEPTS_MESSAGE or not session.plan:
        return session
    view = copy.copy(session)
    view.plan = None
    return view


def typed_message(session: Session) -> Event:
    """The message the prediction imagines the user typing now (never saved)."""
    return Event(
        pk=sys.maxsize,  # newer than every stored event
        session_id=session.pk,
        kind=Event.Kind.USER_MESSAGE,
        content=TYPED_MESSAGE,
        payload={},
        token_count=tokens(TYPED_MESSAGE),
    )


def predicted_usage(
    session: Session,
    tools: list[Tool],
    events: list[Event],
    calibration: float,
    settings: agents.AgentSettings | None = None,
) -> dict[str, Any]:
    """``contextUsage`` of the request a message typed now would send: ``events`` (the window
    and what followed it) plus that message, which carries the step context when it differs
    from the one the window holds; the window moves first if that request would not fit."""
    session = as_a_message_finds_it(session)
    typed = typed_message(session)
    assembly = assemble(session, tools, [*events, typed], settings)
    if prompt.context_carrier(assembly.window, assembly.step_context) is typed:
        typed.payload = {"context": assembly.step_context}
    parts = buckets(assembly.request(session.pk), assembly.memory_blocks)
    return usage_snapshot(parts, calibration, budget_of(session, settings))


def predicted_usage_after(
    session: Session,
    sent: Assembly,
    sent_buckets: dict[str, int],
    added: list[Event],
    calibration: float,
    settings: agents.AgentSettings | None = None,
) -> dict[str, Any] | None:
    """``predicted_usage`` from the request a step just sent (``sent``, counted in
    ``sent_buckets``) and the events the step ``added``, without assembling the whole request
    again: only the messages that change (the window's last turn onwards) are built.

    The next request holds the same system prompt, tools and window plus the added events
    and the typed message; every tool call of the window is answered in it (a step calls the
    model only then), so the added events leave the window's messages as they are. Returns
    None when that request would move the window start (``predicted_usage`` then decides
    which events it keeps) or for a sub-agent (whose inherited view shrinks as it goes on)."""
    if session.parent_id or not sent.window:
        return None
    session = as_a_message_finds_it(session)
    typed = typed_message(session)
    step_context = prompt.step_context(session)
    following = [*added, typed]
    # As select_window would count it: the step context among the fixed parts.
    fixed = sum(sent_buckets[b] for b in ("systemPrompt", "memory", "tools")) + tokens(step_context)
    budget = budget_of(session, settings)
    if not fits(fixed, sent.window_tokens + sum(event_tokens(e) for e in following), budget):
        return None
    if prompt.context_carrier([*sent.window, *following], step_context) is typed:
        typed.payload = {"context": step_context}
    # The shortest tail of the window that still builds a message: its messages end the same
    # way in the whole request, so appending the added events changes it by the difference.
    for start in range(len(sent.window) - 1, -1, -1):
        tail = sent.window[start:]
        before = prompt.build_messages(tail, session.pk)
        if before.messages:
            break
    else:
        return None
    after = prompt.build_messages([*tail, *following], session.pk)
    parts = dict(sent_buckets)
    _add_weights(parts, after.weights)
    _add_weights(parts, before.weights, -1)
    return usage_snapshot(parts, calibration, budget)
