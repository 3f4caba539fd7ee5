"""OpenTelemetry: a run seen as spans and metrics, through the SDK's in-memory exporters.

The app's tracer and instruments (``orchestrator_app.telemetry``) are swapped for ones of a
test SDK provider per test (the ``otel`` fixture, tests/conftest.py: nothing global is set, so
the other modules keep the API's no-op tracer). The web requests are driven through the test client inside a span standing for the
host's own Django instrumentation; the steps run in the synchronous worker.
"""

import json
from datetime import UTC, datetime, timedelta
from unittest import mock

import pytest
from opentelemetry import trace
from opentelemetry.trace import SpanKind, StatusCode

from orchestrator_app import tasks, telemetry
from orchestrator_app.control import queue
from orchestrator_app.models import UsageRecord
from orchestrator_app.schedules import tasks as schedule_tasks
from orchestrator_app.testing.localapi import error_reply, text_reply, tool_call, tool_reply
from sessions_app.conf import ahentic_settings
from sessions_app.models import Session
from tests.support import tools_for_artifacts, tools_for_tests  # noqa: F401  (register the test tools)
from tests.support.api import decide, post, post_message
from tests.support.factories import agent_create, schedule_create
from tests.support.telemetry import Otel

pytestmark = pytest.mark.usefixtures("llm_strict")

NOTE = {"title": "Opening hours", "body": "We open at nine."}
SECRET = "hunter2-do-not-export"


def every_attribute_value(otel: Otel) -> list[str]:
    values = []
    for span in otel.spans():
        values += [str(v) for v in span.attributes.values()]
        for event in span.events:
            values += [str(v) for v in event.attributes.values()]
    return values


def run_with_an_approval(otel, owner_client, session, llm, run_tasks):
    """A run: the model calls echo (runs unasked) and publish_note (asks); the user allows it
    in a second request; the model then replies."""
    llm.enqueue(
        tool_reply(
            tool_call("echo", {"text": "hi", "password": SECRET}, id="toolu_echo"),
            tool_call("publish_note", NOTE, id="toolu_publish"),
        ),
        text_reply("Published."),
    )
    with otel.request("POST /messages"):
        body = post_message(owner_client, session, run_tasks, "Publish the opening hours")
    assert body["status"] == "awaiting_human"
    with otel.request("POST /approvals"):
        body = decide(owner_client, session, run_tasks, "allow_once")
    assert body["status"] == "idle"


def test_a_run_with_a_tool_and_an_approval_is_a_trace_of_spans(
    otel, owner_client, session, llm, run_tasks, artifact_calls
):
    run_with_an_approval(otel, owner_client, session, llm, run_tasks)

    agent = Session.objects.get(pk=session.pk).agent_version.agent.slug
    posted, decided = otel.one("POST /messages"), otel.one("POST /approvals")
    steps = sorted(otel.spans(f"invoke_agent {agent}"), key=lambda s: s.start_time)
    assert len(steps) == 3  # the model's tool turn; the approved tool; the model's reply
    first, resumed, last = steps
    # The step started by a web request is its child (the worker joined its trace) ...
    assert first.parent.span_id == posted.context.span_id
    assert first.context.trace_id == posted.context.trace_id
    assert first.links == ()
    # The step the decision resumes is the decision request's child, linked to the run's first
    # step (kept with the pause) ...
    assert resumed.parent.span_id == decided.context.span_id
    assert [link.context.span_id for link in resumed.links] == [first.context.span_id]
    # ... and a step a step hands over to links to that first step, in a trace of its own.
    assert last.parent is None
    assert [link.context.span_id for link in last.links] == [first.context.span_id]
    assert last.context.trace_id not in (first.context.trace_id, resumed.context.trace_id)
    for step in steps:
        assert step.attributes["gen_ai.operation.name"] == "invoke_agent"
        assert step.attributes["gen_ai.agent.name"] == agent
        assert step.attributes["gen_ai.conversation.id"] == str(session.pk)
    assert last.attributes["ahentic.run.outcome"] == "idle"

    chats = sorted(otel.spans("chat "), key=lambda s: s.start_time)
    assert [c.parent.span_id for c in chats] == [first.context.span_id, last.context.span_id]
    chat = chats[0]
    request = llm.message_requests()[0]
    assert chat.name == f"chat {request['model']}"
    assert chat.kind == SpanKind.CLIENT
    expected = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.request.model": request["model"],
        "gen_ai.conversation.id": str(session.pk),
        "gen_ai.response.finish_reasons": ("tool_use",),
    }
    assert {k: chat.attributes[k] for k in expected} == expected
    assert chat.attributes["gen_ai.response.model"]
    usage = {
        k: chat.attributes[k]
        for k in (
            "gen_ai.usage.input_tokens",
            "gen_ai.usage.output_tokens",
            "gen_ai.usage.cache_read.input_tokens",
            "gen_ai.usage.cache_creation.input_tokens",
        )
    }
    record = UsageRecord.objects.filter(session_id=session.pk).order_by("id").first()
    assert usage == {
        "gen_ai.usage.input_tokens": record.input_tokens,
        "gen_ai.usage.output_tokens": record.output_tokens,
        "gen_ai.usage.cache_read.input_tokens": record.cache_read_tokens,
        "gen_ai.usage.cache_creation.input_tokens": record.cache_write_tokens,
    }
    assert record.input_tokens + record.cache_read_tokens + record.cache_write_tokens > 0
    assert chats[1].attributes["gen_ai.response.finish_reasons"] == ("end_turn",)

    echo = otel.one("execute_tool echo")
    assert echo.parent.span_id == first.context.span_id
    assert echo.attributes["gen_ai.tool.name"] == "echo"
    assert echo.attributes["gen_ai.tool.call.id"] == "toolu_echo"
    assert echo.attributes["ahentic.tool.decision"] == "not_required"
    assert echo.status.status_code != StatusCode.ERROR

    asked, ran = sorted(otel.spans("execute_tool publish_note"), key=lambda s: s.start_time)
    assert asked.parent.span_id == first.context.span_id
    assert asked.attributes["ahentic.tool.decision"] == "awaiting_approval"
    assert [e.name for e in asked.events] == ["ahentic.approval.requested"]
    assert asked.events[0].attributes["gen_ai.tool.call.id"] == "toolu_publish"
    assert ran.parent.span_id == resumed.context.span_id
    assert ran.attributes["ahentic.tool.decision"] == "allow_once"
    assert ran.attributes["gen_ai.tool.call.id"] == "toolu_publish"
    [event] = decided.events
    assert event.name == "ahentic.approval.decided"
    assert event.attributes["ahentic.decision"] == "allow_once"


def test_no_content_is_recorded_without_the_opt_in(
    otel, owner_client, session, llm, run_tasks, artifact_calls
):
    run_with_an_approval(otel, owner_client, session, llm, run_tasks)

    content = [
        key
        for span in otel.spans()
        for key in span.attributes
        if key
        in (
            "gen_ai.input.messages",
            "gen_ai.output.messages",
            "gen_ai.system_instructions",
            "gen_ai.tool.call.arguments",
            "gen_ai.tool.call.result",
        )
    ]
    assert content == []
    values = " ".join(every_attribute_value(otel))
    assert "Publish the opening hours" not in values and SECRET not in values
    assert "test-key" not in values  # the API key


def test_with_the_opt_in_content_is_recorded_redacted_and_secrets_never(
    otel, owner_client, session, llm, run_tasks, artifact_calls, settings
):
    settings.AHENTIC = {**settings.AHENTIC, "OTEL_CAPTURE_CONTENT": True}

    run_with_an_approval(otel, owner_client, session, llm, run_tasks)

    echo = otel.one("execute_tool echo")
    assert json.loads(echo.attributes["gen_ai.tool.call.arguments"]) == {
        "text": "hi",
        "password": "••••",
    }
    assert json.loads(echo.attributes["gen_ai.tool.call.result"]) == {"ok": True, "echo": "hi"}
    first_chat = sorted(otel.spans("chat "), key=lambda s: s.start_time)[0]
    assert "Publish the opening hours" in first_chat.attributes["gen_ai.input.messages"]
    assert "toolu_publish" in first_chat.attributes["gen_ai.output.messages"]
    values = " ".join(every_attribute_value(otel))
    assert SECRET not in values
    assert "test-key" not in values


def test_a_failed_model_call_sets_the_status_with_the_error_code(
    otel, owner_client, session, llm, run_tasks
):
    llm.enqueue(*[error_reply(400, "invalid_request_error", "bad")] * 3)

    with otel.request("POST /messages"):
        body = post_message(owner_client, session, run_tasks, "Hello")

    assert body["status"] == "error"
    chat = otel.one("chat ")
    assert chat.status.status_code == StatusCode.ERROR
    code = chat.attributes["error.type"]
    assert code.startswith("ahentic_")
    step = otel.one("invoke_agent ")
    assert step.status.status_code == StatusCode.ERROR
    assert step.attributes["error.type"] == code
    assert step.attributes["ahentic.run.outcome"] == "error"


def test_a_failing_tool_sets_its_span_status(otel, owner_client, session, llm, run_tasks):
    llm.enqueue(tool_reply(tool_call("fails", {}, id="toolu_fails")), text_reply("It failed."))

    with otel.request("POST /messages"):
        post_message(owner_client, session, run_tasks, "Try it")

    span = otel.one("execute_tool fails")
    assert span.status.status_code == StatusCode.ERROR
    assert span.attributes["error.type"]


def test_the_metrics_of_a_run(otel, owner_client, session, llm, run_tasks, artifact_calls):
    run_with_an_approval(otel, owner_client, session, llm, run_tasks)

    tokens = otel.points("gen_ai.client.token.usage")
    by_type = {}
    for point in tokens:
        by_type.setdefault(point.attributes["gen_ai.token.type"], []).append(point)
    assert set(by_type) == {"input", "output"}
    assert sum(p.count for p in by_type["input"]) == 2  # two model calls
    assert all(p.attributes["gen_ai.provider.name"] == "anthropic" for p in tokens)
    [duration] = otel.points("gen_ai.client.operation.duration")
    assert duration.count == 2
    [runs] = otel.points("ahentic.runs")
    assert (runs.value, runs.attributes["ahentic.run.outcome"]) == (1, "idle")
    [waiting] = otel.points("ahentic.approvals.waiting")
    assert waiting.value == 0  # the run was decided


def test_approvals_waiting_is_read_when_collected(otel, owner_client, session, llm, run_tasks):
    llm.enqueue(tool_reply(tool_call("publish_note", NOTE, id="toolu_publish")))
    post_message(owner_client, session, run_tasks, "Publish")

    [waiting] = otel.points("ahentic.approvals.waiting")
    assert waiting.value == 1


def test_spend_is_counted_by_agent(otel, owner_client, session, llm, run_tasks, settings):
    model = ahentic_settings.MODEL
    prices = {"input": 3, "output": 15, "cache_read": 0.3, "cache_write": 3.75}
    settings.AHENTIC = {**settings.AHENTIC, "PRICES": {model: prices}}
    llm.enqueue(text_reply("Hello."))
    post_message(owner_client, session, run_tasks, "Hi")

    agent = Session.objects.get(pk=session.pk).agent_version.agent.slug
    [spent] = otel.points("ahentic.spend")
    assert spent.attributes["gen_ai.agent.name"] == agent
    assert spent.value > 0


def test_a_task_without_a_trace_context_still_runs(owner_client, session, llm, run_tasks):
    """A step queued before the app carried trace contexts (two arguments) runs as before."""
    llm.enqueue(text_reply("Hello."))
    with mock.patch("orchestrator_app.control.queue.async_task"):
        response = run_tasks(post, owner_client, session, "messages", {"content": "Hi"})
    assert response.status_code == 202
    session.refresh_from_db()
    assert session.status == Session.Status.RUNNING

    tasks.run_step(str(session.pk), session.run_seq)

    session.refresh_from_db()
    assert session.status == Session.Status.IDLE


def test_without_a_recording_span_no_carrier_and_no_content_is_built(
    owner_client, session, llm, run_tasks, settings, monkeypatch
):
    """No SDK (the API's no-op tracer): the task carries nothing, and the content attributes
    are never computed, even with the opt-in (the redaction is never called)."""
    settings.AHENTIC = {**settings.AHENTIC, "OTEL_CAPTURE_CONTENT": True}
    redacted, carried = [], []
    original_redact, original_context = telemetry.redact, telemetry.task_context

    def counting_redact(value):
        redacted.append(value)
        return original_redact(value)

    def counting_context(origin=None):
        found = original_context(origin)
        carried.append(found)
        return found

    monkeypatch.setattr(telemetry, "redact", counting_redact)
    monkeypatch.setattr(telemetry, "task_context", counting_context)
    assert not trace.get_current_span().is_recording()
    llm.enqueue(
        tool_reply(tool_call("echo", {"text": "hi", "password": SECRET}, id="toolu_echo")),
        text_reply("Done."),
    )

    post_message(owner_client, session, run_tasks, "Echo it")

    assert redacted == []
    assert carried and all(c is None for c in carried)


def test_the_trace_context_is_carried_in_the_step_task(
    otel, session, monkeypatch, django_capture_on_commit_callbacks
):
    sent = []
    monkeypatch.setattr(queue, "async_task", lambda *args, **kwargs: sent.append(kwargs))

    with otel.request("POST /messages") as span:
        with django_capture_on_commit_callbacks(execute=True):
            queue.enqueue_step(session.pk, 1)
    with django_capture_on_commit_callbacks(execute=True):
        queue.enqueue_step(session.pk, 1)  # outside any span: nothing is carried

    trace_id = format(span.get_span_context().trace_id, "032x")
    assert sent[0]["trace"]["traceparent"].split("-")[1] == trace_id
    assert "trace" not in sent[1]


def test_a_run_cancelled_while_it_waits_is_counted(otel, owner_client, session, llm, run_tasks):
    llm.enqueue(tool_reply(tool_call("publish_note", NOTE, id="toolu_publish")))
    post_message(owner_client, session, run_tasks, "Publish")

    response = run_tasks(post, owner_client, session, "cancel")

    assert response.status_code in (200, 202), response.content
    [runs] = otel.points("ahentic.runs")
    assert (runs.value, runs.attributes["ahentic.run.outcome"]) == (1, "cancelled")


def test_schedule_firings_are_counted_by_outcome_and_steps_named_by_agent(
    owner, llm, run_tasks, otel
):
    digest = agent_create("digest")
    start = datetime(2026, 5, 4, 9, 0, tzinfo=UTC)
    schedule_create(owner, digest, now=start)
    llm.enqueue(text_reply("Digest: nothing new."))

    fired = run_tasks(
        schedule_tasks.schedule_tick, (start + timedelta(minutes=5, seconds=20)).isoformat()
    )

    assert fired == 1
    [point] = otel.points("ahentic.schedule.firings")
    assert (point.value, point.attributes["ahentic.schedule.outcome"]) == (1, "done")
    step = otel.one("invoke_agent digest")
    assert step.attributes["gen_ai.agent.name"] == "digest"


def test_the_demo_prints_spans_to_the_console_with_one_setting(tmp_path):
    """``AHENTIC_DEMO_OTEL_CONSOLE=1`` (``make demo``): the demo settings install the SDK's
    console exporter. In a process of its own: the global providers are set once."""
    import os
    import subprocess
    import sys

    from tests.support.paths import ROOT

    code = (
        "import django; django.setup()\n"
        "from orchestrator_app import telemetry\n"
        "with telemetry.step_span('s', 1, None, 'demo'):\n"
        "    pass\n"
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "ahentic_site.settings",
        "AHENTIC_VAR_DIR": str(tmp_path),
    }
    # The two processes side by side: each is mostly Django's start-up.
    shown, quiet = (
        subprocess.Popen(
            [sys.executable, "-c", code],
            cwd=ROOT,
            env=process_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for process_env in ({**env, "AHENTIC_DEMO_OTEL_CONSOLE": "1"}, env)
    )
    shown_out, shown_err = shown.communicate(timeout=60)
    quiet_out, _ = quiet.communicate(timeout=60)

    assert shown.returncode == 0, shown_err
    assert '"name": "invoke_agent demo"' in shown_out
    assert (quiet.returncode, quiet_out) == (0, "")


def test_the_demo_sends_spans_over_otlp_with_one_setting(tmp_path):
    """``AHENTIC_DEMO_OTEL_OTLP=1`` (``make demo``): the demo settings send the spans over
    OTLP/HTTP to ``OTEL_EXPORTER_OTLP_ENDPOINT``; here a receiver of the test's own."""
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http.trace_exporter")
    import os
    import subprocess
    import sys
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    from tests.support.paths import ROOT

    received = []

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self):
            received.append((self.path, self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    code = (
        "import django; django.setup()\n"
        "from orchestrator_app import telemetry\n"
        "with telemetry.step_span('s', 1, None, 'demo'):\n"
        "    pass\n"
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "ahentic_site.settings",
        "AHENTIC_VAR_DIR": str(tmp_path),
        "AHENTIC_DEMO_OTEL_OTLP": "1",
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{server.server_port}",
    }
    try:
        sent = subprocess.run(
            [sys.executable, "-c", code],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        server.shutdown()
        server.server_close()

    assert sent.returncode == 0, sent.stderr
    assert [path for path, _ in received] == ["/v1/traces"]
    assert b"invoke_agent demo" in received[0][1]
