"""Request assembly: events -> an Anthropic Messages API request.

Roles alternate, every tool_use is answered by exactly one tool_result in the next user
message, and orphan halves (pruned or never answered) are dropped rather than sent. Cache
breakpoints sit on the last tool, the system prompt and the newest message; nothing that changes
per request (timestamps, ids) is placed before them.

The system prompt (soul, environment, expertise, memory) changes only when memory folds, the
expertise changes or the site's settings change. Everything that may change from one turn to
the next (mode, goals, page context, plan, artifact pointers) is the step context, a text block
stored with the newest user-role turn, so earlier turns keep their bytes and a chat's next
message reads all of the previous request from the prompt cache.
"""

from __future__ import annotations

import json
import operator
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from django.utils import timezone

from artifacts_app import store
from sessions_app import agents
from sessions_app import attachments as attachment_store
from sessions_app.conf import ahentic_settings
from sessions_app.models import Event, EventRow, Goal, Session, Snapshot
from sessions_app.tokens import block_tokens, definition_tokens, estimate_tokens

from .. import skills
from ..tools import RESULT_CHARS, Tool
from ..tools.admin_tools import page_context_with_admin

# Tool results are cut to 8000 characters (``tools.RESULT_CHARS``). The shorter cut applies
# to what a sub-agent inherits from its parent: a cut that depended on which run is current would change the bytes of every
# earlier result at each new message and rewrite the cached prefix (0.1x -> 1.25x the price).
HISTORY_RESULT_CHARS = 1500
CACHE = {"type": "ephemeral"}

# --- what a process keeps per session version ------------------------------------------------
# A step reads some of a session's children every time although they rarely change: its goals
# and its artifacts' pointers (the step context shows them). Every write of those bumps the
# session's ``version`` (the REST ETag) in the same transaction, so what was read after the
# version ``v`` was loaded holds for ``v``: kept by ``(name, session, v)`` as the payload of a
# poll is cached, a step reuses what the previous one read when nothing visible changed since.
# A version is never reused, so an entry is never stale for its key; the keeping is bounded
# (least recently used first) and per process. Values kept are immutable (text, tuples). A
# name may be kept per run instead (the run number in place of the version: what a run reads
# once, ``other_agents_lines``).
T = TypeVar("T")
KEPT_MAX = 256
_kept: OrderedDict[tuple, Any] = OrderedDict()
_kept_lock = threading.Lock()


def kept_per_version(name: str, session_id, version: int, compute: Callable[[], T]) -> T:
    """``compute()`` for ``session_id`` at ``version`` (read before ``compute`` reads
    anything), computed once per process while kept."""
    key = (name, str(session_id), version)
    with _kept_lock:
        if key in _kept:
            _kept.move_to_end(key)
            return _kept[key]
    value = compute()
    with _kept_lock:
        _kept[key] = value
        while len(_kept) > KEPT_MAX:
            _kept.popitem(last=False)
    return value


def clear_kept() -> None:
    with _kept_lock:
        _kept.clear()


DEFAULT_SOUL = """You are the AI agent of this website, working for the signed-in user.
Use the tools you are given to do the work; ask the user (ask_user) only when you cannot
proceed without an answer. For multi-step jobs keep a short plan with update_plan. Keep replies
short and concrete, and say plainly what you did and what is left."""


def soul_text(session: Session | None = None, settings: agents.AgentSettings | None = None) -> str:
    """The system prompt's site part: the session's agent's instructions (``SOUL``), a file
    path or text, the default soul when unset. ``settings``: the session's agent's settings
    when the caller holds them."""
    if settings is None and session is not None:
        settings = agents.settings_for(session)
    soul = settings.SOUL if settings is not None else ahentic_settings.SOUL
    if not soul:
        return DEFAULT_SOUL
    soul = str(soul)
    if "\n" not in soul and soul.endswith((".md", ".txt")) and Path(soul).is_file():
        return Path(soul).read_text(encoding="utf-8")
    return soul


# Event kinds as module names: the request builders compare them for every event of the window,
# and looking a member up on its enum class costs several times the comparison.
USER_MESSAGE = Event.Kind.USER_MESSAGE
AGENT_MESSAGE = Event.Kind.AGENT_MESSAGE
TOOL_CALL = Event.Kind.TOOL_CALL
TOOL_RESPONSE = Event.Kind.TOOL_RESPONSE
SYSTEM_MESSAGE = Event.Kind.SYSTEM_MESSAGE
SUBAGENT_MESSAGE = Event.Kind.SUBAGENT_MESSAGE

# Every message adds this much to the estimate beside its blocks (the local API's rule).
ROLE_OVERHEAD = 4
# Blocks the API refuses a cache_control on.
UNMARKED = ("thinking", "redacted_thinking")
GOAL_DECAY_MESSAGES = 5
CONVERSATION_KINDS = (USER_MESSAGE, AGENT_MESSAGE)
WINDOW_OPENER = "[Earlier conversation is summarized in your memory.]"


def memory_text(session: Session) -> str:
    if session.viewport_start_event_id is None:
        return ""  # nothing left the window yet, so nothing was summarized (brain.remember)
    snapshots = Snapshot.objects.filter(session_id=session.pk).order_by("from_event_id")
    texts = list(snapshots.values_list("text", flat=True))
    if not texts:
        return ""
    return "## Memory (summaries of earlier conversation)\n" + "\n\n".join(texts)


def environment_text(session: Session) -> str:
    owner = session.owner
    full_name = getattr(owner, "get_full_name", None)  # AbstractUser's, not every model's
    name = (full_name() if callable(full_name) else "") or owner.get_username()
    # The date changes once a day, never per request, so the cached prefix holds all day. The
    # mode may change with any message, so it is step context.
    lines = ["## Environment", f"User: {name}", f"Today: {timezone.localdate().isoformat()}"]
    if session.prompt:
        lines.append(f"You are a sub-agent. Your task: {session.prompt}")
    if not session.prompt:
        lines.extend(other_agents_lines(session))
    roster = agents.roster(session)
    if roster:
        lines.append(
            "Agents you may hand a task to (spawn_subagent with agent=<slug>): "
            + "; ".join(f"{slug}: {name} ({description})" for slug, name, description in roster)
        )
    return "\n".join(lines)


# What the agent says when a request needs a tool it lacks (the offline demo model reads the
# heading to find the agent it names).
OTHER_AGENTS_HEADING = "Other agents the user can start a chat with (the new-chat button):"
NO_TOOL_RULE = (
    "When the user asks for something none of your tools can do, say so plainly in one "
    "sentence, and name the agent above whose description says it can (the user picks it "
    "with the new-chat button); never pretend to have done it."
)
PLACES = {"site": "on the site's pages", "admin": "in the admin", "both": "everywhere"}


def other_agents_lines(session: Session) -> list[str]:
    """The other agents the user may pick, one line each with where it shows, and the rule for
    a request no tool of this agent serves; none when the user has no other agent.

    Read at a run's first step in a process and kept for the run's later steps (keyed by the
    run number, which a new run never reuses): the agents, their groups and the user's
    permissions are two or three queries, and the system prompt (the cached prefix) stays the
    same through a run. An agent added or taken away meanwhile is named from the next run."""
    return list(
        kept_per_version("other_agents", session.pk, session.run_seq, lambda: _others(session))
    )


def _others(session: Session) -> tuple[str, ...]:
    others = agents.other_agents(session)
    if not others:
        return ()
    return (
        OTHER_AGENTS_HEADING,
        *(
            f"- {agent.name} ({PLACES.get(agent.shows_on, agent.shows_on)}): "
            f"{agent.description or 'no description'}"
            for agent in others
        ),
        NO_TOOL_RULE,
    )


def expertise_text(session: Session, settings: agents.AgentSettings | None = None) -> str:
    available_skills, available_workflows = skills.for_session(session, settings)
    parts = []
    for name in session.active_skills or []:
        if name in available_skills:
            parts.append(f"### Skill: {name}\n{available_skills[name].body}")
    workflow = available_workflows.get(session.active_workflow or "")
    if workflow:
        parts.append(f"### Workflow: {workflow.name}\n{workflow.body}")
    inactive = [s for s in available_skills.values() if s.name not in (session.active_skills or [])]
    if inactive:
        parts.append(
            "Skills you can activate (activate_skill): "
            + "; ".join(f"{s.name}: {s.description}" for s in inactive)
        )
    if available_workflows and not workflow:
        parts.append(
            "Workflows you can follow (activate_workflow): "
            + "; ".join(f"{w.name}: {w.description}" for w in available_workflows.values())
        )
    return "## Expertise\n" + "\n\n".join(parts) if parts else ""


def goals_text(session: Session) -> str:
    """Active goals, and completed ones until 5 conversation messages have passed (a section
    of the step context). Kept per session version (``kept_per_version``): a goal's
    write and a new message both move it."""
    return kept_per_version("goals", session.pk, session.version, lambda: _goals_text(session))


def keep_step_context(session_id, from_version: int, to_version: int, added: list) -> None:
    """What ``step_context`` reads per version (goals, artifact pointers), kept from
    ``from_version`` for ``to_version`` when only a step's own writes moved the version
    between them, writes that add ``added`` and change no goal and no artifact: the goals'
    text too unless ``added`` holds a conversation message (a completed goal fades after
    ``GOAL_DECAY_MESSAGES`` of them)."""
    if from_version == to_version:
        return
    names = ["pointers"]
    if not any(event.kind in CONVERSATION_KINDS for event in added):
        names.append("goals")
    session_key = str(session_id)
    with _kept_lock:
        for name in names:
            value = _kept.get((name, session_key, from_version), _kept)
            if value is not _kept:
                _kept[(name, session_key, to_version)] = value
        while len(_kept) > KEPT_MAX:
            _kept.popitem(last=False)


def _goals_text(session: Session) -> str:
    goals = list(
        Goal.objects.filter(session_id=session.pk)
        .exclude(status=Goal.Status.ABANDONED)
        .order_by("pk")
    )
    completed = [
        g.completed_at for g in goals if g.status == Goal.Status.COMPLETED and g.completed_at
    ]
    later: list = []
    if completed:
        later = list(
            Event.objects.filter(
                session_id=session.pk, kind__in=CONVERSATION_KINDS, created_at__gt=min(completed)
            ).values_list("created_at", flat=True)
        )

    def shown(goal: Goal) -> bool:
        if goal.status == Goal.Status.ACTIVE:
            return True
        return sum(1 for at in later if at > goal.completed_at) < GOAL_DECAY_MESSAGES

    lines = []
    for goal in goals:
        if goal.parent_id is None and shown(goal):
            lines.append(f"- [{goal.status}] #{goal.pk} {goal.description[:500]}")
            for sub in goals:
                if sub.parent_id == goal.pk and shown(sub):
                    lines.append(f"  - [{sub.status}] #{sub.pk} {sub.description[:300]}")
    return GOALS_SECTION + "\n" + "\n".join(lines) if lines else ""


def system_blocks(
    session: Session, settings: agents.AgentSettings | None = None
) -> tuple[list[dict[str, Any]], int]:
    """System prompt blocks in order: soul, environment, expertise, memory snapshots.

    Returns the blocks and how many of them, at the end, are memory (contextUsage buckets).
    Memory comes last: a fold changes the least of the cached prefix. ``settings``: the
    session's agent's settings when the caller holds them.
    """
    if settings is None:
        settings = agents.settings_for(session)
    memory = memory_text(session)
    texts = [
        soul_text(session, settings),
        environment_text(session),
        expertise_text(session, settings),
        memory,
    ]
    blocks = [{"type": "text", "text": t} for t in texts if t]
    blocks[-1] = {**blocks[-1], "cache_control": CACHE}
    return blocks, 1 if memory else 0


class SizedBlock(dict):
    """A tool definition that carries its token estimate (``definition_tokens``), so sizing a
    request (``context.buckets``) does not measure it again. It is sent as the plain dict it is.
    (A message's blocks are plain dicts: their estimates ride beside them, ``Part``.)"""

    __slots__ = ("tokens",)

    def __init__(self, block: dict[str, Any], tokens: int | None = None):
        super().__init__(block)
        self.tokens = block_tokens(block) if tokens is None else tokens


# Each tool's definition, built and sized once per process (by name; a tool registered again
# under the same name is a different object and is built again).
_DEFINITIONS: dict[str, tuple[Tool, SizedBlock]] = {}


def tool_definitions(
    tools: list[Tool], server_tools: list[dict[str, Any]] = ()
) -> list[dict[str, Any]]:
    """The request's tool definitions: the site's tools, then the API's server tools
    (``server_tools``), the last one carrying the tools' cache breakpoint."""
    defs: list[dict[str, Any]] = []
    for tool in tools:
        known = _DEFINITIONS.get(tool.name)
        if known is None or known[0] is not tool:
            schema = tool.api_schema()
            known = _DEFINITIONS[tool.name] = (tool, SizedBlock(schema, definition_tokens(schema)))
        defs.append(known[1])
    defs.extend(SizedBlock(tool, definition_tokens(tool)) for tool in server_tools)
    if defs:
        defs[-1] = {**defs[-1], "cache_control": CACHE}
    return defs


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


PAGE_CONTEXT_CHARS = 2000
CONTEXT_HEADER = "[Context for this step, from the system, not the user]"
MODE_SECTION = "Mode:"
GOALS_SECTION = "Goals (set_goal, complete_goal):"
PAGE_SECTION = "Active browser page context:"
USER_ROLE_KINDS = (USER_MESSAGE, TOOL_RESPONSE, SUBAGENT_MESSAGE)


def step_context(session: Session) -> str:
    """Volatile per-step context: mode, goals, page context, plan checklist, artifact pointers.

    It rides in a text block of the user turn the step creates and is stored with that turn,
    so earlier turns (and the cached prefix) never change.
    """
    mode = "Ask (use read-only tools only)" if session.mode == Session.Mode.ASK else "Agent"
    parts = [f"{MODE_SECTION} {mode}"]
    goals = goals_text(session)
    if goals:
        parts.append(goals)
    if session.page_context:
        page_context = page_context_with_admin(session.owner, session.page_context)
        page = json.dumps(page_context, ensure_ascii=False, sort_keys=True)
        parts.append(f"{PAGE_SECTION}\n" + _clip(page, PAGE_CONTEXT_CHARS))
    plan = session.plan or {}
    if plan.get("steps"):
        lines = [f"- [{s['status']}] {s['id']}: {s['content']}" for s in plan["steps"]]
        title = f" {plan['title']}" if plan.get("title") else ""
        parts.append(
            f"Current plan{title} (keep it current with update_plan):\n" + "\n".join(lines)
        )
    # Kept per session version: every artifact write notes itself in the session's events.
    pointers = kept_per_version(
        "pointers", session.pk, session.version, lambda: store.prompt_pointers(session.pk)
    )
    if pointers:
        parts.append(pointers)
    # Sections are separated by blank lines (context.buckets splits them the same way).
    return "\n\n".join([CONTEXT_HEADER, *parts])


def context_carrier(events: list[Event], context: str) -> Event | None:
    """The event of ``events`` (the window) that ``context`` should be stored with: the newest
    sent event, if it is a user-role turn without a context of its own, and unless the window
    already carries the same context (repeating it would only spend tokens)."""
    # System notes (artifact writes, cancels) are not sent; the newest sent event counts.
    newest = next((e for e in reversed(events) if e.kind != SYSTEM_MESSAGE), None)
    if not context or newest is None or newest.kind not in USER_ROLE_KINDS:
        return None
    if "context" in newest.payload:
        return None
    previous = next(
        (e.payload["context"] for e in reversed(events) if "context" in e.payload), None
    )
    return None if previous == context else newest


def attach_context(events: list[EventRow], context: str) -> EventRow | None:
    """Put ``context`` on the event ``context_carrier`` picks (if any), in ``events`` (a new
    row replaces it: rows are immutable); returns the new row, which the caller stores with
    the turn the request answers (``services.events_append``'s ``notes``)."""
    carrier = context_carrier(events, context)
    if carrier is None:
        return None
    noted = carrier.with_payload({**carrier.payload, "context": context})
    index = next(i for i in range(len(events) - 1, -1, -1) if events[i] is carrier)
    events[index] = noted
    return noted


def _blocks_for(event: Event, result_chars: int) -> tuple[str, dict[str, Any]] | None:
    payload = event.payload or {}
    if event.kind == USER_MESSAGE:
        return ("user", {"type": "text", "text": event.content}) if event.content.strip() else None
    if event.kind == AGENT_MESSAGE:
        if payload.get("meta", {}).get("error") or not event.content.strip():
            return None  # failure copy is for the user, never fed back to the model
        return "assistant", {"type": "text", "text": event.content}
    if event.kind == TOOL_CALL:
        return "assistant", {
            "type": "tool_use",
            "id": event.tool_use_id,
            "name": payload.get("tool", "unknown"),
            "input": payload.get("input") or {},
        }
    if event.kind == TOOL_RESPONSE:
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": event.tool_use_id,
            "content": _clip(event.content or "(empty result)", result_chars),
        }
        if not payload.get("ok", True):
            block["is_error"] = True
        return "user", block
    return None  # system messages are UI notices


def subagent_pair(event: Event) -> list[tuple[str, dict[str, Any]]]:
    """A sub-agent's report as a synthetic ``subagent_message`` tool_use/tool_result pair: the
    model reads it as the answer to its own delegation, never as words of the user."""
    call_id = f"toolu_subagent_{event.pk}"
    name = (event.payload or {}).get("name", "sub-agent")
    return [
        (
            "assistant",
            {
                "type": "tool_use",
                "id": call_id,
                "name": "subagent_message",
                "input": {"name": name},
            },
        ),
        (
            "user",
            {"type": "tool_result", "tool_use_id": call_id, "content": event.content or "(empty)"},
        ),
    ]


# What a block of a request holds that a check of the whole request looks for: an image or a
# document (the API's limits on what one request carries, ``attachments.within_request_limits``)
# and a Files API file (the request needs the Files API's beta header, ``llm.call_model``).
MEDIA = 1
FILE = 2


def block_flags(block: dict[str, Any]) -> int:
    """``MEDIA`` and ``FILE`` of a content block (at its top or in a tool_result's content)."""
    flags = 0
    inner = block.get("content") if block.get("type") == "tool_result" else None
    for item in inner if isinstance(inner, list) else (block,):
        if not isinstance(item, dict):
            continue
        if item.get("type") in ("image", "document"):
            flags |= MEDIA
        source = item.get("source")
        if isinstance(source, dict) and source.get("type") == "file":
            flags |= FILE
    return flags


# A block's estimate by contextUsage bucket: history, toolResults, pageContext, planArtifacts.
Weights = tuple[int, int, int, int]


def block_weights(block: dict[str, Any], tokens: int | None = None) -> Weights:
    """``block``'s estimate by bucket: ``tokens`` when it was sized as it was built (a tool
    result counts as tool results, any other block as history); else measured, a step context
    split into its sections (header and mode count as history, the page context as its own
    bucket, goals, plan and artifact pointers as ``planArtifacts``)."""
    kind = block.get("type")
    if kind == "tool_result":
        return (0, block_tokens(block) if tokens is None else tokens, 0, 0)
    if tokens is None and kind == "text" and block.get("text", "").startswith(CONTEXT_HEADER):
        # Sections are blank-line separated (``step_context``).
        header, *sections = block["text"].split("\n\n")
        page = sum(estimate_tokens(p) for p in sections if p.startswith(PAGE_SECTION))
        plain = estimate_tokens(header) + sum(
            estimate_tokens(p) for p in sections if p.startswith(MODE_SECTION)
        )
        return (plain, 0, page, max(0, block_tokens(block) - page - plain))
    return (block_tokens(block) if tokens is None else tokens, 0, 0, 0)


# One block of a request as an event adds it: its role, the block (a plain dict, sent as it
# is), its ``Weights`` and its ``MEDIA``/``FILE`` flags.
Part = tuple[str, dict[str, Any], Weights, int]


def attachment_pairs(
    event: Event | EventRow, pairs: list[tuple[str, dict[str, Any], int | None]]
) -> list[tuple[str, dict[str, Any], int | None]]:
    """A user message's attachments as image and document blocks before its text; a tool's
    images in its tool_result after the text. Each block is the same bytes at every step
    (``attachments.content_block``), so the turn stays in the prompt cache; each is sized by
    what was read of its file when it was stored (``media.attachment_tokens``). Pairs are
    ``(role, block, tokens)``, tokens None when the block is still to be measured."""
    refs = event.payload["attachments"]
    media = [(attachment_store.content_block(r), int(r["tokens"])) for r in refs]
    if event.kind == USER_MESSAGE:
        text = [(role, block, block_tokens(block)) for role, block, _ in pairs]
        return [("user", block, tokens) for block, tokens in media] + text
    if event.kind == TOOL_RESPONSE and pairs:
        role, block, _ = pairs[0]
        text = {"type": "text", "text": block["content"]}
        result = {**block, "content": [text, *(b for b, _ in media)]}
        tokens = block_tokens({**block, "content": [text]}) + sum(t for _, t in media)
        return [(role, result, tokens)]
    return pairs


def has_turn_blocks(event: Event | EventRow) -> bool:
    """Whether the assistant message ``event`` stores its turn's blocks whole (thinking, server
    tools, cited text: ``turn_blocks``); they are sent back exactly as stored."""
    payload = event.payload or {}
    return bool(payload.get("blocks")) and not payload.get("meta", {}).get("error")


def stored_estimate(event: Event | EventRow, block: dict[str, Any]) -> int | None:
    """The event's stored estimate (``event_token_count``) when it is ``block``'s, else None:
    a tool call's tool_use block, or a block that carries the event's text unclipped. Measuring
    every block of the window again would cost a step more than its queries."""
    if event.kind == TOOL_CALL:
        return event.token_count if "tool" in event.payload else None
    if "blocks" in event.payload:
        return None  # the event's estimate covers all of its blocks
    text = block.get("text") if block.get("type") == "text" else block.get("content")
    return event.token_count if text == event.content else None


def event_parts(event: Event | EventRow, session_id) -> list[Part]:
    """The ``Part``s an event adds to a request, the step context stored with it after its
    user-role block. An ``EventRow`` keeps them (``parts``), so a row's blocks are built,
    sized and looked over once in a process, however many steps send it."""
    return _parts(event, event.session_id == session_id)


def _parts(event: Event | EventRow, own: bool) -> list[Part]:
    """``event_parts`` of an event of the session the request is for (``own``) or not."""
    kept = getattr(event, "parts", None)
    if kept is not None and kept[0] == own:
        return kept[1]
    pairs: list[tuple[str, dict[str, Any], int | None]]
    if event.kind == SUBAGENT_MESSAGE:
        pairs = [
            (role, block, stored_estimate(event, block)) for role, block in subagent_pair(event)
        ]
    elif event.kind == AGENT_MESSAGE and has_turn_blocks(event):
        pairs = [("assistant", block, None) for block in event.payload["blocks"]]
    else:
        item = _blocks_for(event, RESULT_CHARS if own else HISTORY_RESULT_CHARS)
        pairs = [(*item, stored_estimate(event, item[1]))] if item else []
        if event.payload.get("attachments"):
            pairs = attachment_pairs(event, pairs)
    parts: list[Part] = []
    for role, block, tokens in pairs:
        tokens = block_tokens(block) if tokens is None else tokens
        parts.append((role, block, block_weights(block, tokens), block_flags(block)))
    if pairs and pairs[-1][0] == "user" and event.payload.get("context"):
        block = {"type": "text", "text": event.payload["context"]}
        parts.append(("user", block, block_weights(block), 0))
    # Not kept for a row with attachments: its blocks come from the attachments' own bounded
    # cache (``attachments.content_block``), and the row memo budgets text, not base64 bytes.
    if isinstance(event, EventRow) and not event.payload.get("attachments"):
        event.remember_parts((own, parts))
    return parts


@dataclass
class Messages:
    """A request's messages and what the one walk that built them learned: their estimate by
    contextUsage bucket (``weights``: history, toolResults, pageContext, planArtifacts, the
    role overhead of each message included) and whether a block is a Files API file."""

    messages: list[dict[str, Any]]
    weights: Weights
    files: bool


# The messages a process built last for a session's whole window, up to the newest message
# it closed at a point where nothing was left open (``Prefix``), by session: the next step's
# window begins with the same rows, so its build starts there (``MAX_PREFIXES`` sessions, the
# least recently used go first).
MAX_PREFIXES = 16


@dataclass(frozen=True)
class Prefix:
    """The messages built from ``rows`` (the first events of a window, compared by identity:
    kept rows are immutable), every one closed, every tool call among them answered among them,
    no image or document in them, with their weights and flags."""

    session_id: Any
    rows: tuple[Any, ...]
    messages: tuple[dict[str, Any], ...]
    weights: Weights
    flags: int


class _Prefixes:
    def __init__(self) -> None:
        self.kept: OrderedDict[Any, Prefix] = OrderedDict()
        self.lock = threading.Lock()

    def clear(self) -> None:
        with self.lock:
            self.kept.clear()

    def find(self, session_id, events: list[Any]) -> Prefix | None:
        with self.lock:
            prefix = self.kept.get(session_id)
        if (
            prefix is None
            or prefix.session_id != session_id
            or len(prefix.rows) >= len(events)
            or not all(map(operator.is_, prefix.rows, events))
        ):
            return None
        return prefix

    def put(self, prefix: Prefix) -> None:
        with self.lock:
            self.kept.pop(prefix.session_id, None)
            self.kept[prefix.session_id] = prefix
            while len(self.kept) > MAX_PREFIXES:
                self.kept.popitem(last=False)


prefixes = _Prefixes()


def build_messages(events: list[Event], session_id, keep: bool = False) -> Messages:
    """Events (chronological) -> alternating messages with every tool pair intact. Events of
    another session (what a sub-agent inherits from its parent) are older history. One walk
    of the events: it sizes the messages and notes what the request's checks look for, so
    nothing walks the request again (only a window with images or documents is looked over
    for the API's limits, ``attachments.within_request_limits``). ``keep``: the events are a
    whole window; the walk starts after the ``Prefix`` this process kept of it, and keeps the
    new one."""
    messages: list[dict[str, Any]] = []
    history = tool_results = page_context = plan_artifacts = 0
    flags = 0
    role = None
    content: list[dict[str, Any]] = []
    prefix = prefixes.find(session_id, events) if keep else None
    start = 0
    if prefix is not None:
        # The event after the prefix starts a message (it did when the prefix was built); its
        # last message is a copy all the same, so nothing a build does reaches a kept one.
        messages = list(prefix.messages)
        role, content = messages[-1]["role"], list(messages[-1]["content"])
        messages[-1] = {"role": role, "content": content}
        history, tool_results, page_context, plan_artifacts = prefix.weights
        flags = prefix.flags
        start = len(prefix.rows)
        events = events[start:]
    calls = {e.tool_use_id for e in events if e.kind == TOOL_CALL}
    results = {e.tool_use_id for e in events if e.kind == TOOL_RESPONSE}
    paired = calls & results
    # The API wants tool_result blocks before any other block of a user message: the
    # messages where one follows another block are put in that order below.
    unordered: list[list[dict[str, Any]]] = []
    # The blocks that may change after the walk, with their weights: a media block (replaced
    # by a note past a limit) and every block of the last message (its breakpoint block).
    media: list[tuple[list[dict[str, Any]], int, dict[str, Any], Weights]] = []
    last: list[Weights] = []  # the weights of the newest message's blocks, in order
    # Where the next prefix may end: before an event that starts a message when no tool call
    # is left unanswered and no event was skipped (an orphan may be answered later).
    cut: tuple[int, int, Weights, int] | None = None
    unanswered: set[str] = set()
    skipped = not keep
    # Whose the events are, compared once per session id object (the rows of one read share
    # one): a comparison of ids per event costs more than the rest of a kept row's walk.
    event_session, own = None, False
    for index, event in enumerate(events):
        kind = event.kind
        tool = kind in (TOOL_CALL, TOOL_RESPONSE)
        if tool and event.tool_use_id not in paired:
            skipped = True
            continue  # orphan half: its partner was pruned or is not answered yet
        if event.session_id is not event_session:
            event_session = event.session_id
            own = event_session == session_id
        parts = _parts(event, own)
        if not skipped and not unanswered and parts and parts[0][0] != role:
            weights_so_far = (history, tool_results, page_context, plan_artifacts)
            cut = (start + index, len(messages), weights_so_far, flags)
        if tool:
            if kind == TOOL_CALL:
                unanswered.add(event.tool_use_id)
            else:
                unanswered.discard(event.tool_use_id)
        for part_role, block, weights, block_flags_ in parts:
            if part_role == role:
                if (
                    block["type"] == "tool_result"
                    and content[-1]["type"] != "tool_result"
                    and (not unordered or unordered[-1] is not content)
                ):
                    unordered.append(content)
                content.append(block)
            else:
                role, content = part_role, [block]
                messages.append({"role": role, "content": content})
                history += ROLE_OVERHEAD
                last = []
            last.append(weights)
            history += weights[0]
            tool_results += weights[1]
            page_context += weights[2]
            plan_artifacts += weights[3]
            if block_flags_:
                flags |= block_flags_
                if block_flags_ & MEDIA:
                    media.append((content, len(content) - 1, block, weights))
    if media and attachment_store.within_request_limits(messages):
        for holder, index, block, weights in media:
            if holder[index] is not block:  # replaced by a note (or a tool_result's copy)
                new = block_weights(holder[index])
                history += new[0] - weights[0]
                tool_results += new[1] - weights[1]
                page_context += new[2] - weights[2]
                plan_artifacts += new[3] - weights[3]
                if holder is messages[-1]["content"]:
                    last[index] = new
    opened = False
    if messages and messages[0]["role"] != "user":
        # The window opens on an assistant turn (older turns were evicted): a stable opener
        # keeps the roles alternating without dropping that turn's tool calls.
        opener = {"type": "text", "text": WINDOW_OPENER}
        messages.insert(0, {"role": "user", "content": [opener]})
        opened = True
        history += ROLE_OVERHEAD + block_weights(opener)[0]
    # The newest message's blocks with their weights, before the order below changes them.
    sized = {
        id(block): weights
        for block, weights in zip(content[len(content) - len(last) :], last, strict=True)
    }
    for blocks in unordered:
        blocks.sort(key=_results_first)
    if keep and cut is not None and cut[1] and not flags & MEDIA:  # a message at least
        rows, closed = cut[0], cut[1] + (1 if opened else 0)
        whole = (prefix.rows if prefix is not None else ()) + tuple(events[: rows - start])
        prefixes.put(
            Prefix(session_id, whole, tuple(messages[1 if opened else 0 : closed]), cut[2], cut[3])
        )
    if messages:
        content = messages[-1]["content"]
        # A final assistant turn (a paused one) may end on blocks that take no breakpoint.
        marked = next(
            (k for k in range(len(content) - 1, -1, -1) if content[k]["type"] not in UNMARKED),
            None,
        )
        if marked is not None:
            block = content[marked]
            content[marked] = {**block, "cache_control": CACHE}
            # The marked copy is measured as sent, like any block not sized when it was built.
            old = sized.get(id(block)) or block_weights(block)
            new = block_weights(content[marked])
            history += new[0] - old[0]
            tool_results += new[1] - old[1]
            page_context += new[2] - old[2]
            plan_artifacts += new[3] - old[3]
    return Messages(
        messages, (history, tool_results, page_context, plan_artifacts), bool(flags & FILE)
    )


def _results_first(block: dict[str, Any]) -> bool:
    return block["type"] != "tool_result"


@dataclass
class Request:
    """The request a model call sends (``body``: system, tools, messages) and what assembling
    it learned: the messages' estimate by bucket and whether they use the Files API."""

    body: dict[str, Any]
    message_weights: Weights
    files: bool


def request(
    system: list[dict[str, Any]], tools: list[dict[str, Any]], events: list[Event], session_id
) -> Request:
    """The one assembly of a request from its parts (``context.Assembly.request``): the
    system blocks, the tool definitions and the events to send."""
    built = build_messages(events, session_id, keep=True)
    body = {"system": system, "tools": tools, "messages": built.messages}
    return Request(body, built.weights, built.files)


def request_excerpt(request: dict[str, Any]) -> dict[str, Any]:
    """Sizes for the llm_request trace event (never whole bodies, and nothing that serializes
    the request: the SDK does that once)."""
    return {
        "system_len": sum(len(b["text"]) for b in request["system"]),
        "tools": len(request["tools"]),
        "messages": len(request["messages"]),
    }


# --- the model's wider surface ---------------------------------------------------------------
# The model's wider surface: thinking, effort and the API's server tools (web search, web fetch).
#
# Each feature is a setting that may differ per mode: a plain value applies to both modes, a dict
# ``{"agent": value, "ask": value}`` gives each mode its own (a mode it does not name is off).
#
# * ``THINKING``: ``"off"``, ``"adaptive"`` or a budget in tokens (an int >= 1024, below the
#   step's ``max_tokens``), sent as ``thinking``; ``THINKING_DISPLAY`` (``"summarized"`` or
#   ``"omitted"``) rides in it. ``EFFORT`` (``"low"`` ... ``"max"``) is ``output_config.effort``.
# * ``WEB_SEARCH`` / ``WEB_FETCH``: None (off) or a dict of the tool's options (``max_uses``,
#   ``allowed_domains``, ``blocked_domains``; web fetch also ``max_content_tokens`` and
#   ``citations``), sent as the versioned server tools below.
#
# History: thinking, redacted-thinking and server tool blocks are stored as the model sent them
# (``llm.LLMResult.content``) with the assistant turn's message event (``turn_blocks``) and sent
# back unchanged in every later request. The API would let earlier turns' thinking be dropped, but
# dropping it would change the bytes of turns already in the cached prefix the moment a new user
# message arrives; keeping it keeps every request a byte-extension of the previous one.

# The server tools' versions: the current ones (dynamic filtering of results) for current
# models, the first ones for the models released before them (``server_tool_types``).
WEB_SEARCH_TYPE = "web_search_20260209"
WEB_FETCH_TYPE = "web_fetch_20260209"
LEGACY_WEB_SEARCH_TYPE = "web_search_20250305"
LEGACY_WEB_FETCH_TYPE = "web_fetch_20250910"
# Model names that take only the first versions: Claude 3.x, and Claude 4 up to 4.5.
LEGACY_SERVER_TOOL_MODELS = re.compile(
    r"^claude-(?:3\b.*|[a-z]+-3\b.*|[a-z]+-4(?:-[0-5])?(?:-\d{8}.*)?)$"
)
THINKING_MIN_BUDGET = 1024
DISPLAYS = ("summarized", "omitted")
EFFORTS = ("low", "medium", "high", "xhigh", "max")
MODES = ("agent", "ask")
# Blocks of an assistant turn that are sent back exactly as received.
THINKING_TYPES = ("thinking", "redacted_thinking")
WEB_SEARCH_OPTIONS = ("max_uses", "allowed_domains", "blocked_domains", "user_location")
WEB_FETCH_OPTIONS = (
    "max_uses",
    "allowed_domains",
    "blocked_domains",
    "max_content_tokens",
    "citations",
)


def per_mode(value: Any, mode: str) -> Any:
    """``value`` for ``mode`` ("agent" or "ask"): a ``{"agent": ..., "ask": ...}`` dict picks
    the mode's entry (None when it has none); anything else applies to every mode."""
    if isinstance(value, dict) and value and set(value) <= set(MODES):
        return value.get(mode)
    return value


def session_mode(session: Session) -> str:
    return "ask" if session.mode == Session.Mode.ASK else "agent"


def thinking_setting(mode: str, settings: Any = ahentic_settings) -> str | int:
    """``"off"``, ``"adaptive"`` or a budget, for ``mode``. ``settings``: the session's agent
    settings (``sessions_app.agents.settings_for``), the site's by default."""
    value = per_mode(settings.THINKING, mode)
    if value in (None, False, "off", 0):
        return "off"
    return value


def thinking_config(
    mode: str, max_tokens: int, settings: Any = ahentic_settings
) -> dict[str, Any] | None:
    """The request's ``thinking`` for ``mode``, or None when thinking is off."""
    value = thinking_setting(mode, settings)
    if value == "off":
        return None
    config: dict[str, Any]
    if value == "adaptive":
        config = {"type": "adaptive"}
    else:
        config = {"type": "enabled", "budget_tokens": min(int(value), max_tokens - 1)}
    display = per_mode(settings.THINKING_DISPLAY, mode)
    if display:
        config["display"] = display
    return config


def effort(mode: str, settings: Any = ahentic_settings) -> str | None:
    return per_mode(settings.EFFORT, mode) or None


def server_tools(mode: str, settings: Any = ahentic_settings) -> list[dict[str, Any]]:
    """The server tool definitions for ``mode`` (empty when both are off), in the versions
    the model takes (``server_tool_types``)."""
    search_type, fetch_type = server_tool_types(settings.MODEL)
    tools = []
    for setting, name, version, options in (
        (settings.WEB_SEARCH, "web_search", search_type, WEB_SEARCH_OPTIONS),
        (settings.WEB_FETCH, "web_fetch", fetch_type, WEB_FETCH_OPTIONS),
    ):
        value = per_mode(setting, mode)
        if value is None or value is False:
            continue
        value = value if isinstance(value, dict) else {}
        tool = {"type": version, "name": name}
        tool.update({k: value[k] for k in options if value.get(k) is not None})
        tools.append(tool)
    return tools


def server_tool_types(model: str) -> tuple[str, str]:
    """The web search and web fetch tool types ``model`` takes."""
    if LEGACY_SERVER_TOOL_MODELS.match(model or ""):
        return LEGACY_WEB_SEARCH_TYPE, LEGACY_WEB_FETCH_TYPE
    return WEB_SEARCH_TYPE, WEB_FETCH_TYPE


def opens_with_thinking(message: dict[str, Any]) -> bool:
    content = message.get("content") or []
    return bool(content) and content[0].get("type") in THINKING_TYPES


def continues_tool_loop(messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The assistant turn the request continues inside a tool loop: the one before a final user
    message holding tool results, or a final assistant turn (``pause_turn``). None otherwise."""
    if not messages:
        return None
    last = messages[-1]
    if last["role"] == "assistant":
        return last
    if len(messages) > 1 and any(b.get("type") == "tool_result" for b in last["content"]):
        return messages[-2]
    return None


def request_options(
    session: Session,
    messages: list[dict[str, Any]],
    max_tokens: int,
    settings: agents.AgentSettings | None = None,
):
    """``thinking`` and ``output_config`` for the step's request (keyword arguments of
    ``llm.call_model``).

    Thinking cannot start in the middle of a tool loop: when the turn the request continues
    did not open with a thinking block (thinking was switched on mid-run, or the turn is a
    sub-agent's synthetic report), the request goes without thinking; the API refuses it
    otherwise. The next turn that starts from a user message thinks again. ``settings``: the
    session's agent's settings when the caller holds them."""
    mode = session_mode(session)
    if settings is None:
        settings = agents.settings_for(session)
    options: dict[str, Any] = {}
    thinking = thinking_config(mode, max_tokens, settings)
    if thinking is not None:
        turn = continues_tool_loop(messages)
        if turn is None or opens_with_thinking(turn):
            options["thinking"] = thinking
    level = effort(mode, settings)
    if level:
        options["output_config"] = {"effort": level}
    return options


def turn_blocks(content: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """The blocks of an assistant reply its message event stores whole (all but ``tool_use``,
    which each have their tool call event), or None when the reply is plain text (its event's
    text is the block)."""
    # A thinking block cut off by max_tokens has no signature: the API would refuse it back, and
    # the turn it opened ended without tool calls, so nothing needs it.
    kept = [
        b
        for b in content
        if b.get("type") != "tool_use"
        and not (b.get("type") == "thinking" and not b.get("signature"))
    ]
    if all(b.get("type") == "text" and not b.get("citations") for b in kept):
        return None
    return kept
