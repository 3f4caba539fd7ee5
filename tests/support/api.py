"""The HTTP API as the tests drive it: the API root, clients, a session's routes, and the
payload, transcript and trace read back."""

from django.conf import settings
from django.http import HttpRequest
from django.middleware.csrf import get_token
from rest_framework.test import APIClient

API = "/ahentic/v1"


def client_for(user) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_login(user)
    return client


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


def csrf_client(user) -> APIClient:
    """A browser-like client: password login, CSRF enforced as in production."""
    client = APIClient(enforce_csrf_checks=True)
    assert client.login(username=user.username, password="pw")
    return client


def csrf_token_for(client) -> str:
    """Give the client a csrftoken cookie, as a page rendering ``{% csrf_token %}`` would."""
    request = HttpRequest()
    token = get_token(request)
    client.cookies[settings.CSRF_COOKIE_NAME] = request.META["CSRF_COOKIE"]
    return token
