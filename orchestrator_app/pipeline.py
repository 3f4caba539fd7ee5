"""The tool pipeline: the one place a tool call is checked, paused or executed.

Order: availability, Ask mode, permission, schema validation, approval (HITL), browser runtime,
execution with the tool's timeout, the tool_response event. Every failure is a tool result with
``ok: false`` the model can read; nothing here raises to the API.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.db.models import F
from django.utils import timezone

from artifacts_app import store
from sessions_app import services as session_services
from sessions_app.conf import ahentic_settings
from sessions_app.models import Event, Session

from . import plan as plan_rules
from . import services
from .models import ToolGrant
from .tools import Tool, ToolContext, ToolError, get_tool

if TYPE_CHECKING:
    from .step import StepRunner

__all__ = ["Outcome", "get_tool", "process_call"]


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


def failure(code: str, message: str, hint: str | None = None) -> dict[str, Any]:
    return ToolError(code, message, hint).as_result()


def answer(runner: StepRunner, call: Event, result: Any, ok: bool, **meta: Any) -> Outcome:
    services.tool_response_record(
        session_id=runner.session_id, call=call, result=result, ok=ok, meta=meta
    )
    # However the call ends (executed or refused), its approval card is done.
    runner.holding().filter(pending_tool__call_id=call.tool_use_id).update(
        pending_tool=None, version=F("version") + 1
    )
    excerpt = services.result_text(result)[:240]
    runner.trace(
        "tool_result",
        f"{call.payload.get('tool')}: {'ok' if ok else (result or {}).get('error', 'error')}",
        tool=call.payload.get("tool"),
        ok=ok,
        excerpt=excerpt,
        call_id=call.tool_use_id,
    )
    return Outcome("answered")


def is_preallowed(tool: Tool, session: Session) -> bool:
    if tool.non_preallowable:
        return False
    if tool.name in (session.hitl_allows or []):
        return True
    return ToolGrant.objects.filter(user_id=session.owner_id, tool_name=tool.name).exists()


def process_call(runner: StepRunner, call: Event) -> Outcome:
    if not runner.refresh_lease():  # cancelled before this tool: nothing new starts
        return Outcome("lost")
    session = runner.reload()
    user = session.owner
    name = call.payload.get("tool", "")
    tool_input = call.payload.get("input") or {}
    tool = get_tool(name)
    if tool is None or (session.granted_tools is not None and name not in session.granted_tools):
        services.capability_request_add(
            session_id=session.pk, ability=name, reason="unknown tool called"
        )
        return answer(
            runner,
            call,
            failure("ability_unavailable", f"There is no tool named {name!r} in this session."),
            False,
        )
    if session.mode == Session.Mode.ASK and not tool.readonly:
        return answer(
            runner,
            call,
            failure(
                "ability_ask_readonly",
                f"{name} changes things and the session is in Ask mode (read-only tools only).",
                hint="Describe what you would do, or ask the user to switch to Agent mode.",
            ),
            False,
        )
    if not tool.allowed_for(user):
        return answer(
            runner, call, failure("ability_forbidden", f"The user may not use {name}."), False
        )

    pending = (
        session.pending_tool
        if (session.pending_tool or {}).get("call_id") == call.tool_use_id
        else None
    )
    if pending:
        # Resume from what was paused (auto-staged and key-only), or the user's edit of it.
        edited = pending.get("edited_input")
        tool_input = edited if edited is not None else pending.get("input", tool_input)
    problem = tool.validate(tool_input)
    if problem:
        return answer(runner, call, failure("invalid_input", problem), False)

    artifact = None
    if tool.artifact_field:
        tool_input = store.auto_stage(
            session.pk,
            tool_input,
            tool.artifact_field,
            tool.artifact_kinds,
            step=session.step_count,
            run=runner.run_seq,
        )
        if "from_memory" in tool_input:
            try:
                artifact = store.check_ready(
                    session.pk, tool_input["from_memory"], tool.artifact_kinds
                )
            except store.ArtifactError as exc:
                return answer(runner, call, artifact_failure(exc), False)

    approved = (pending or {}).get("approved")
    if tool.needs_approval(tool_input) and not approved:
        if is_preallowed(tool, session):
            approved = "preallowed"
        else:
            return pause(
                runner, call, tool, tool_input, Session.Status.AWAITING_HUMAN, artifact=artifact
            )
    if tool.runtime == "browser":
        return pause(
            runner,
            call,
            tool,
            tool_input,
            Session.Status.AWAITING_BROWSER,
            approved=approved,
            artifact=artifact,
        )
    return execute(runner, call, tool, tool_input, approved=approved)


def artifact_failure(exc: store.ArtifactError) -> dict[str, Any]:
    return ToolError(exc.code, exc.message, exc.hint, **exc.data).as_result()


def pause(
    runner: StepRunner,
    call: Event,
    tool: Tool,
    tool_input: dict[str, Any],
    status: str,
    approved: str | None = None,
    artifact=None,
) -> Outcome:
    """Pause for the user or the browser. The stored input keeps ``from_memory`` as a key."""
    now = timezone.now()
    summary = tool.summarize(tool_input)
    if artifact is not None:
        summary = " · ".join(p for p in (summary, artifact.title, f"{artifact.bytes} bytes") if p)
    pending = {
        "name": tool.name,
        "input": tool_input,
        "summary": summary,
        "call_id": call.tool_use_id,
        "runtime": tool.runtime,
        "approved": approved,
        "non_preallowable": tool.non_preallowable,
        "paused_at": now.isoformat(),
        "artifact_key": artifact.key if artifact is not None else None,
        # Pointer fields only: storage never holds any of the body (the card's excerpt is
        # added when the payload is read).
        "memory": store.pointer_json(artifact) if artifact is not None else None,
    }
    if status == Session.Status.AWAITING_HUMAN:
        label = f"Waiting for your approval: {summary}"
        extra: dict[str, Any] = {}
    else:
        label = f"Running in your browser: {summary}"
        extra = {"browser_paused_at": now}
    rows = runner.holding().update(
        status=status,
        pending_tool=pending,
        lease_token="",
        lease_expires_at=None,
        progress={"label": label, "updatedAt": now.isoformat()},
        version=F("version") + 1,
        updated_at=now,
        **extra,
    )
    if rows != 1:
        return Outcome("lost")
    kind = "hitl_pause" if status == Session.Status.AWAITING_HUMAN else "browser_pause"
    runner.trace(kind, label, tool=tool.name, call_id=call.tool_use_id)
    return Outcome("paused")


def mark_started(runner: StepRunner, call: Event) -> None:
    """Record that execution began, so a crash is healed as "outcome unknown", never re-run."""
    call.payload = session_services.event_payload_merge(
        event_id=call.pk, started={"lease": runner.token, "at": timezone.now().isoformat()}
    )


def execute(
    runner: StepRunner, call: Event, tool: Tool, tool_input: dict[str, Any], approved: str | None
) -> Outcome:
    timeout = float(tool.timeout or ahentic_settings.TOOL_TIMEOUT_S)
    session = runner.session
    if not runner.refresh_lease(extra_s=timeout):
        return Outcome("lost")
    artifact_key = None
    if tool.artifact_field and "from_memory" in tool_input:
        try:
            tool_input, artifact_key = store.apply_from_memory(
                runner.session_id, tool_input, tool.artifact_field, tool.artifact_kinds
            )
        except store.ArtifactError as exc:
            return answer(runner, call, artifact_failure(exc), False)
        problem = tool.validate(tool_input, strict=True)
        if problem:
            return answer(
                runner, call, failure("invalid_input", problem), False, artifactKey=artifact_key
            )
    mark_started(runner, call)
    summary = tool.summarize(tool_input)
    runner.trace(
        "tool_executed", summary, tool=tool.name, call_id=call.tool_use_id, approved=approved
    )
    if not tool.internal:
        services.progress_set(session_id=runner.session_id, label=summary[:1].upper() + summary[1:])
    ctx = ToolContext(
        session=session,
        user=session.owner,
        call_id=call.tool_use_id,
        run=runner.run_seq,
        step=session.step_count,
    )
    ok = True
    try:
        with time_limit(timeout):
            result = tool.func(ctx, tool_input)
        if not isinstance(result, dict):
            result = {"value": result}
        json.dumps(result, default=str)
        ok = result.get("ok", True) is not False
    except ToolError as exc:
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
    if artifact_key:
        meta["artifactKey"] = artifact_key
    outcome = answer(runner, call, result, ok, **meta)
    if ok and artifact_key:
        store.mark_applied(runner.session_id, artifact_key)
    if ok and not tool.readonly:
        session = runner.reload()
        if session.plan:
            session_services.session_update(
                session_id=runner.session_id, plan=plan_rules.advance(session.plan)
            )
    if ctx.stop:
        return Outcome("stop", ctx.stop[1])
    return outcome
