"""The tool pipeline: the one place a tool call is checked, paused or executed.

Order: availability, Ask mode, permission, schema validation (``check_call``, which suggested
actions reuse), approval (HITL), browser runtime, execution with the tool's timeout, the
tool_response event. Every failure is a tool result with ``ok: false`` the model can read;
nothing here raises to the API.

The pipeline runs in a worker holding a ``Lease``; every write it makes is conditional on that
lease (``sessions_app.runstate``), so a cancelled or taken-over run writes nothing new. While a
tool executes, a heartbeat thread keeps the lease fresh (``LeaseHeartbeat``).
"""

from __future__ import annotations

import json
import logging
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.db import connections
from django.db.models import F
from django.utils import timezone

from artifacts_app import store
from sessions_app import agents, db, runstate
from sessions_app import attachments as attachment_store
from sessions_app import services as session_services
from sessions_app.conf import ahentic_settings
from sessions_app.errors import ModelFacingError
from sessions_app.models import Event, Session
from sessions_app.runstate import Lease, PendingTool
from sessions_app.services import TraceBuffer

from .. import llm, telemetry
from ..control import plan as plan_rules
from ..control.toolcalls import result_text, tool_response_record
from ..ledger import usage
from ..models import ToolGrant
from ..signals import approval_requested, send_after_commit, tool_executed
from ..tools import UNAVAILABLE, Tool, ToolContext, ToolError, get_tool, refusal

__all__ = ["Outcome", "check_call", "get_tool", "process_call", "progress"]

log = logging.getLogger("ahentic")


@dataclass
class Outcome:
    kind: str  # answered | paused | stop | lost
    reply: str = ""


class ToolTimeout(Exception):
    pass


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise ToolTimeout in the worker's main thread after ``seconds``.

    django-q2 runs each task in the main thread of a worker process, so SIGALRM is available
    there; elsewhere (a thread) the limit is not enforced and the lease deadline still heals.
    """
    if threading.current_thread() is not threading.main_thread() or not hasattr(
        signal, "setitimer"
    ):
        yield
        return
    # django-q2 may have armed SIGALRM for the task's own timeout: never cancel it. If it fires
    # first, leave it alone; otherwise re-arm it with what is left when the tool returns.
    outer_remaining, _ = signal.getitimer(signal.ITIMER_REAL)
    if outer_remaining and outer_remaining <= seconds:
        yield
        return

    def expire(signum, frame):
        raise ToolTimeout()

    started = time.monotonic()
    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer_remaining:
            left = outer_remaining - (time.monotonic() - started)
            signal.setitimer(signal.ITIMER_REAL, max(left, 0.001))


class LeaseHeartbeat:
    """The lease heartbeat: a thread keeps the run's lease fresh while a tool executes.

    A tool call cannot refresh the lease itself, and a lease stretched by the tool's whole time
    limit made a dead worker invisible for ``RUN_LEASE_S`` + ``TOOL_TIMEOUT_S``. Instead the
    lease stays ``RUN_LEASE_S`` long and this thread refreshes it every third of that, so a
    worker that dies mid-tool is noticed within about ``RUN_LEASE_S`` (then ``POST continue``
    or the recover sweep takes the run over and heals the call).

    The thread stops when the tool returns (the ``with`` block joins it, so it never writes
    after), at the first refresh that finds the lease lost (a cancel, a takeover: it never
    writes again), and once the tool overran its own time limit (a tool the timer cannot stop
    must not hold the run forever)."""

    def __init__(self, lease: Lease, *, limit_s: float):
        self.lease = lease
        self.limit_s = limit_s
        self.interval_s = max(float(ahentic_settings.RUN_LEASE_S) / 3, 0.05)
        self.beats = 0
        self.lost = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ahentic-heartbeat", daemon=True)

    def __enter__(self) -> LeaseHeartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        deadline = time.monotonic() + self.limit_s
        used_connection = False
        try:
            while not self._stop.wait(self.interval_s):
                if time.monotonic() > deadline:
                    return
                used_connection = True
                try:
                    refreshed = runstate.lease_refresh(self.lease)
                except Exception:  # a locked database: try again at the next beat
                    log.warning("ahentic heartbeat could not refresh %s", self.lease, exc_info=True)
                    continue
                if not refreshed:
                    self.lost = True
                    return
                self.beats += 1
        finally:
            if used_connection:
                connections[db.write_alias()].close()  # this thread's own connection


def failure(code: str, message: str, hint: str | None = None) -> dict[str, Any]:
    return ToolError(code, message, hint).as_result()


def unchanged_result(summary: str) -> dict[str, Any]:
    """The result of a write whose preview found nothing to change (``Summary.unchanged``)."""
    return {
        "ok": True,
        "changed": False,
        "message": "Nothing changed: the values given are the current ones, so nothing was "
        "saved and the user was not asked.",
        "summary": str(summary),
    }


def progress(lease: Lease, tracer: TraceBuffer, label: str) -> bool:
    """The progress label the user sees (also a heartbeat that extends the lease), traced.
    False once the lease is lost."""
    if not runstate.progress_set(lease, label):
        return False
    tracer.add("progress", label, label=label)
    return True


def load_session(lease: Lease, *, queued: bool = False) -> Session:
    """The step's session with its owner; with ``queued``, also whether messages wait in the
    queue (``has_queued``), the site's tokens today (``daily_tokens``) and the slug of its
    agent (``agent_slug``, for telemetry), read in the same query."""
    if not queued:
        return runstate.session_load(lease.session_id)
    return runstate.session_load(
        lease.session_id,
        queued=True,
        annotations={
            **usage.daily_tokens_annotation(),
            "agent_slug": F("agent_version__agent__slug"),
        },
    )


def answer(
    lease: Lease,
    tracer: TraceBuffer,
    call: Event,
    result: Any,
    ok: bool,
    *,
    clear_pending: bool,
    advance_plan: bool = False,
    executed: bool = False,
    **meta: Any,
) -> Outcome:
    """Record the tool_result and what follows from it in one transaction (one visible change):
    the call's approval card is done, the plan advances after a successful write, and the
    model thinks next. ``executed``: the tool ran (``tool_executed`` is sent once recorded)."""
    with db.atomic():
        plan = (
            db.primary(Session).values_list("plan", flat=True).get(pk=lease.session_id)
            if advance_plan
            else None
        )
        answered = {
            "clear_pending": clear_pending,
            "plan": plan_rules.advance(plan) if plan else None,
        }
        record = {"session_id": lease.session_id, "call": call, "result": result, "ok": ok}
        # The answer and its effects on the row in one UPDATE while the lease holds; else (a
        # cancel, or a result already recorded) the answer is still kept, as the call ran.
        recorded = tool_response_record(
            **record, meta=meta, lease=lease, session_fields=runstate.answered_fields(**answered)
        )
        if recorded is None:
            recorded = tool_response_record(**record, meta=meta)
            runstate.call_answered(lease, **answered)
        if executed and recorded is not None:  # None: already answered (a repeated result)
            send_after_commit(
                tool_executed,
                lease.session_id,
                run=lease.run_seq,
                tool=call.payload.get("tool", ""),
                tool_use_id=call.tool_use_id,
                is_error=not ok,
            )
    telemetry.tool_result(result, ok)
    excerpt = result_text(result)[:240]
    tracer.add(
        "tool_result",
        f"{call.payload.get('tool')}: {'ok' if ok else (result or {}).get('error', 'error')}",
        tool=call.payload.get("tool"),
        ok=ok,
        excerpt=excerpt,
        call_id=call.tool_use_id,
    )
    return Outcome("answered")


def is_preallowed(tool: Tool, session: Session, tool_input: dict[str, Any]) -> bool:
    """The session's allow list or the owner's ToolGrant names this call's grant key (the
    tool, or what its ``grant_scope`` narrows it to, such as one admin model)."""
    key = tool.grant_key(tool_input)
    if key is None:
        return False
    if key in (session.hitl_allows or []):
        return True
    return ToolGrant.objects.filter(user_id=session.owner_id, tool_name=key).exists()


def tool_context(lease: Lease, session: Session, call: Event) -> ToolContext:
    return ToolContext(
        session=session,
        user=session.owner,
        call_id=call.tool_use_id,
        run=lease.run_seq,
        step=session.step_count,
    )


STAGE_ARTIFACT = "stage_artifact"


def note_content_work(lease: Lease, tracer: TraceBuffer, session: Session) -> None:
    """The content-work rule (docs/concepts/decisions.md): a run that stages an artifact larger than
    ``AUTO_STAGE_BYTES``, with ``stage_artifact`` (appended chunks count together) or by
    auto-staging a long body given to a tool's artifact field, is content work from its next
    step on: the raised step cap and output budget apply until the run ends."""
    limit = int(ahentic_settings.AUTO_STAGE_BYTES)
    if not session.content_work and store.run_staged_over(session.pk, lease.run_seq, limit):
        if runstate.content_work_set(lease):
            session.content_work = True
            tracer.add("content_work", "Content work: raised step cap and output budget")


def check_call(
    session: Session,
    name: str,
    tool_input: Any,
    settings: agents.AgentSettings | None = None,
) -> tuple[Tool | None, dict[str, Any] | None]:
    """The checks before approval, in order: availability (the registry, then ``tools.refusal``:
    the agent's tools, the session's grant, a browser for a browser tool, the user's
    permission), Ask mode, the input schema. Returns the tool and None, or the tool
    (None when unknown) and the failure result. ``settings``: the session's agent's settings
    when the caller holds them."""
    tool = get_tool(name)
    if tool is None:
        message = f"There is no tool named {name!r} in this session."
        return None, failure("ability_unavailable", message)
    # The agent's tools, the session's grant, a browser, the user's permission: the policy
    # that also decides what the model is offered (``tools.refusal``, read by ``tools_for``).
    refused = refusal(session, tool, settings=settings)
    if refused is not None:
        return (None if refused.code == UNAVAILABLE else tool), refused.as_result()
    if session.mode == Session.Mode.ASK and not tool.readonly:
        return tool, failure(
            "ability_ask_readonly",
            f"{name} changes things and the session is in Ask mode (read-only tools only).",
            hint="Describe what you would do, or ask the user to switch to Agent mode.",
        )
    problem = tool.validate(tool_input)
    if problem:
        return tool, failure("invalid_input", problem)
    return tool, None


def process_call(lease: Lease, tracer: TraceBuffer, session: Session, call: Event) -> Outcome:
    """Check, pause or run one tool call, in its ``execute_tool`` span. ``session`` is the
    step's (read when it started; the step is the only writer of what the checks read while it
    runs, and every write below is conditional on the lease, so a cancel meanwhile makes them
    write nothing)."""
    with telemetry.tool_span(
        call.payload.get("tool", ""), call.tool_use_id, lambda: call.payload.get("input") or {}
    ):
        return handle_call(lease, tracer, session, call)


def handle_call(lease: Lease, tracer: TraceBuffer, session: Session, call: Event) -> Outcome:
    name = call.payload.get("tool", "")
    pending = PendingTool.from_json(session.pending_tool)
    if pending is not None and pending.call_id != call.tool_use_id:
        pending = None
    # Resume from what was paused (auto-staged and key-only), or the user's edit of it.
    tool_input = pending.effective_input() if pending else (call.payload.get("input") or {})
    settings = agents.settings_for(session)
    tool, problem = check_call(session, name, tool_input, settings)
    if tool is None:
        runstate.capability_request_add(
            session_id=session.pk, ability=name, reason="unknown tool called"
        )
    # However the call ends (executed or refused), its approval card is then done.
    clear_pending = pending is not None
    if problem:
        telemetry.tool_decision("refused")
        return answer(lease, tracer, call, problem, False, clear_pending=clear_pending)
    assert tool is not None

    artifact = None
    if tool.artifact_field:
        tool_input = store.auto_stage(
            session.pk,
            tool_input,
            tool.artifact_field,
            tool.artifact_kinds,
            step=session.step_count,
            run=lease.run_seq,
        )
        note_content_work(lease, tracer, session)
        if store.FROM_MEMORY in tool_input:
            try:
                artifact = store.check_ready(
                    session.pk, tool_input[store.FROM_MEMORY], tool.artifact_kinds
                )
            except ModelFacingError as exc:
                return answer(
                    lease, tracer, call, exc.as_result(), False, clear_pending=clear_pending
                )

    # What the user sees of this call, computed as the user; a tool's preview may refuse the
    # call here (permission, validation), before any card. Run again after an approval: the
    # tool then checks the world as it is now.
    try:
        summary = tool.describe(tool_context(lease, session, call), tool_input)
    except ModelFacingError as exc:
        return answer(lease, tracer, call, exc.as_result(), False, clear_pending=clear_pending)

    if getattr(summary, "nothing_changed", False):
        # A save of what is already there: nothing to approve and nothing to run. The model
        # reads that nothing changed (``unchanged_result``), the user sees no card.
        result = unchanged_result(summary)
        return answer(
            lease, tracer, call, result, True, clear_pending=clear_pending, unchanged=True
        )

    approved = pending.approved if pending else None
    policy = settings.APPROVAL.get(tool.name)
    # The agent's approval policy: "always_ask" asks even where the tool or a grant would not;
    # "always_allow" pre-allows a tool that may be pre-allowed at all (never admin_delete or
    # admin_action, which ask every time).
    asks = policy == "always_ask" or tool.needs_approval(tool_input)
    if asks and not approved:
        if policy == "always_allow" and not tool.non_preallowable:
            approved = "preallowed"
        elif policy != "always_ask" and is_preallowed(tool, session, tool_input):
            approved = "preallowed"
        else:
            telemetry.tool_decision("awaiting_approval")
            return pause(
                lease,
                tracer,
                call,
                tool,
                tool_input,
                Session.Status.AWAITING_HUMAN,
                summary=summary,
                artifact=artifact,
                always_ask=policy == "always_ask",
            )
    telemetry.tool_decision(str(approved or "not_required"))
    if tool.runtime == "browser":
        return pause(
            lease,
            tracer,
            call,
            tool,
            tool_input,
            Session.Status.AWAITING_BROWSER,
            summary=summary,
            approved=approved,
            artifact=artifact,
        )
    return execute(
        lease,
        tracer,
        session,
        call,
        tool,
        tool_input,
        summary=summary,
        approved=approved,
        clear_pending=clear_pending,
    )


def pause(
    lease: Lease,
    tracer: TraceBuffer,
    call: Event,
    tool: Tool,
    tool_input: dict[str, Any],
    status: str,
    summary: str,
    approved: str | None = None,
    artifact=None,
    always_ask: bool = False,
) -> Outcome:
    """Pause for the user or the browser. The stored input keeps ``from_memory`` as a key."""
    changes = getattr(summary, "changes", None) or None  # a preview's diff (tools.Summary)
    if artifact is not None:
        summary = " · ".join(p for p in (summary, artifact.title, f"{artifact.bytes} bytes") if p)
    pending = PendingTool(
        name=tool.name,
        call_id=call.tool_use_id,
        input=tool_input,
        summary=summary,
        label=tool.human_label,
        runtime=tool.runtime,
        approved=approved,
        # Per call: a tool's grant scope may refuse pre-allowing some inputs (auth.user...).
        # and so does the agent's "always_ask" policy for the tool.
        non_preallowable=always_ask or tool.grant_key(tool_input) is None,
        paused_at=timezone.now().isoformat(),
        artifact_key=artifact.key if artifact is not None else None,
        trace=telemetry.run_origin(),
        # Pointer fields only: storage never holds any of the body (the card's excerpt is
        # added when the payload is read).
        memory=store.pointer_json(artifact) if artifact is not None else None,
        changes=changes,
    )
    if status == Session.Status.AWAITING_HUMAN:
        label = f"Waiting for your approval: {summary}"
    else:
        label = f"Running in your browser: {summary}"
    if not runstate.run_pause(lease, status=status, pending=pending, label=label):
        return Outcome("lost")
    if status == Session.Status.AWAITING_HUMAN:
        telemetry.approval_requested(tool.name, call.tool_use_id)
        send_after_commit(
            approval_requested,
            lease.session_id,
            run=lease.run_seq,
            tool=tool.name,
            tool_use_id=call.tool_use_id,
        )
    kind = "hitl_pause" if status == Session.Status.AWAITING_HUMAN else "browser_pause"
    tracer.add(kind, label, tool=tool.name, call_id=call.tool_use_id)
    return Outcome("paused")


def start_tool(lease: Lease, tracer: TraceBuffer, call: Event, tool: Tool, summary: str) -> bool:
    """The last check before the tool starts, and the record that it did (a crash is then
    healed as "outcome unknown", never re-run). One transaction: the progress label the user
    sees (an internal tool's: the lease only) is written conditional on the lease, which holds
    the session row's lock until the commit, and the call is marked started. A cancel takes the
    same lock, so it comes either first (False: the tool never starts; the cancel answered the
    call) or after (it finds the call started and leaves it to record its real result). False
    too when the run was taken over. The heartbeat thread keeps the lease while the tool runs."""
    with db.atomic():
        if tool.internal:
            held = runstate.lease_refresh(lease)
        else:
            held = progress(lease, tracer, summary[:1].upper() + summary[1:])
        if held:
            session_services.event_payload_merge(
                event=call, started={"lease": lease.token, "at": timezone.now().isoformat()}
            )
    return held


def execute(
    lease: Lease,
    tracer: TraceBuffer,
    session: Session,
    call: Event,
    tool: Tool,
    tool_input: dict[str, Any],
    summary: str,
    approved: str | None,
    clear_pending: bool,
) -> Outcome:
    timeout = float(tool.timeout or ahentic_settings.TOOL_TIMEOUT_S)
    artifact_key = None
    if tool.artifact_field and store.FROM_MEMORY in tool_input:
        try:
            tool_input, artifact_key = store.apply_from_memory(
                lease.session_id, tool_input, tool.artifact_field, tool.artifact_kinds
            )
        except ModelFacingError as exc:
            return answer(lease, tracer, call, exc.as_result(), False, clear_pending=clear_pending)
        problem = tool.validate(tool_input, strict=True)
        if problem:
            return answer(
                lease,
                tracer,
                call,
                failure("invalid_input", problem),
                False,
                clear_pending=clear_pending,
                artifactKey=artifact_key,
            )
    if not start_tool(lease, tracer, call, tool, summary):
        return Outcome("lost")
    tracer.add(
        "tool_executed", summary, tool=tool.name, call_id=call.tool_use_id, approved=approved
    )
    ctx = tool_context(lease, session, call)
    ok = True
    images: list[dict[str, Any]] = []
    try:
        # The heartbeat keeps the (short) lease fresh while the tool runs.
        with LeaseHeartbeat(lease, limit_s=timeout), time_limit(timeout):
            result = tool.func(ctx, tool_input)
        if not isinstance(result, dict):
            result = {"value": result}
        result, images = attachment_store.tool_images(session_id=lease.session_id, result=result)
        json.dumps(result, default=str)
        result = llm.strip_nul(result)
        ok = result.get("ok", True) is not False
    except ModelFacingError as exc:
        result, ok = exc.as_result(), False
    except ToolTimeout:
        result, ok = (
            failure("tool_timeout", f"{tool.name} did not finish within {timeout:g} s."),
            False,
        )
    except Exception as exc:  # a broken tool is the model's problem to route around, not a crash
        result, ok = (
            failure("tool_exception", f"{tool.name} failed: {exc.__class__.__name__}: {exc}"),
            False,
        )
    meta: dict[str, Any] = {}
    if approved:
        meta["approved"] = approved
    if images and ok:
        meta["attachments"] = images
    if artifact_key:
        meta["artifactKey"] = artifact_key
    outcome = answer(
        lease,
        tracer,
        call,
        result,
        ok,
        clear_pending=clear_pending,
        advance_plan=ok and not tool.readonly,
        executed=True,
        **meta,
    )
    if ok and tool.name == STAGE_ARTIFACT:
        note_content_work(lease, tracer, session)
    if ok and artifact_key:
        store.mark_applied(lease.session_id, artifact_key)
    if ctx.stop:
        return Outcome("stop", ctx.stop[1])
    return outcome
