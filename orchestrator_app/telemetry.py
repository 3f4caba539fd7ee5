"""OpenTelemetry: the app's traces and metrics. The only module that imports ``opentelemetry``.

The app uses the OpenTelemetry API only. A site that configures an SDK (a ``TracerProvider``
and a ``MeterProvider``, with the exporters it wants: docs/howto/observability.md) sees every
run as a trace; without one, the API's no-op tracer and meter are used and nothing is built
beyond what the API itself does (content attributes are computed only for a recording span).

Spans, named and attributed after the OpenTelemetry semantic conventions for generative AI:

- ``invoke_agent <agent>``: one step of a run (``step_span``). The run's first step is a child
  of the context that enqueued it (the host's web request span, when the host instruments
  Django); each later step starts a trace of its own with a link to the first step. The
  context travels through the django-q2 task as a W3C ``traceparent`` carrier
  (``task_context`` when enqueuing, ``step_span`` when running).
- ``chat <model>``: each model call of a step (``chat_span``), with the ``gen_ai.*`` usage.
- ``execute_tool <name>``: each tool call the pipeline handles (``tool_span``), with the
  decision (``ahentic.tool.decision``); the pause for an approval and the decision on it are
  events (``approval_requested``, ``approval_decided``).
- ``mcp <server> <method>``: each call of the MCP client (``mcp_span``).
- ``webhook <event>``: each webhook delivery attempt (``webhook_span``).

A failure sets the span's status to ERROR and ``error.type`` to the app's error code.

Content (prompts, replies, tool inputs and results) is recorded only with
``AHENTIC["OTEL_CAPTURE_CONTENT"]``, and then redacted (``redact``): values under names that
look like secrets are masked as the admin masks them (``vault.MASK``). Credentials (the API
key, tokens, vault values, Authorization headers) are never attributes.

Metrics: ``gen_ai.client.token.usage`` and ``gen_ai.client.operation.duration`` (histograms),
and the app's own counters (``ahentic.*``, see the instruments below).
"""

from __future__ import annotations

import contextvars
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import metadata
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import metrics, propagate, trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from sessions_app.conf import ahentic_settings

from .vault import MASK, is_secret_name

try:
    VERSION: str | None = metadata.version("django-ahentic")
except metadata.PackageNotFoundError:  # run from a checkout
    VERSION = None

INSTRUMENTATION = "django-ahentic"
PROVIDER = "anthropic"
# The carrier key that marks a step's context as a link (a later step of the run), not a parent.
LINK_KEY = "ahentic-link"
# In a carrier: the run's first step (a ``traceparent``), which a step resumed by a web request
# (a decision on a paused call) links to while its parent is that request.
ORIGIN_KEY = "ahentic-origin"
# Content longer than this is cut (an attribute is not a transcript).
CONTENT_LIMIT = 4000

tracer = trace.get_tracer(INSTRUMENTATION, VERSION)
meter = metrics.get_meter(INSTRUMENTATION, VERSION)


class Instruments:
    """The app's metric instruments, made by ``meter`` (``metric``: the API's global meter)."""

    def __init__(self, meter: metrics.Meter):
        self.token_usage = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Tokens used per model call, by gen_ai.token.type (input, output).",
            explicit_bucket_boundaries_advisory=[4**n for n in range(13)],
        )
        self.operation_duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="Duration of each model call.",
            explicit_bucket_boundaries_advisory=[0.01 * 2**n for n in range(14)],
        )
        self.runs = meter.create_counter(
            "ahentic.runs",
            unit="{run}",
            description="Runs that came to rest, by ahentic.run.outcome.",
        )
        self.spend = meter.create_counter(
            "ahentic.spend", unit="USD", description="Model spend in USD, by gen_ai.agent.name."
        )
        self.schedule_firings = meter.create_counter(
            "ahentic.schedule.firings",
            unit="{firing}",
            description="Scheduled runs by their final ahentic.schedule.outcome.",
        )
        self.webhook_deliveries = meter.create_counter(
            "ahentic.webhook.deliveries",
            unit="{attempt}",
            description="Webhook delivery attempts, by ahentic.webhook.outcome.",
        )
        self.mcp_calls = meter.create_counter(
            "ahentic.mcp.calls",
            unit="{call}",
            description="MCP client calls, by ahentic.mcp.server and ahentic.mcp.outcome.",
        )
        # Site-wide (read from the database when a reader collects, never without an SDK):
        # every process reports the same value, so aggregate it with max or last, not sum.
        meter.create_observable_gauge(
            "ahentic.approvals.waiting",
            callbacks=[_observe_approvals],
            unit="{approval}",
            description="Chats waiting for a user's approval of a tool call (site-wide).",
        )


# How many chats wait for an approval (``count_approvals_with``, from the app's ready()).
_approvals_count: Callable[[], int] | None = None


def count_approvals_with(count: Callable[[], int]) -> None:
    global _approvals_count
    _approvals_count = count


def _observe_approvals(options: metrics.CallbackOptions) -> Iterator[metrics.Observation]:
    if _approvals_count is not None:
        yield metrics.Observation(_approvals_count())


metric = Instruments(meter)

# The span context of the running step's run origin (its first step), for the next step's link.
_run_origin: contextvars.ContextVar[trace.SpanContext | None] = contextvars.ContextVar(
    "ahentic_run_origin", default=None
)


# --- content --------------------------------------------------------------------------------


def capture_content() -> bool:
    return bool(ahentic_settings.OTEL_CAPTURE_CONTENT)


def redact(value: Any) -> Any:
    """``value`` (JSON-like) with the value under every secret-looking name masked."""
    if isinstance(value, dict):
        return {key: MASK if is_secret_name(key) else redact(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [redact(item) for item in value]
    return value


def content(value: Any) -> str:
    """``value`` redacted and serialized for an attribute (cut at ``CONTENT_LIMIT``)."""
    text = value if isinstance(value, str) else json.dumps(redact(value), default=str)
    return text[:CONTENT_LIMIT]


def set_content(span: trace.Span, name: str, value: Callable[[], Any]) -> None:
    """Record ``value()`` as the content attribute ``name``, only for a recording span and
    with the opt-in (``value`` is not called otherwise)."""
    if span.is_recording() and capture_content():
        span.set_attribute(name, content(value()))


# --- propagation ----------------------------------------------------------------------------


def run_origin() -> str | None:
    """Inside a step: the ``traceparent`` of its run's first step, to keep with a pause (the
    decision that resumes the run passes it to ``task_context``). None without one."""
    origin = _run_origin.get()
    if origin is None:
        return None
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=trace.set_span_in_context(trace.NonRecordingSpan(origin)))
    return carrier.get("traceparent")


def task_context(origin: str | None = None) -> dict[str, str] | None:
    """The carrier a step's task takes along (``trace=`` of ``tasks.run_step``): inside a step,
    a link to the run's first step; elsewhere the current context (the web request's), as the
    parent of the step, and with ``origin`` (``run_origin`` kept with a pause) a link to the
    run's first step as well. None when there is no valid context (no SDK, no span)."""
    current = _run_origin.get()
    carrier: dict[str, str] = {}
    if current is not None:
        propagate.inject(
            carrier, context=trace.set_span_in_context(trace.NonRecordingSpan(current))
        )
        if carrier:
            carrier[LINK_KEY] = "1"
    elif trace.get_current_span().get_span_context().is_valid:
        propagate.inject(carrier)
        if origin:
            carrier[ORIGIN_KEY] = origin
    elif origin:
        carrier = {"traceparent": origin, LINK_KEY: "1"}
    return carrier or None


def _span_context(traceparent: str) -> trace.SpanContext:
    extracted = propagate.extract({"traceparent": traceparent})
    return trace.get_current_span(extracted).get_span_context()


@contextmanager
def step_span(
    session_id: Any, run_seq: int, carrier: dict[str, str] | None, agent: str
) -> Iterator[trace.Span]:
    """The span of one step (``invoke_agent <agent>``, ``agent``: the agent's slug), current
    while the step runs."""
    parent = None
    links: list[Link] = []
    origin = None
    if carrier:
        extracted = propagate.extract(carrier)
        found = trace.get_current_span(extracted).get_span_context()
        if found.is_valid and carrier.get(LINK_KEY):
            links = [Link(found)]
            origin = found
            parent = otel_context.Context()  # a trace of its own, linked to the first step
        else:
            parent = extracted
            first = _span_context(carrier[ORIGIN_KEY]) if carrier.get(ORIGIN_KEY) else None
            if first is not None and first.is_valid:
                # Resumed by a request (a decision): its child, linked to the first step.
                links = [Link(first)]
                origin = first
    else:
        parent = otel_context.Context()  # a task runs outside any request's context
    with tracer.start_as_current_span(
        f"invoke_agent {agent}",
        context=parent,
        kind=SpanKind.INTERNAL,
        links=links,
        record_exception=False,
    ) as span:
        if span.is_recording():
            span.set_attributes(
                {
                    "gen_ai.operation.name": "invoke_agent",
                    "gen_ai.provider.name": PROVIDER,
                    "gen_ai.agent.name": agent,
                    "gen_ai.conversation.id": str(session_id),
                    "ahentic.run": run_seq,
                }
            )
        token = _run_origin.set(origin or span.get_span_context())
        try:
            yield span
        finally:
            _run_origin.reset(token)


def fail(span: trace.Span, code: str) -> None:
    """``span`` failed with the app's error ``code``."""
    span.set_status(Status(StatusCode.ERROR, code))
    span.set_attribute("error.type", code)


def run_ended(outcome: str, error_code: str) -> None:
    """The run came to rest in this step: its span gets the outcome (and the error)."""
    span = trace.get_current_span()
    if span.is_recording():
        span.set_attribute("ahentic.run.outcome", outcome)
        if error_code:
            fail(span, error_code)


def on_run_finished(outcome: str, **kwargs: Any) -> None:
    """Hears ``run_finished`` by the session's key (``signals.on_session_key``):
    ``ahentic.runs`` counts every run that came to rest, wherever it ended (a step, a cancel in
    a web request, the recovery sweep)."""
    metric.runs.add(1, {"ahentic.run.outcome": outcome})


def spent(agent: str, usd: Any) -> None:
    """A model call's cost (USD, a Decimal or None when the model has no prices)."""
    if usd:
        metric.spend.add(float(usd), {"gen_ai.agent.name": agent})


# --- model calls ----------------------------------------------------------------------------


class ChatCall:
    """A model call's span and clock (``chat_span``)."""

    def __init__(self, span: trace.Span, model: str):
        self.span = span
        self.model = model
        self.started = time.monotonic()
        self.metric_attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": PROVIDER,
            "gen_ai.request.model": model,
        }

    def result(self, result: Any) -> None:
        """The call's reply (an ``llm.LLMResult``)."""
        attributes = {**self.metric_attributes, "gen_ai.response.model": result.model}
        metric.operation_duration.record(time.monotonic() - self.started, attributes)
        metric.token_usage.record(result.input_tokens, {**attributes, "gen_ai.token.type": "input"})
        metric.token_usage.record(
            result.output_tokens, {**attributes, "gen_ai.token.type": "output"}
        )
        span = self.span
        if not span.is_recording():
            return
        span.set_attributes(
            {
                "gen_ai.response.model": result.model,
                "gen_ai.response.finish_reasons": [result.stop_reason],
                "gen_ai.usage.input_tokens": result.input_tokens,
                "gen_ai.usage.output_tokens": result.output_tokens,
                "gen_ai.usage.cache_read.input_tokens": result.cache_read_tokens,
                "gen_ai.usage.cache_creation.input_tokens": result.cache_write_tokens,
            }
        )
        if result.request_id:
            span.set_attribute("gen_ai.response.id", result.request_id)
        set_content(span, "gen_ai.output.messages", lambda: result.content)

    def error(self, code: str) -> None:
        metric.operation_duration.record(
            time.monotonic() - self.started, {**self.metric_attributes, "error.type": code}
        )
        fail(self.span, code)


@contextmanager
def chat_span(
    model: str, conversation_id: Any, request: Callable[[], dict[str, Any]]
) -> Iterator[ChatCall]:
    """The span of one model call (``chat <model>``); the caller gives it the reply
    (``ChatCall.result``), an exception marks it failed. ``request()`` gives the request's
    ``system`` and ``messages``, read only to record them as content (with the opt-in)."""
    with tracer.start_as_current_span(
        f"chat {model}", kind=SpanKind.CLIENT, record_exception=False
    ) as span:
        if span.is_recording():
            span.set_attributes(
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.provider.name": PROVIDER,
                    "gen_ai.request.model": model,
                    "gen_ai.conversation.id": str(conversation_id),
                }
            )
            set_content(span, "gen_ai.system_instructions", lambda: request()["system"])
            set_content(span, "gen_ai.input.messages", lambda: request()["messages"])
        call = ChatCall(span, model)
        try:
            yield call
        except Exception as exc:  # the app's code (``llm.LLMError``), else the exception's name
            call.error(str(getattr(exc, "code", "") or type(exc).__name__))
            raise


# --- tools ----------------------------------------------------------------------------------


@contextmanager
def tool_span(name: str, call_id: str, tool_input: Callable[[], Any]) -> Iterator[trace.Span]:
    """The span of one tool call (``execute_tool <name>``), current while the pipeline
    handles it; ``tool_decision`` and ``tool_result`` fill it in."""
    with tracer.start_as_current_span(
        f"execute_tool {name}", kind=SpanKind.INTERNAL, record_exception=False
    ) as span:
        if span.is_recording():
            span.set_attributes(
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": name,
                    "gen_ai.tool.call.id": call_id,
                    "gen_ai.tool.type": "function",
                }
            )
            set_content(span, "gen_ai.tool.call.arguments", tool_input)
        yield span


def tool_decision(decision: str) -> None:
    """How the current tool call was decided: ``refused``, ``not_required`` (no approval
    needed), ``preallowed``, ``approved``, ``awaiting_approval``, ``browser``..."""
    trace.get_current_span().set_attribute("ahentic.tool.decision", decision)


def tool_result(result: Any, ok: bool) -> None:
    """The current tool call's recorded result; a failure sets the span's status."""
    span = trace.get_current_span()
    if not span.is_recording():
        return
    if not ok:
        code = result.get("error") if isinstance(result, dict) else None
        fail(span, str(code or "tool_error"))
    set_content(span, "gen_ai.tool.call.result", lambda: result)


def approval_requested(tool: str, call_id: str) -> None:
    """The run paused for a user's approval of a tool call."""
    trace.get_current_span().add_event(
        "ahentic.approval.requested", {"gen_ai.tool.name": tool, "gen_ai.tool.call.id": call_id}
    )


def approval_decided(tool: str, call_id: str, decision: str) -> None:
    """A user decided on a waiting approval (in the decision's request: its span gets the
    event)."""
    trace.get_current_span().add_event(
        "ahentic.approval.decided",
        {"gen_ai.tool.name": tool, "gen_ai.tool.call.id": call_id, "ahentic.decision": decision},
    )


# --- MCP, webhooks, schedules ---------------------------------------------------------------


@contextmanager
def mcp_span(server: str, method: str, tool: str = "") -> Iterator[Callable[[str], None]]:
    """The span of one MCP client call; yields ``failed(code)`` for an error the call
    reports without raising. An exception marks the call failed and propagates."""
    outcome = ["ok"]
    with tracer.start_as_current_span(
        f"mcp {server} {method}", kind=SpanKind.CLIENT, record_exception=False
    ) as span:

        def failed(code: str) -> None:
            outcome[0] = "error"
            fail(span, code)

        if span.is_recording():
            span.set_attributes({"ahentic.mcp.server": server, "mcp.method.name": method})
            if tool:
                span.set_attribute("gen_ai.tool.name", tool)
        try:
            yield failed
        except Exception as exc:
            if outcome[0] == "ok":  # not reported by the caller
                failed(type(exc).__name__)
            raise
        finally:
            metric.mcp_calls.add(
                1,
                {
                    "ahentic.mcp.server": server,
                    "mcp.method.name": method,
                    "ahentic.mcp.outcome": outcome[0],
                },
            )


@contextmanager
def webhook_span(event: str, endpoint_id: Any, attempt: int) -> Iterator[Callable[[str], None]]:
    """The span of one webhook delivery attempt; yields ``outcome(value, code="")``, called
    once with the attempt's outcome (``delivered``, ``retry``, ``failed``...)."""
    with tracer.start_as_current_span(
        f"webhook {event}", kind=SpanKind.CLIENT, record_exception=False
    ) as span:
        if span.is_recording():
            span.set_attributes(
                {
                    "ahentic.webhook.event": event,
                    "ahentic.webhook.endpoint": str(endpoint_id),
                    "ahentic.webhook.attempt": attempt,
                }
            )

        def outcome(value: str, code: str = "") -> None:
            metric.webhook_deliveries.add(1, {"ahentic.webhook.outcome": value})
            if span.is_recording():
                span.set_attribute("ahentic.webhook.outcome", value)
            if code:
                fail(span, code)

        yield outcome


def on_schedule_run_finished(status: str, **kwargs: Any) -> None:
    """Hears ``schedule_run_finished`` by the session's key (``signals.on_session_key``):
    each firing counted once, by its final status (a run logged ``awaiting_human`` is counted
    when it ends)."""
    if status != "awaiting_human":
        metric.schedule_firings.add(1, {"ahentic.schedule.outcome": status})
