"""Tool calls from MCP clients (the site's MCP endpoint, ``mcp/server.py``), through the pipeline.

A call of a client becomes a tool call in one of the user's chats, titled
``MCP: <token name> <date>`` (one a token a day; a second one the same day while the first is
busy, so parallel calls do not wait on each other). It runs as a suggested action does: a run
begins with the call pending, the worker's step takes it through ``pipeline.process_call``
(availability, permission, schema, approval with the user's grants and the agent's policy,
execution with the tool's timeout), and the run ends with the answer instead of calling the
model (``step.StepRunner``: calls whose id starts with ``MCP_CALL_PREFIX``). So the events,
the trace, the approval card, the admin's ``LogEntry`` rows and the signals are those of a
chat.

The endpoint waits up to ``AHENTIC["MCP_CALL_WAIT_S"]`` for the answer. A call that needs
approval returns at once: the client is told to approve it in the chat and to call again with
the same arguments; that repeated call (an undelivered ``McpCall`` of the token, the same tool
and arguments) returns the recorded result instead of running the tool a second time.
Identical calls that arrive together are one call too: a call begins under its token row's
lock (``call_begin``), where it first looks for the undelivered call another request began.

A client that can ask its user (elicitation, protocol 2026-07-28) is asked instead, and its
answer comes back with the call's retry: ``approval_state`` names the waiting call in the
retry's signed ``requestState``, ``approval_answer`` records the answer through
``decisions.approval_decide`` (the card's write: whichever answers first wins, the other is
told it was already decided), then waits for the result as a call does. Nothing waits for the
client: the server keeps no request open while the user thinks.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from datetime import time as day_time
from typing import Any

from django.core import signing
from django.utils import timezone

from sessions_app import db, runstate
from sessions_app import services as session_services
from sessions_app.conf import ahentic_settings
from sessions_app.models import Event, Session
from sessions_app.runstate import PendingTool

from ..control.queue import enqueue_step
from ..control.toolcalls import MCP_CALL_PREFIX, MCP_META, result_text
from ..errors import AhenticError
from ..ledger import usage
from ..loop import decisions
from ..models import McpCall, McpToken
from ..tools import Tool, tools_for

# Built-ins that act on a chat's own state (goals, plan, skills, artifacts, memory,
# sub-agents, questions to the user): they mean nothing to an MCP client, which gets the site's
# tools and the admin tools only.
CHAT_STATE_MODULES = ("orchestrator_app.tools.",)
ADMIN_TOOLS_MODULE = "orchestrator_app.tools.admin_tools"
# How often the endpoint looks for the answer while it waits.
POLL_S = 0.2
# Signs the request state of an approval asked in the client (``approval_state``).
STATE_SALT = "ahentic.mcp.approval"
# The answers ``approval_answer`` records; ``None`` (the user dismissed the question) records none.
CLIENT_DECISIONS = ("allow_once", "deny")


class Status:
    DONE = "done"  # the tool ran (or was refused); ``result`` and ``ok`` hold its answer
    AWAITING_APPROVAL = "awaiting_approval"
    RUNNING = "running"  # not answered within MCP_CALL_WAIT_S
    REFUSED = "refused"  # never began: ``code`` and ``message`` say why


@dataclass
class CallOutcome:
    status: str
    result: Any = None
    ok: bool = True
    session: Session | None = None
    code: str = ""
    message: str = ""
    # ``already_decided``: the client's answer came after another decision (``approval_answer``)
    extra: dict[str, Any] = field(default_factory=dict)
    call: McpCall | None = None  # the call waiting for approval (AWAITING_APPROVAL)


def mcp_tools(user, version) -> list[Tool]:
    """The tools an MCP client of ``user`` gets with the agent ``version``: those a chat of
    that agent offers the user (the agent's ``TOOLS``, the user's permissions), run on the
    server, minus the chat-state built-ins. Sorted by name."""
    probe = Session(owner=user, agent_version=version, mode=Session.Mode.AGENT)
    return [
        tool
        for tool in tools_for(probe, user)
        if tool.runtime == "server"
        and (
            tool.module.startswith(ADMIN_TOOLS_MODULE)
            or not tool.module.startswith(CHAT_STATE_MODULES)
        )
    ]


def input_digest(name: str, arguments: dict[str, Any]) -> str:
    text = json.dumps([name, arguments], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def call_tool(*, token: McpToken, version, tool: Tool, arguments: dict[str, Any]) -> CallOutcome:
    """Run (or find the earlier run of) one client call; see the module's docstring.
    ``tool`` is one of ``mcp_tools(token.user, version)``."""
    digest = input_digest(tool.name, arguments)
    earlier = undelivered_call(token, tool.name, digest)
    if earlier is not None:
        outcome = call_outcome(earlier, wait=True)
        if outcome.status != Status.REFUSED:
            return outcome
        # Never answered and no longer pending (a cancelled run): a new call.
        McpCall.objects.filter(pk=earlier.pk).update(delivered_at=timezone.now())
    problem = tool.validate(arguments)
    if problem:
        return CallOutcome(
            Status.DONE, {"ok": False, "error": "invalid_input", "message": problem}, False
        )
    if usage.daily_limit_reached():
        return CallOutcome(
            Status.REFUSED,
            code="ahentic_daily_token_limit",
            message="The site's daily token limit is reached; try again tomorrow.",
        )
    call = call_begin(token=token, version=version, tool=tool, arguments=arguments, digest=digest)
    return call_outcome(call, wait=True)


def undelivered_call(token: McpToken, tool_name: str, digest: str) -> McpCall | None:
    """The token's newest call of the same tool and arguments whose answer the client has not
    received yet (it waits, runs, or has its result ready). Read from the write database: the
    call may have been made a moment ago."""
    return (
        db.primary(McpCall)
        .filter(token=token, tool_name=tool_name, input_digest=digest, delivered_at__isnull=True)
        .select_related("session")
        .order_by("-created_at")
        .first()
    )


def call_begin(
    *, token: McpToken, version, tool: Tool, arguments: dict[str, Any], digest: str
) -> McpCall:
    """Begin the call's run in an idle MCP chat of the token today (or a new one), and
    enqueue its step (once the block commits).

    Under the token row's lock: identical calls that arrive together (same token, tool and
    arguments) queue here, and all but the first find the call the first began, so they make
    one call, one approval card and one run. The block writes rows only (no model call, no
    tool, no network); other calls of the same token wait for it, not for the call's run."""
    with db.atomic(McpCall):
        list(db.primary(McpToken).select_for_update().filter(pk=token.pk).values_list("pk"))
        begun = undelivered_call(token, tool.name, digest)
        if begun is not None:
            return begun
        return _call_begin(
            token=token, version=version, tool=tool, arguments=arguments, digest=digest
        )


def _call_begin(
    *, token: McpToken, version, tool: Tool, arguments: dict[str, Any], digest: str
) -> McpCall:
    user = token.user
    call_id = f"{MCP_CALL_PREFIX}{uuid.uuid4().hex[:24]}"
    today = timezone.localdate()
    since = timezone.make_aware(datetime.combine(today, day_time.min))
    used = list(
        Session.objects.filter(
            owner=user,
            mcp_calls__token=token,
            mcp_calls__created_at__gte=since,
            agent_version=version,
            deleted_at__isnull=True,  # a chat the user deleted takes no new call
        )
        .distinct()
        .order_by("created_at")
    )
    candidates = [s for s in used if s.status in Session.ACCEPTS_MESSAGE]
    while True:
        session = candidates.pop(0) if candidates else None
        if session is None:
            number = f" ({len(used) + 1})" if used else ""
            session = session_services.session_create(
                owner=user,
                title=f"MCP: {token.name} {today.isoformat()}{number}",
                mode=Session.Mode.AGENT,
                agent_version=version,
            )
            used.append(session)
        summary = decisions.tool_summary(tool, session, call_id, arguments)
        with db.atomic():
            run_seq = runstate.run_begin(
                session_id=session.pk,
                from_statuses=list(Session.ACCEPTS_MESSAGE),
                label=summary,
                browser_available=False,  # an MCP client's call: no browser serves it
                pending_tool=PendingTool(
                    name=tool.name,
                    call_id=call_id,
                    input=arguments,
                    summary=summary,
                    label=tool.human_label,
                    runtime=tool.runtime,
                ).to_json(),
            )
            if run_seq is None:  # taken meanwhile by another call: the next chat
                continue
            session_services.events_append(
                session_id=session.pk,
                items=[
                    {
                        "kind": Event.Kind.USER_MESSAGE,
                        "content": f"MCP client {token.name!r} called {tool.name}.",
                        "payload": {"meta": {MCP_META: token.name}},
                    },
                    {
                        "kind": Event.Kind.TOOL_CALL,
                        "content": result_text(arguments),
                        "payload": {"tool": tool.name, "input": arguments, "source": "mcp"},
                        "tool_use_id": call_id,
                    },
                ],
            )
            session_services.trace_record(
                session_id=session.pk,
                type="run_start",
                summary=f"MCP call {tool.name}",
                data={"mcp_token": token.prefix, "tool": tool.name, "call_id": call_id},
                step=0,
            )
            call = McpCall.objects.create(
                token=token,
                session=session,
                call_id=call_id,
                tool_name=tool.name,
                input_digest=digest,
            )
            enqueue_step(session.pk, run_seq)
        call.session = session
        return call


def call_outcome(call: McpCall, *, wait: bool) -> CallOutcome:
    """Where ``call`` stands; with ``wait``, waiting up to ``MCP_CALL_WAIT_S`` for its answer
    while it runs. An answer is marked delivered (a later identical call runs anew)."""
    deadline = time.monotonic() + float(ahentic_settings.MCP_CALL_WAIT_S or 0)
    while True:
        response = (
            Event.objects.filter(
                session_id=call.session_id,
                kind=Event.Kind.TOOL_RESPONSE,
                tool_use_id=call.call_id,
            )
            .only("content", "payload")
            .first()
        )
        session = Session.objects.filter(pk=call.session_id).first()
        if session is None:  # the user deleted the chat meanwhile
            return CallOutcome(
                Status.REFUSED, code="ahentic_call_not_run", message="The call's chat is gone."
            )
        if response is not None:
            McpCall.objects.filter(pk=call.pk, delivered_at__isnull=True).update(
                delivered_at=timezone.now()
            )
            try:
                result = json.loads(response.content)
            except ValueError:
                result = response.content
            return CallOutcome(
                Status.DONE, result, bool(response.payload.get("ok")), session=session
            )
        pending = PendingTool.from_json(session.pending_tool)
        waiting_here = pending is not None and pending.call_id == call.call_id
        if session.status == Session.Status.AWAITING_HUMAN and waiting_here:
            return CallOutcome(Status.AWAITING_APPROVAL, session=session, call=call)
        if session.status != Session.Status.RUNNING:
            return CallOutcome(
                Status.REFUSED,
                session=session,
                code="ahentic_call_not_run",
                message="The call was not run (its chat was cancelled or failed).",
            )
        if not wait or time.monotonic() >= deadline:
            return CallOutcome(Status.RUNNING, session=session)
        time.sleep(POLL_S)


def approval_state(call: McpCall) -> str:
    """The opaque ``requestState`` of an approval asked in the client: names ``call``, signed
    (with the site's ``SECRET_KEY``) so a client cannot point its answer at another call."""
    return signing.dumps({"call": call.call_id}, salt=STATE_SALT, compress=False)


def call_for_state(
    *, token: McpToken, tool_name: str, arguments: dict[str, Any], state: Any
) -> McpCall | None:
    """The call ``state`` names, if it is a call of ``token`` with this tool and these
    arguments (the retry repeats the call it answers); None for a forged, foreign or stale
    state. Read from the write database."""
    if not isinstance(state, str):
        return None
    try:
        data = signing.loads(state, salt=STATE_SALT)
    except signing.BadSignature:
        return None
    call_id = data.get("call") if isinstance(data, dict) else None
    if not isinstance(call_id, str):
        return None
    return (
        db.primary(McpCall)
        .filter(
            call_id=call_id,
            token=token,
            tool_name=tool_name,
            input_digest=input_digest(tool_name, arguments),
        )
        .select_related("session")
        .first()
    )


def approval_answer(*, call: McpCall, decision: str | None) -> CallOutcome:
    """Record the client's answer on ``call`` (``allow_once``, ``deny``, or None: no answer)
    through the card's decision pipeline, then where the call stands (waiting up to
    ``MCP_CALL_WAIT_S`` for its result). An answer that comes after another decision records
    nothing: the outcome carries ``extra["already_decided"]``."""
    already_decided = False
    if decision is not None:
        assert decision in CLIENT_DECISIONS
        session = db.primary(Session).filter(pk=call.session_id).first()
        if session is None:
            return CallOutcome(
                Status.REFUSED, code="ahentic_call_not_run", message="The call's chat is gone."
            )
        try:
            decisions.approval_decide(session=session, decision=decision, call_id=call.call_id)
        except AhenticError as exc:
            if exc.code not in ("ahentic_not_awaiting", "ahentic_no_pending"):
                return CallOutcome(
                    Status.REFUSED, session=session, code=exc.code, message=exc.detail
                )
            already_decided = True
    outcome = call_outcome(call, wait=decision is not None)
    if already_decided:
        outcome.extra["already_decided"] = True
    return outcome
