"""Workers keep the stable rows of a window between steps (``orchestrator_app.window``).

The requests a run sends must not depend on which worker ran which step, or on how old the rows
a worker kept are: the same conversation is run twice, once by workers that keep nothing and
once by two workers taking turns (each comes back with rows kept several steps earlier, while
the other wrote started markers and step context), and the model must receive the same bodies.
What a worker keeps is bounded, and nothing it keeps holds on to a finished thread's database
connection.
"""

import gc
import itertools
import json
import re
import threading
import weakref
from unittest import mock

import pytest
from django.db import connections

from orchestrator_app import runs, tasks, window
from orchestrator_app.testing.localapi import text_reply, tool_call, tool_reply
from sessions_app.conf import ahentic_settings
from sessions_app.models import Goal
from sessions_app.services import session_create

from .conftest import decide, model_requests, payload_of, post_message

pytestmark = pytest.mark.usefixtures("llm_strict")


def script():
    """Steps whose step context changes (a new goal is stored with the next tool result) and
    that pause for approval (the call is started by the step after the decision)."""
    return [
        tool_reply(tool_call("echo", {"text": "one"}, id="toolu_w1")),
        tool_reply(tool_call("set_goal", {"description": "First"}, id="toolu_w2"), text="Go."),
        tool_reply(tool_call("echo", {"text": "two"}, id="toolu_w3")),
        tool_reply(tool_call("set_goal", {"description": "Second"}, id="toolu_w4")),
        tool_reply(tool_call("notes_create", {"title": "A"}, id="toolu_w5")),  # approval
        text_reply("Noted."),
        tool_reply(tool_call("set_goal", {"description": "Third"}, id="toolu_w6")),
        tool_reply(tool_call("echo", {"text": "three"}, id="toolu_w7")),
        tool_reply(tool_call("notes_create", {"title": "B"}, id="toolu_w8")),  # approval
        tool_reply(tool_call("set_goal", {"description": "Fourth"}, id="toolu_w9")),
        text_reply("All done."),
    ]


def converse(client, session, run_tasks) -> None:
    post_message(client, session, run_tasks, "Do the first job")
    assert payload_of(client, session)["status"] == "awaiting_human"
    decide(client, session, run_tasks)
    assert payload_of(client, session)["status"] == "idle"
    post_message(client, session, run_tasks, "And the second")
    assert payload_of(client, session)["status"] == "awaiting_human"
    decide(client, session, run_tasks)
    assert payload_of(client, session)["status"] == "idle"


def step_bodies(llm, session) -> list[str]:
    """The step requests' bodies, with the session's goal ids counted from its first goal
    (``#1`` in the step context, ``"id": 1`` in set_goal's result): the two sessions' goals
    have different primary keys."""
    first = Goal.objects.filter(session=session).order_by("pk").values_list("pk", flat=True)[0]

    def renumber(match: re.Match) -> str:
        return f"{match[1]}{int(match[2]) - first + 1}"

    return [
        re.sub(r'(#|\\"id\\": )(\d+)(?= |, \\"description)', renumber, json.dumps(entry["json"]))
        for entry in model_requests(llm, ahentic_settings.MODEL)
    ]


@pytest.fixture
def read_rows(monkeypatch):
    """How many rows each window read took from the database."""
    counts: list[int] = []
    original = window.event_rows

    def counted(*args, **kwargs):
        rows = original(*args, **kwargs)
        counts.append(len(rows))
        return rows

    monkeypatch.setattr(window, "event_rows", counted)
    return counts


def test_a_run_sends_the_same_requests_whichever_worker_kept_which_rows(
    owner, owner_client, llm, run_tasks, tool_calls, monkeypatch, read_rows
):
    # Workers that keep nothing: every step reads its whole window.
    keep_tokens = window.KEEP_TOKENS
    monkeypatch.setattr(window, "KEEP_TOKENS", 0)
    llm.enqueue(*script())
    fresh_session = session_create(owner=owner)
    converse(owner_client, fresh_session, run_tasks)
    fresh = step_bodies(llm, fresh_session)
    assert len(fresh) == 11
    fresh_reads = list(read_rows)

    # Two workers taking turns: A, B, B, A, A, B, B, A... Each keeps its own rows.
    monkeypatch.setattr(window, "KEEP_TOKENS", keep_tokens)
    llm.reset()
    read_rows.clear()
    tool_calls.clear()  # notes_create answers with the number of calls so far
    llm.enqueue(*script())
    workers = {"A": window._Keeper(), "B": window._Keeper()}
    order = itertools.cycle("ABBA")
    run_step = tasks.run_step

    def on_a_worker(session_id, run_seq):
        monkeypatch.setattr(window, "_keeper", workers[next(order)])
        run_step(session_id, run_seq)

    monkeypatch.setattr(tasks, "run_step", on_a_worker)
    taking_turns = session_create(owner=owner)
    converse(owner_client, taking_turns, run_tasks)

    assert step_bodies(llm, taking_turns) == fresh
    # The rows kept were used: later steps read fewer rows than their window holds.
    assert sum(read_rows) < sum(fresh_reads)
    assert len(read_rows) == len(fresh_reads)


def test_a_worker_keeps_at_most_keep_tokens_and_drops_the_least_recent_session_first(
    owner, owner_client, llm, run_tasks, monkeypatch, read_rows
):
    monkeypatch.setattr(window, "_keeper", window._Keeper())
    first, second = session_create(owner=owner), session_create(owner=owner)
    llm.enqueue(tool_reply(tool_call("echo", {"text": "a"})), text_reply("A."))
    post_message(owner_client, first, run_tasks, "First chat")
    kept = window._keeper.tokens  # the first chat's stable rows
    assert kept > 0
    # Room for one chat's rows: keeping the second's drops the first's.
    monkeypatch.setattr(window, "KEEP_TOKENS", kept + 5)
    llm.enqueue(tool_reply(tool_call("echo", {"text": "b"})), text_reply("B."))
    post_message(owner_client, second, run_tasks, "Second chat")
    assert window._keeper.tokens <= window.KEEP_TOKENS

    read_rows.clear()
    llm.enqueue(text_reply("Again."))
    post_message(owner_client, first, run_tasks, "First chat again")
    # The first chat's step read its whole window again: 4 events and the new message.
    assert read_rows == [5]


@pytest.mark.django_db(transaction=True)
def test_what_a_worker_keeps_does_not_keep_a_finished_threads_database_connection(
    owner, llm, tool_calls
):
    """A step run in a thread of its own leaves nothing that holds the thread's connection:
    it is closed when the thread's objects are collected, as the ORM leaves it (an open one
    would stay a database session for good)."""
    session = session_create(owner=owner)
    llm.enqueue(tool_reply(tool_call("echo", {"text": "x"})), text_reply("Done."))
    with mock.patch("orchestrator_app.queue.async_task"):
        runs.message_post(session=session, content="Go")
    held = []

    def worker():
        tasks.run_step(str(session.pk), 1)
        held.append(weakref.ref(connections["default"]))

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join(30)
    del thread
    gc.collect()

    assert held and held[0]() is None
