"""One step of a run: claim, heal, promote, call the model, persist, run the tools.

A step holds a ``Lease`` on its session, refreshed while the model streams and between tools;
every write it makes afterwards goes through the run-state writers with that lease, so a cancel
or a recovered duplicate makes it stop quietly. No transaction or row lock is held across the
model call or a tool.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from sessions_app import agents, db, runstate, window
from sessions_app import services as session_services
from sessions_app.models import Event, EventRow, PendingMessage, Session
from sessions_app.runstate import Lease

from .. import llm, telemetry
from ..control import brain, runs
from ..control import plan as plan_rules
from ..control.queue import enqueue_memory, enqueue_naming, enqueue_step
from ..control.toolcalls import (
    MCP_META,
    answer_unanswered,
    is_mcp_call,
    result_text,
    tool_response_record,
)
from ..ledger import usage
from ..signals import run_failed, run_finished, send_after_commit
from ..tools import tools_for
from . import context, files, pipeline, prompt

log = logging.getLogger("ahentic")

# stop_reason values that end the run with the assistant's reply.
FINISH_REASONS = ("end_turn", "stop_sequence")
MAX_TOKENS_NUDGE = "Your previous reply hit the output limit. Continue exactly where it stopped."


# The session fields a step's prediction reads (its request's system prompt, tools and step
# context) that the step's own writes and tools may have changed.
PREDICTION_FIELDS = (
    "status",
    "mode",
    "plan",
    "page_context",
    "prompt",
    "active_skills",
    "active_workflow",
    "context_usage",
    "viewport_start_event_id",
    # What the kept window is checked against (``sessions_app.window``), and the version the
    # goals and pointers are kept by (``prompt.kept_per_version``).
    "version",
    "last_seq",
    "edit_version",
)


class StepRunner:
    def __init__(self, lease: Lease):
        self.lease = lease
        self.session_id = lease.session_id
        self.run_seq = lease.run_seq
        self.session: Session = pipeline.load_session(lease, queued=True)
        # The agent's settings, resolved once and handed to what the step asks (a session
        # keeps its agent version for good); the site's other settings are read through them.
        self.settings = agents.settings_for(self.session)
        runstate.lease_seen(lease, self.session)
        # The version the step read the session's goals and artifact pointers at.
        self.loaded_version = self.session.version
        # The step's trace records, written together (see TraceBuffer).
        self.tracer = session_services.TraceBuffer(lease.session_id, lease.run_seq)
        # The request the step sent (its parts and buckets) and the calibration its model
        # call gave, for contextUsage.
        self.sent: context.Assembly | None = None
        self.sent_buckets: dict[str, int] = {}
        self.calibration: float | None = None
        # Whether the step handed the run to a next step (see record_next_usage).
        self.continues = False
        # The streamed reply's live text, and when the lease was last refreshed (on_stream).
        self.live_text = ""
        self.refreshed_at = time.monotonic()
        self.lost_lease = False  # found lost outside the model stream (``keep_lease``)
        self.step_number = self.session.step_count
        # The agent's slug, read with the session (telemetry's span names and metrics).
        self.agent = getattr(self.session, "agent_slug", None) or "default"
        # The window's events as read at the step's start (``window``), until the step writes
        # an event before its request (a healed call, a promoted message).
        self.window_read: list[EventRow] | None = None
        # The session's newest seq as loaded, until the step appends (then unknown: None).
        self.last_seq: int | None = self.session.last_seq
        # The step context stored with the turn this step's request answers (``assemble``).
        self.notes: list[EventRow] = []

    def window(self) -> list[EventRow]:
        """The events from the window's start on, by seq: one read serves the open-call check
        and the request, unless an event was written in between. Only what changed since this
        process last read the window is read (``sessions_app.window``)."""
        if self.window_read is None:
            self.window_read = window.windows.rows(
                self.session_id,
                edit_version=self.session.edit_version,
                last_seq=self.last_seq,
                from_id=self.session.viewport_start_event_id,
            )
        return self.window_read

    def appended(self) -> None:
        """The step wrote events before its request: the window is read again (what is new)."""
        self.window_read = None
        self.last_seq = None

    def reload(self) -> Session:
        self.session = pipeline.load_session(self.lease)
        return self.session

    def trace(self, type: str, summary: str = "", **data: Any) -> None:
        self.tracer.add(type, summary, **data)

    # --- run endings ---------------------------------------------------------------------

    def end(
        self, to_status: str, *, plan_outcome: str | None, trace_reason: str, **fields: Any
    ) -> bool:
        """Leave ``running`` (conditional on the lease) and drop the lease."""
        session = self.reload()
        plan = plan_rules.settle(session.plan, plan_outcome) if plan_outcome else session.plan
        ended = runstate.run_end(self.lease, to_status=to_status, plan=plan, **fields)
        if ended:
            self.announce_end(to_status, fields)
            self.trace(
                "run_idle",
                f"Run ended: {trace_reason}",
                reason=trace_reason,
                code=fields.get("last_error_code", ""),
            )
            # What follows (a queued message's run, the parent's wake-up) traces too.
            self.tracer.flush()
            if to_status == Session.Status.IDLE:
                runs.wake_for_pending(self.session_id)
        return ended

    def announce_end(self, to_status: str, fields: dict[str, Any]) -> None:
        """The run came to rest (``end`` won): ``run_failed`` for an error, then
        ``run_finished``, each sent once its write commits."""
        code = fields.get("last_error_code", "") if to_status == Session.Status.ERROR else ""
        if to_status == Session.Status.ERROR:
            send_after_commit(
                run_failed,
                self.session_id,
                run=self.run_seq,
                error_code=code,
                message=fields.get("last_error", ""),
                resumable=bool(fields.get("job_resumable", False)),
            )
        send_after_commit(
            run_finished, self.session_id, run=self.run_seq, outcome=to_status, error_code=code
        )
        telemetry.run_ended(to_status, code)

    def finish(self, reason: str = "final_reply") -> None:
        if PendingMessage.objects.filter(session_id=self.session_id).exists():
            # Messages queued during this step: the run goes on so the model answers them.
            self.next_step()
            return
        if self.end(Session.Status.IDLE, plan_outcome="finish", trace_reason=reason):
            if self.session.parent_id:
                reply = (
                    Event.objects.filter(session_id=self.session_id, kind=Event.Kind.AGENT_MESSAGE)
                    .exclude(content="")
                    .order_by("-seq")
                    .values_list("content", flat=True)
                    .first()
                )
                self.report_to_parent(reply or "(finished without a reply)")
            elif brain.naming_due(self.reload()):
                with db.atomic():
                    enqueue_naming(self.session_id)

    def report_to_parent(self, text: str) -> None:
        """A sub-agent's run ended: the parent gets its last word (reply, question or error)."""
        if self.session.parent_id:
            runs.subagent_report(session=self.reload(), text=text)

    def fail(
        self,
        code: str,
        message: str,
        *,
        resumable: bool = True,
        plan_outcome: str | None = None,
        detail: str = "",
    ) -> None:
        """Fail the run: an assistant event with meta.error, lastError + code, usually resumable.

        ``message`` is what the user sees (short, stable per code); ``detail`` (raw provider or
        database words) goes to the trace only, which staff and the owner's debugger read."""
        runstate.live_text_clear(self.session_id)
        if not self.end(
            Session.Status.ERROR,
            plan_outcome=plan_outcome,
            trace_reason="error",
            last_error=message,
            last_error_code=code,
            job_resumable=resumable,
        ):
            return
        session_services.event_append(
            session_id=self.session_id,
            kind=Event.Kind.AGENT_MESSAGE,
            content=message,
            payload={"meta": {"error": True, "code": code}},
        )
        self.trace("error", message, code=code, detail=detail)
        self.report_to_parent(f"Sub-agent stopped with an error ({code}): {message}")

    def pause_at_spend_cap(self) -> None:
        """The chat's cost reached its cap (``agents.spend_cap``): the run pauses as a
        resumable error, like the soft token budget, and nothing more starts. Raising the cap
        then Continue, or a Continue by a user who may exceed it, resumes it in the same run
        (tool calls of the last turn still open run then)."""
        self.fail("ahentic_spend_cap", runs.spend_cap_paused(self.session))

    def spend_cap_crossed(self) -> bool:
        """After a model turn: whether its cost took the chat to its cap (read again, with a
        cap staff set meanwhile). No read for a chat without a cap."""
        if agents.spend_cap(self.session) is None:
            return False
        runstate.session_refresh(self.session, ("cost_usd", "spend_cap_usd"))
        return agents.spend_cap_reached(self.session)

    def next_step(self) -> None:
        """Hand the run to a fresh step: write the trace, drop the lease, then enqueue (on
        commit, in one transaction: the next step may start at once)."""
        self.continues = True
        context_usage = self.predicted_usage()
        with db.atomic():
            counted = runstate.lease_release(
                self.lease, context_usage=context_usage, trace_records=len(self.tracer.items)
            )
            self.tracer.flush(counted)  # counted by the hand-over's UPDATE when it held
            if counted is not None:
                enqueue_step(self.session_id, self.run_seq)

    # --- the step ------------------------------------------------------------------------

    def run(self) -> None:
        session = self.session
        if usage.daily_limit_reached(session.daily_tokens):
            self.fail(
                "ahentic_daily_token_limit",
                "The site's daily token limit is reached; the run stopped.",
                resumable=True,
                plan_outcome="cancel",
            )
            return
        if agents.spend_cap_reached(session):
            self.pause_at_spend_cap()
            return
        budget = int(self.settings.SESSION_SOFT_TOKEN_BUDGET or 0)
        if budget and session.tokens_used >= session.soft_budget_acked + budget:
            self.fail(
                "ahentic_session_token_budget",
                f"This chat has used {session.tokens_used} tokens. Continue to keep going, or stop.",
            )
            return
        open_calls = self.heal()
        if open_calls:
            self.run_calls(open_calls)
            return
        if not self.session.has_queued and self.answered_mcp_call():
            # (Messages queued meanwhile are promoted and answered by the model instead.)
            self.finish("mcp_call")
            return
        self.promote_pending()
        self.think()

    def heal(self) -> list[EventRow]:
        """Answer tool calls that can no longer complete (their worker is gone or timed out).
        Returns the calls still open, oldest first."""
        healed: list[str] = []
        still_open: list[EventRow] = []
        for call in window.open_calls(self.window()):
            started = call.payload.get("started")
            if started and started.get("lease") != self.lease.token:
                tool = pipeline.get_tool(call.payload.get("tool", ""))
                mutating = tool is None or not tool.readonly
                message = (
                    "Interrupted, outcome unknown: the worker stopped while this tool ran. Check "
                    "the result before trying again."
                    if mutating
                    else "Interrupted: the worker stopped while this tool ran. You may call it again."
                )
                result = {"ok": False, "error": "tool_interrupted", "message": message}
                tool_response_record(session_id=self.session_id, call=call, result=result, ok=False)
                self.trace(
                    "tool_healed",
                    f"Healed {call.payload.get('tool')}",
                    call_id=call.tool_use_id,
                    mutating=mutating,
                )
                healed.append(call.tool_use_id)
            elif call.run != self.run_seq and not started:
                result = {
                    "ok": False,
                    "error": "tool_not_run",
                    "message": "This call was never run.",
                }
                tool_response_record(session_id=self.session_id, call=call, result=result, ok=False)
                healed.append(call.tool_use_id)
            else:
                still_open.append(call)
        if healed:
            self.appended()  # the answers are events of the window
        pending = runstate.PendingTool.from_json(self.session.pending_tool)
        if pending is not None and pending.call_id in healed:
            # The approval was for a call that is answered now: nothing is pending any more.
            runstate.pending_tool_clear(self.lease, pending.call_id)
        return still_open

    def promote_pending(self) -> None:
        """At a round boundary, queued messages join the conversation as user turns. (One
        queued while this step started waits for the next round; ``finish`` checks again.)"""
        if not self.session.has_queued:
            return
        count = runs.pending_promote(self.session_id)
        if count:
            self.appended()  # the messages are events of the window
            self.trace(
                "pending_promoted",
                f"{count} queued message(s) joined the conversation",
                count=count,
            )

    def max_steps(self) -> int:
        settings = self.settings
        if self.session.content_work:
            return int(settings.MAX_STEPS_PER_RUN_CONTENT_WORK)
        return int(settings.MAX_STEPS_PER_RUN)

    def think(self) -> None:
        session = self.session
        if session.step_count >= self.max_steps():
            self.fail(
                "ahentic_max_steps",
                f"The run reached its limit of {self.max_steps()} steps. Continue to keep going.",
            )
            return
        # The step is counted with its usage (one write): a call that fails ends the run.
        step = session.step_count + 1
        session.step_count = step
        self.step_number = step
        tools = tools_for(session, session.owner, self.settings)
        try:
            request = self.assemble(session, tools)
        except llm.LLMError as exc:  # a PDF's upload to the Files API (``files.prepare``)
            self.trace(
                "llm_error",
                exc.message,
                code=exc.code,
                status=exc.status,
                duration_ms=exc.duration_ms,
                detail=exc.detail,
                upload=True,
            )
            if exc.code == "ahentic_ai_unavailable":
                self.fail(exc.code, exc.message, resumable=False)
            else:
                self.fail(
                    "ahentic_attachment_upload",
                    "An attached PDF could not be uploaded to the Files API. Continue to try "
                    "again.",
                    detail=f"{exc.code}: {exc.detail or exc.message}",
                )
            return
        if self.lost_lease:  # during an upload: the run was cancelled or taken over
            self.trace("llm_aborted", "Step abandoned during an upload: the lease was lost")
            return
        settings = self.settings
        max_tokens = int(
            settings.MAX_OUTPUT_TOKENS_CONTENT_WORK
            if session.content_work
            else settings.MAX_OUTPUT_TOKENS
        )
        model = settings.MODEL
        body = request.body
        options = prompt.request_options(session, body["messages"], max_tokens, self.settings)
        self.trace("step_start", f"Step {step}", step=step)
        self.trace(
            "llm_request",
            f"Request to {model}",
            model=model,
            max_tokens=max_tokens,
            estimated_tokens=sum(self.sent_buckets.values()),
            **prompt.request_excerpt(body),
            **options,
        )
        try:
            with telemetry.chat_span(model, self.session_id, lambda: body) as chat:
                result = llm.call_model(
                    model=model,
                    system=body["system"],
                    messages=body["messages"],
                    tools=body["tools"],
                    max_tokens=max_tokens,
                    on_progress=self.on_stream,
                    files=request.files,
                    **options,
                )
                chat.result(result)
        except llm.Aborted:
            runstate.live_text_clear(self.session_id)
            self.trace("llm_aborted", "Model call abandoned: the run was cancelled")
            return
        except llm.LLMError as exc:
            runstate.live_text_clear(self.session_id)
            self.trace(
                "llm_error",
                exc.message,
                code=exc.code,
                status=exc.status,
                duration_ms=exc.duration_ms,
                detail=exc.detail,
            )
            self.fail(
                exc.code, exc.message, resumable=exc.retryable or exc.code == "ahentic_llm_auth"
            )
            return
        estimated = sum(self.sent_buckets.values())
        real = result.input_tokens + result.cache_read_tokens + result.cache_write_tokens
        if estimated and real:
            # Calibrate the estimator with what the API actually counted for this request.
            self.calibration = real / estimated
        self.trace(
            "llm_response",
            f"{result.stop_reason}: {result.text[:120]}",
            model=result.model,
            stop_reason=result.stop_reason,
            input_tokens=result.input_tokens,
            output_tokens=result.output_tokens,
            cache_read_tokens=result.cache_read_tokens,
            cache_write_tokens=result.cache_write_tokens,
            duration_ms=result.duration_ms,
            tool_uses=[t["name"] for t in result.tool_uses],
            thinking_ms=result.thinking_ms,
            web_search_requests=result.web_search_requests,
            web_fetch_requests=result.web_fetch_requests,
            **(
                {"unreadable_inputs": list(result.unreadable_inputs)}
                if result.unreadable_inputs
                else {}
            ),
        )
        # A cancel that arrived during the call: the usage is recorded, and persisting the
        # turn (conditional on the lease) writes nothing, so nothing new starts.
        self.handle_result(result)

    def assemble(self, session: Session, tools) -> prompt.Request:
        """Build the request from the viewport; move the window start in a batch if needed.
        Only the events from the window's start are used (older ones are in memory snapshots),
        so a step costs the same at 400 events or 4,000. The window is read afresh every step:
        what the model sees is what the database holds, however an event was edited."""
        events = self.window()
        assembly = context.assemble(session, tools, events, self.settings)
        noted = prompt.attach_context(assembly.window, assembly.step_context)
        if noted is not None:
            # Stored with the turn that answers this request (``persist_turn``).
            self.notes = [noted]
            assembly.window_tokens += context.tokens(assembly.step_context)
        self.sent = assembly
        if assembly.new_start is not None:
            with db.atomic():
                if runstate.viewport_move(self.lease, assembly.new_start):
                    enqueue_memory(self.session_id)
            self.trace(
                "context_compact",
                f"Window moved: {len(events) - len(assembly.window)} older events leave the "
                "context",
                from_event_id=session.viewport_start_event_id,
                to_event_id=assembly.new_start,
                evicted=len(events) - len(assembly.window),
                window_events=len(assembly.window),
            )
        refs = assembly.attachment_refs()
        if refs and files.prepare(refs, self.keep_lease):
            self.trace("files_uploaded", "Attached PDFs uploaded to the Files API")
        request = assembly.request(session.pk)
        self.sent_buckets = context.buckets(request, assembly.memory_blocks)
        return request

    def keep_lease(self) -> bool:
        """After a long call outside the model stream (a Files API upload): the lease
        refreshed; False (and ``lost_lease``) once it is lost."""
        self.refreshed_at = time.monotonic()
        if not runstate.lease_refresh(self.lease):
            self.lost_lease = True
        return not self.lost_lease

    def on_stream(self, text: str) -> bool:
        """While the model streams: the reply's text so far for the live view (when it grew),
        and the lease refreshed every ``llm.PROGRESS_INTERVAL_S``. False once the lease is
        lost (the call is abandoned)."""
        now = time.monotonic()
        if now - self.refreshed_at >= llm.PROGRESS_INTERVAL_S:
            self.refreshed_at = now
            if not runstate.lease_refresh(self.lease):
                return False
        if text and text != self.live_text:
            self.live_text = text
            runstate.live_text_set(self.lease, text)
        return True

    def predicted_usage(self) -> dict[str, Any]:
        """``contextUsage`` as the step leaves the session: the request a message typed now
        would send (``context.predicted_usage``), from the request this step sent plus what
        it added."""
        # What the step's tools may have changed, in one narrow read (the rest is as loaded).
        runstate.session_refresh(self.session, PREDICTION_FIELDS)
        session = self.session
        calibration = self.calibration or float(
            (session.context_usage or {}).get("calibration") or 1.0
        )
        start = session.viewport_start_event_id or 0
        # The window as the step leaves it (the refresh read its last seq and edit version).
        kept = window.windows.rows(
            self.session_id,
            edit_version=session.edit_version,
            last_seq=session.last_seq,
            from_id=session.viewport_start_event_id,
        )
        if self.sent is not None:
            newest = self.sent.window[-1].pk if self.sent.window else start - 1
            added = [event for event in kept if event.pk > newest]
            if runstate.only_lease_wrote(self.lease, session.version, self.loaded_version):
                # Only the step's own writes moved the version: what its request's step
                # context read at its start holds (``prompt.keep_step_context``).
                prompt.keep_step_context(
                    self.session_id, self.loaded_version, session.version, added
                )
            usage = context.predicted_usage_after(
                session, self.sent, self.sent_buckets, added, calibration, self.settings
            )
            if usage is not None:
                return usage
            events = self.sent.window + added
        else:  # no model call in this step
            events = kept
        return context.predicted_usage(
            session,
            tools_for(session, session.owner, self.settings),
            events,
            calibration,
            self.settings,
        )

    def record_next_usage(self) -> None:
        """Write the prediction when the step ends the run or pauses it (a step that hands the
        run on writes it with the lease hand-over). Visible then: the user is the next to act."""
        if self.continues:
            return
        context_usage = self.predicted_usage()  # reloads self.session
        runstate.context_usage_predict(
            session_id=self.session_id,
            run_seq=self.run_seq,
            step_count=self.step_number,
            context_usage=context_usage,
            visible=self.session.status != Session.Status.RUNNING,
        )

    def handle_result(self, result: llm.LLMResult) -> None:
        reason = result.stop_reason
        tool_uses = result.tool_uses if reason != "max_tokens" else []
        calls = self.persist_turn(result, tool_uses)
        if calls is None:
            return
        if calls and self.spend_cap_crossed():
            # The turn that crossed the cap is kept; its tools wait for the run to resume.
            self.pause_at_spend_cap()
            return
        if reason == "tool_use" and (calls or result.unreadable_inputs):
            self.run_calls(calls)  # an answered unreadable call: the model reads its error
        elif reason in FINISH_REASONS or (reason == "tool_use" and not calls):
            self.finish()
        elif reason == "max_tokens":
            session_services.event_append(
                session_id=self.session_id,
                kind=Event.Kind.USER_MESSAGE,
                content=MAX_TOKENS_NUDGE,
                payload={"synthetic": "max_tokens", "meta": {"synthetic": "max_tokens"}},
            )
            self.next_step()
        elif reason == "pause_turn":
            self.next_step()
        elif reason == "refusal":
            self.end(
                Session.Status.IDLE,
                plan_outcome=None,
                trace_reason="refusal",
                last_error="The model declined to continue this request.",
                last_error_code="ahentic_refusal",
            )
        else:
            self.fail(
                "ahentic_llm_error", f"The model stopped for an unexpected reason: {reason!r}."
            )

    def persist_turn(
        self,
        result: llm.LLMResult,
        tool_uses: list[dict[str, Any]],
    ) -> list[Event] | None:
        """Record the call's usage (always) and write the assistant turn (text + each tool_use)
        if the lease still holds, in one transaction."""
        items: list[dict[str, Any]] = []
        blocks = prompt.turn_blocks(result.content)
        if result.text or blocks:
            payload: dict[str, Any] = {"meta": {"model": result.model}}
            if blocks:
                # Thinking and server tool blocks, kept whole and in order with the turn's
                # text: the next requests send them back unchanged (prompt.event_parts).
                payload["blocks"] = blocks
                if result.thinking_ms:
                    payload["meta"]["thinkingMs"] = result.thinking_ms
            items.append(
                {"kind": Event.Kind.AGENT_MESSAGE, "content": result.text, "payload": payload}
            )
        for use in tool_uses:
            items.append(
                {
                    "kind": Event.Kind.TOOL_CALL,
                    "content": result_text(use["input"]),
                    "payload": {"tool": use["name"], "input": use["input"]},
                    "tool_use_id": use["id"],
                }
            )
        with db.atomic():
            record = usage.usage_record_call(
                session=self.session,
                run=self.run_seq,
                purpose="step",
                result=result,
                add_to_session=False,
            )
            sums = usage.session_sums(record, self.step_number)
            telemetry.spent(self.agent, record.cost_usd)
            # Written only while the lease holds, checked under the row lock in the insert's
            # transaction: a cancel that commits first leaves no tool_use behind it. The call's
            # usage goes into the same UPDATE; the reply's event replaces its live text in the
            # same commit.
            events = session_services.events_append(
                session_id=self.session_id,
                items=items,
                lease=self.lease,
                session_fields=runstate.usage_sums(**sums),
                notes=self.notes,
                # Retention is applied once a run, with its first turn.
                prune=self.step_number == 1,
            )
            if events is None or not items:  # the usage counts all the same
                runstate.usage_add(session_id=self.session_id, **sums)
            if self.live_text:
                runstate.live_text_clear(self.session_id)
        if events is None:
            return None
        calls = [e for e in events if e.kind == Event.Kind.TOOL_CALL]
        unreadable = [c for c in calls if c.tool_use_id in result.unreadable_inputs]
        for call in unreadable:  # the SDK could not parse its input (``llm._unreadable_input``)
            answer_unanswered(
                session_id=self.session_id,
                code="invalid_input",
                message=result.unreadable_inputs[call.tool_use_id],
                only=[call],
            )
        calls = [c for c in calls if c not in unreadable]
        limit = int(self.settings.MAX_TOOLS_PER_STEP)
        if len(calls) > limit:
            # Extra calls are answered, never dropped, so the pairs stay intact.
            answer_unanswered(
                session_id=self.session_id,
                code="too_many_tools",
                message=f"At most {limit} tool calls run per step; call this again in the next step.",
                only=calls[limit:],
            )
            calls = calls[:limit]
        return calls

    def run_calls(self, calls: list[Event | EventRow]) -> None:
        """Run open tool calls in order. A pause stops here; the rest wait for the next step."""
        for index, call in enumerate(calls):
            outcome = pipeline.process_call(self.lease, self.tracer, self.session, call)
            if outcome.kind == "paused" or outcome.kind == "lost":
                return
            if outcome.kind == "stop":
                answer_unanswered(
                    session_id=self.session_id,
                    code="skipped",
                    message="Skipped: the run paused for the user's answer.",
                    only=calls[index + 1 :],
                )
                self.ask_user(outcome.reply)
                return
        if all(is_mcp_call(call.tool_use_id) for call in calls):
            # An MCP client's call: the client reads the answer, the model is not asked.
            self.finish("mcp_call")
            return
        self.next_step()

    def answered_mcp_call(self) -> bool:
        """The run is an MCP client's call (its user turn is the call's, not the user's own
        words) and the window ends with its answer (a denial recorded by the decision): the
        run ends there, as it does after the call ran."""
        events = self.window()
        last = events[-1] if events else None
        if (
            last is None
            or last.kind != Event.Kind.TOOL_RESPONSE
            or not is_mcp_call(last.tool_use_id)
        ):
            return False
        asked = next((e for e in reversed(events) if e.kind == Event.Kind.USER_MESSAGE), None)
        return asked is not None and MCP_META in ((asked.payload or {}).get("meta") or {})

    def ask_user(self, question: str) -> None:
        session_services.event_append(
            session_id=self.session_id,
            kind=Event.Kind.AGENT_MESSAGE,
            content=question,
            payload={"meta": {"ask_user": True}},
        )
        if self.end(Session.Status.IDLE, plan_outcome="ask_user", trace_reason="ask_user"):
            self.report_to_parent(f"Sub-agent asks: {question}")


def run_step(session_id, run_seq: int, trace: dict[str, str] | None = None) -> None:
    """Run one step, in its ``invoke_agent`` span (``trace``: the carried trace context)."""
    lease = runstate.run_claim(session_id=session_id, run_seq=run_seq)
    if lease is None:
        return
    try:
        runner = StepRunner(lease)
    except Session.DoesNotExist:
        return
    with telemetry.step_span(session_id, run_seq, trace, runner.agent):
        run_claimed(runner)


def run_claimed(runner: StepRunner) -> None:
    session_id = runner.session_id
    try:
        runner.run()
    except Session.DoesNotExist:  # deleted mid-step: nothing left to record
        return
    except Exception as exc:  # the run must end in a visible state, never stay "running"
        log.exception("ahentic step failed for session %s", session_id)
        try:
            runner.fail(
                "ahentic_internal_error",
                "Something went wrong inside the agent. Continue to try again.",
                detail=f"{exc.__class__.__name__}: {exc}",
            )
        except Exception:
            log.exception("ahentic could not record the failure for session %s", session_id)
    try:
        runner.tracer.flush()
        runner.record_next_usage()
    except Session.DoesNotExist:
        pass
    except Exception:  # bookkeeping: the run's state is already recorded above
        log.exception("ahentic could not record the step's trace for session %s", session_id)
