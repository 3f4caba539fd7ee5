"""The admin side: staff users with model permissions, an agent calling the admin tools, runs
added to a session's admin page, the system check ids, and the sidebar tag rendered."""

import json

import pytest
from django.contrib.auth.models import Permission
from django.core.checks import run_checks
from django.template import Context, Template
from django.test import RequestFactory

from orchestrator_app.testing.localapi import text_reply, tool_call, tool_reply
from sessions_app import services
from sessions_app.models import Event
from sessions_app.services import TraceItem
from tests.support.api import payload_of, session_url
from tests.support.factories import SessionFactory, UserFactory

PAGES = "flatpages.flatpage"
SHELVES = "ahentic_tests.shelf"


def staff(username: str, *codenames: str, agent: bool = True):
    user = UserFactory(username=username, agent_permission=agent, is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    return user


class Agent:
    """One session of ``user``; ``call`` makes the model call a tool and returns its result."""

    def __init__(self, user, client, llm, run_tasks):
        self.user, self.client, self.llm, self.run_tasks = user, client, llm, run_tasks
        self.session = SessionFactory(owner=user)
        self.count = 0

    def post(self, path, data):
        return self.run_tasks(
            self.client.post, session_url(self.session, path), data, format="json"
        )

    def call(self, name: str, input: dict, decision: str | None = "allow_once") -> dict:
        self.count += 1
        call_id = f"toolu_{name}_{self.count}"
        self.llm.enqueue(tool_reply(tool_call(name, input, id=call_id)), text_reply("Done."))
        response = self.post("messages", {"content": f"Please run {name}"})
        assert response.status_code == 202, response.content
        body = payload_of(self.client, self.session)
        if body["status"] == "awaiting_human":
            if not decision:
                return {}  # the card stays; the test decides
            response = self.post("approvals", {"decision": decision})
            assert response.status_code == 200, response.content
        return self.result(call_id)

    def pending(self) -> dict:
        return payload_of(self.client, self.session)["pendingTool"]

    def result(self, call_id: str) -> dict:
        for request in reversed(self.llm.message_requests()):
            for message in request["messages"]:
                for block in message["content"]:
                    if block.get("type") == "tool_result" and block["tool_use_id"] == call_id:
                        return json.loads(block["content"])
        raise AssertionError(f"no result for {call_id}")


def check_ids():
    return {m.id for m in run_checks() if m.id.startswith("ahentic.")}


# Since Django 6.0 the model checks ask every database about its features (tests/test_checks.py).
every_database = pytest.mark.django_db(databases="__all__")


def add_runs(session, runs: int, events: int = 3, trace: int = 2, first: int = 1) -> None:
    for run in range(first, first + runs):
        services.events_append(
            session_id=session.pk,
            items=[
                {"kind": Event.Kind.USER_MESSAGE, "content": f"run {run} message {n}", "run": run}
                for n in range(events)
            ],
        )
        services.trace_records(
            session_id=session.pk,
            items=[
                TraceItem(type="step", summary=f"run {run} step {n}", run=run) for n in range(trace)
            ],
        )


def render_tag(user, source="{% load ahentic %}{% ahentic_sidebar %}") -> str:
    request = RequestFactory().get("/somewhere/")
    request.user = user
    return Template(source).render(Context({"request": request}))
