"""Personas and clients shared by every test module.

- ``owner``: may use the agent and owns the sessions under test
- ``other``: may use the agent, owns nothing here (ownership tests: 404)
- ``noperm``: logged in without ``sessions_app.use_agent`` (403)
- anonymous: a client that never logged in
"""

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
    from orchestrator_app.localapi import LocalMessagesServer

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
