"""Personas and clients shared by every test module.

- ``owner``: may use the agent and owns the sessions under test
- ``other``: may use the agent, owns nothing here (ownership tests: 404)
- ``noperm``: logged in without ``sessions_app.use_agent`` (403)
- anonymous: a client that never logged in

Admin tests use pytest-django's ``admin_client`` (a logged-in superuser).
"""

import os
import re
import sys
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from .factories import SessionFactory, UserFactory

API = "/ahentic/v1"


@pytest.fixture
def owner(db):
    return UserFactory(username="owner", agent_permission=True)


@pytest.fixture
def other(db):
    return UserFactory(username="other", agent_permission=True)


@pytest.fixture
def noperm(db):
    return UserFactory(username="noperm")


def _client_for(user) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_login(user)
    return client


@pytest.fixture
def owner_client(owner):
    return _client_for(owner)


@pytest.fixture
def other_client(other):
    return _client_for(other)


@pytest.fixture
def noperm_client(noperm):
    return _client_for(noperm)


@pytest.fixture
def anon_client(db):
    return _client_for(None)


@pytest.fixture
def session(owner):
    return SessionFactory(owner=owner)


# --- the model: the local Messages API server, reached through the real anthropic SDK ---------


@pytest.fixture(scope="session")
def _llm_server():
    from orchestrator_app.testing.localapi import LocalMessagesServer

    server = LocalMessagesServer().start()
    yield server
    server.stop()


@pytest.fixture
def llm(_llm_server, settings):
    """The local model server, emptied, with AHENTIC pointed at it for this test."""
    _llm_server.reset()
    settings.AHENTIC = {
        **settings.AHENTIC,
        "BASE_URL": _llm_server.url,
        "API_KEY": "test-key",
        "THROTTLE_MESSAGES": None,
    }
    return _llm_server


@pytest.fixture
def run_tasks(django_capture_on_commit_callbacks):
    """Execute enqueued steps (django-q2 sync mode) when the request's transaction commits."""

    def run(fn, *args, **kwargs):
        with django_capture_on_commit_callbacks(execute=True):
            return fn(*args, **kwargs)

    return run


# --- the agent loop: strict model server, tool-call log, API helpers ---------------------------


@pytest.fixture
def llm_strict(llm):
    """``llm``, plus a teardown check that the local server never rejected a request.

    The server answers a malformed request (unanswered tool_use, roles out of order, too many
    cache breakpoints...) with a 400 the product may swallow as a failed run; this makes it fail
    the test instead. Scripted errors are fine: they passed validation (``accepted``).
    """
    yield llm
    rejected = [
        (entry["status"], (entry["response"] or {}).get("error"))
        for entry in llm.requests
        if entry["path"] == "/v1/messages"
        and (
            not entry["accepted"]
            or "localapi internal error"
            in str(((entry["response"] or {}).get("error") or {}).get("message", ""))
        )
    ]
    assert not rejected, f"the local Messages API rejected or dropped requests: {rejected}"


@pytest.fixture
def tool_calls():
    """Executions of the test tools (``tests.tools_for_tests.CALLS``), emptied for this test."""
    from . import tools_for_tests

    tools_for_tests.CALLS.clear()
    yield tools_for_tests.CALLS
    tools_for_tests.CALLS.clear()


def session_url(session, path: str = "") -> str:
    return f"{API}/sessions/{session.pk}{'/' + path if path else ''}"


def post(client, session, path: str, data=None):
    """POST JSON to one of the session's routes."""
    return client.post(session_url(session, path), data or {}, format="json")


def post_message(client, session, run_tasks, content: str, **extra) -> dict:
    """Post a message that starts a run (202), run its steps, and return the payload."""
    response = run_tasks(post, client, session, "messages", {"content": content, **extra})
    assert response.status_code == 202, response.content
    return payload_of(client, session)


def decide(client, session, run_tasks, decision: str = "allow_once", **extra) -> dict:
    """Answer the pending approval (200), run the steps it enqueues, return the payload."""
    response = run_tasks(post, client, session, "approvals", {"decision": decision, **extra})
    assert response.status_code == 200, response.content
    return payload_of(client, session)


def result_of(request: dict, call_id: str) -> dict:
    """The tool_result block answering ``call_id`` in a request the model received."""
    [block] = [
        block
        for message in request["messages"]
        for block in message["content"]
        if block["type"] == "tool_result" and block["tool_use_id"] == call_id
    ]
    return block


def payload_of(client, session) -> dict:
    response = client.get(session_url(session))
    assert response.status_code == 200, response.content
    return response.json()


def transcript_of(client, session) -> list[dict]:
    """Every message of the session in the debug view, chronological."""
    response = client.get(session_url(session, "messages") + "?view=debug&limit=100")
    assert response.status_code == 200, response.content
    return response.json()["messages"]


def trace_types(client, session) -> list[str]:
    """The full trace (diagnostics export), as a list of event types, oldest first."""
    response = client.get(session_url(session, "diagnostics"))
    assert response.status_code == 200, response.content
    return [row["type"] for row in response.json()["trace"]]


# --- artifacts, HITL and browser tools ---------------------------------------------------------


@pytest.fixture
def artifact_calls():
    """Executions of the artifact test tools (``tests.tools_for_artifacts.CALLS``), emptied."""
    from . import tools_for_artifacts

    tools_for_artifacts.CALLS.clear()
    yield tools_for_artifacts.CALLS
    tools_for_artifacts.CALLS.clear()


# --- context, memory and naming: the main model and the brain model answered apart -------------


class ModelScript:
    """A responder for the local server that tells the two models apart.

    Requests for ``AHENTIC["MODEL"]`` get ``main`` replies in order (then "Done."); requests for
    ``BRAIN_MODEL`` (naming, memory snapshots) get ``brain(body)``. Background brain calls run
    between steps, so a FIFO script shared by both models would hand them the step's replies.
    """

    def __init__(self, brain_model: str):
        from collections import deque

        from orchestrator_app.testing.localapi import text_reply

        self.brain_model = brain_model
        self.main = deque()
        self.brain = lambda body: text_reply("Brain says hello.")

    def __call__(self, body):
        from orchestrator_app.testing.localapi import text_reply

        if body["model"] == self.brain_model:
            return self.brain(body)
        return self.main.popleft() if self.main else text_reply("Done.")


@pytest.fixture
def model_script(llm):
    """``llm`` answered by a ``ModelScript``: ``model_script.main.extend([...])`` scripts the
    agent, ``model_script.brain = lambda body: ...`` the brain model."""
    from sessions_app.conf import ahentic_settings

    script = ModelScript(ahentic_settings.BRAIN_MODEL)
    llm.responder = script
    return script


def model_requests(llm, model: str) -> list[dict]:
    """Accepted ``/v1/messages`` entries (``json`` body and ``response``) for one model."""
    return [
        entry
        for entry in llm.requests
        if entry["path"] == "/v1/messages" and entry["accepted"] and entry["json"]["model"] == model
    ]


def without_cache_control(value):
    """A request body (or part) with every ``cache_control`` marker removed."""
    if isinstance(value, dict):
        return {k: without_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [without_cache_control(v) for v in value]
    return value


# --- one writer for the session row -------------------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent
APP_DIRS = tuple(
    str(ROOT / app) + os.sep for app in ("sessions_app", "artifacts_app", "orchestrator_app")
)
SESSION_WRITER = str(ROOT / "sessions_app" / "runstate.py")
SESSION_UPDATE = re.compile(r'^\s*UPDATE\s+["`]?sessions_app_session["`]?\s', re.IGNORECASE)


class SessionUpdateOrigins:
    """Records which source file issued each UPDATE of the session table: the innermost frame
    of the project's own code (an app module, or a test setting up a state)."""

    def __init__(self):
        self.origins: list[str] = []

    def __call__(self, execute, sql, params, many, context):
        if SESSION_UPDATE.match(sql):
            frame = sys._getframe(1)
            while frame is not None:
                name = frame.f_code.co_filename
                if name.startswith(str(ROOT)) and name != __file__ and ".venv" not in name:
                    self.origins.append(name)
                    break
                frame = frame.f_back
        return execute(sql, params, many, context)

    def outside_the_writer(self) -> list[str]:
        # A data migration writes through the historical models, as migrations must.
        migration = f"{os.sep}migrations{os.sep}"
        return sorted(
            {
                o
                for o in self.origins
                if o.startswith(APP_DIRS) and o != SESSION_WRITER and migration not in o
            }
        )


@pytest.fixture(autouse=True)
def session_update_origins(request):
    """Every test also checks that only ``sessions_app/runstate.py`` updates the session row."""
    from django.db import connection

    origins = SessionUpdateOrigins()
    with connection.execute_wrapper(origins):
        yield origins
    strays = origins.outside_the_writer()
    assert not strays, f"session table updated outside sessions_app/runstate.py: {strays}"


@pytest.fixture(autouse=True)
def clear_caches():
    """Every test starts with empty caches (the payload cache, the cached permission answers):
    nothing a test sees was left there by another."""
    from django.conf import settings
    from django.core.cache import caches

    from sessions_app import agents

    for alias in settings.CACHES:
        caches[alias].clear()
    agents.clear_cache()  # agent versions by id: ids come again in rolled-back tests


@pytest.fixture(autouse=True)
def site_language():
    """Every test starts in the site's language: a request through LocaleMiddleware leaves its
    language active on the thread, which would otherwise carry into the next test."""
    from django.utils import translation

    translation.deactivate()
    yield
    translation.deactivate()


# --- OpenTelemetry: the SDK's in-memory exporters ---------------------------------------------


class Otel:
    """An SDK tracer provider and meter provider recording in memory, and their readers."""

    def __init__(self):
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meters = MeterProvider(metric_readers=[self.reader])
        # The host's own instrumentation (its web requests' server spans).
        self.host = self.provider.get_tracer("host")

    def spans(self, prefix: str = "") -> list:
        return [s for s in self.exporter.get_finished_spans() if s.name.startswith(prefix)]

    def one(self, name: str):
        [span] = self.spans(name)
        return span

    def points(self, name: str) -> list:
        data = self.reader.get_metrics_data()
        return [
            point
            for resource in (data.resource_metrics if data else [])
            for scope in resource.scope_metrics
            for found in scope.metrics
            if found.name == name
            for point in found.data.data_points
        ]

    def request(self, name: str):
        from opentelemetry.trace import SpanKind

        return self.host.start_as_current_span(name, kind=SpanKind.SERVER)


@pytest.fixture
def otel(monkeypatch):
    """The app's tracer and instruments (``orchestrator_app.telemetry``) from a test SDK
    provider, for this test only: the global providers stay the API's no-ops."""
    from orchestrator_app import telemetry

    found = Otel()
    monkeypatch.setattr(telemetry, "tracer", found.provider.get_tracer("django-ahentic"))
    monkeypatch.setattr(
        telemetry, "metric", telemetry.Instruments(found.meters.get_meter("django-ahentic"))
    )
    yield found
    found.meters.shutdown()
    found.provider.shutdown()
