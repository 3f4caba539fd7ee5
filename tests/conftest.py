"""Personas and clients shared by every test module.

- ``owner``: may use the agent and owns the sessions under test
- ``other``: may use the agent, owns nothing here (ownership tests: 404)
- ``noperm``: logged in without ``sessions_app.use_agent`` (403)
- anonymous: a client that never logged in

Admin tests use pytest-django's ``admin_client`` (a logged-in superuser).
"""

import pytest
from django.db import connection

from sessions_app import runstate, services
from sessions_app.models import Event
from tests.support.api import client_for
from tests.support.factories import ArtifactFactory, GoalFactory, SessionFactory, UserFactory
from tests.support.guards import SessionUpdateOrigins
from tests.support.model import ModelScript
from tests.support.telemetry import Otel
from tests.support.workers import Workers


@pytest.fixture
def owner(db):
    return UserFactory(username="owner", agent_permission=True)


@pytest.fixture
def other(db):
    return UserFactory(username="other", agent_permission=True)


@pytest.fixture
def noperm(db):
    return UserFactory(username="noperm")


@pytest.fixture
def owner_client(owner):
    return client_for(owner)


@pytest.fixture
def other_client(other):
    return client_for(other)


@pytest.fixture
def noperm_client(noperm):
    return client_for(noperm)


@pytest.fixture
def anon_client(db):
    return client_for(None)


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
    """Executions of the test tools (``tests.support.tools_for_tests.CALLS``), emptied for this test."""
    from tests.support import tools_for_tests

    tools_for_tests.CALLS.clear()
    yield tools_for_tests.CALLS
    tools_for_tests.CALLS.clear()


# --- artifacts, HITL and browser tools ---------------------------------------------------------


@pytest.fixture
def artifact_calls():
    """Executions of the artifact test tools (``tests.support.tools_for_artifacts.CALLS``), emptied."""
    from tests.support import tools_for_artifacts

    tools_for_artifacts.CALLS.clear()
    yield tools_for_artifacts.CALLS
    tools_for_artifacts.CALLS.clear()


# --- context, memory and naming: the main model and the brain model answered apart -------------


@pytest.fixture
def model_script(llm):
    """``llm`` answered by a ``ModelScript``: ``model_script.main.extend([...])`` scripts the
    agent, ``model_script.brain = lambda body: ...`` the brain model."""
    from sessions_app.conf import ahentic_settings

    script = ModelScript(ahentic_settings.BRAIN_MODEL)
    llm.responder = script
    return script


# --- one writer for the session row -------------------------------------------------------------


@pytest.fixture(autouse=True)
def session_update_origins(request):
    """Every test also checks that only ``sessions_app/runstate.py`` updates the session row."""

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


@pytest.fixture
def inspected(session):
    """A session with something in every section of its admin page."""
    runstate.session_update(
        session_id=session.pk,
        plan={
            "title": "Launch plan",
            "steps": [{"id": "s1", "content": "Draft", "status": "done"}],
        },
    )
    services.events_append(
        session_id=session.pk,
        items=[
            {"kind": Event.Kind.USER_MESSAGE, "content": "<script>alert('owned')</script>"},
            {
                "kind": Event.Kind.TOOL_CALL,
                "content": "calling",
                "payload": {"tool": "create_page", "input": {"title": "About"}},
                "tool_use_id": "toolu_1",
            },
        ],
    )
    services.trace_record(session_id=session.pk, type="run_start", summary="<b>bold</b> start")
    services.pending_message_add(session_id=session.pk, content="queued while busy")
    GoalFactory(session=session, description="Publish the about page")
    ArtifactFactory(session=session, key="about-draft")
    return session


@pytest.fixture
def workers(transactional_db, llm, tmp_path):
    pool = Workers(llm, tmp_path)
    try:
        yield pool
    finally:
        pool.stop_all()
