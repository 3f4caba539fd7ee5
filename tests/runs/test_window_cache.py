"""A worker keeps the window's rows between steps and reads only what changed; every write that
changes an earlier event moves the session's edit version, so no worker ever sends a stale row.
Also the drift the public ORM removed: a None in a filter, and retention's delete signals."""

import dataclasses
import json
from unittest import mock

import pytest
from django.db.models.signals import post_delete

from orchestrator_app import tasks
from orchestrator_app.testing.localapi import text_reply, tool_call, tool_reply
from sessions_app import runstate, services, window
from sessions_app.models import Event, Session
from tests.support.api import post
from tests.support.factories import UserFactory


@pytest.fixture
def fresh_windows():
    """This process's kept windows, emptied for the test (and after it)."""
    window.windows.clear()
    yield window.windows
    window.windows.clear()


def step(session) -> None:
    """Run the session's next step here, as a worker would (the next one is not enqueued)."""
    run_seq = Session.objects.values_list("run_seq", flat=True).get(pk=session.pk)
    with mock.patch("orchestrator_app.control.queue.async_task"):
        tasks.run_step(str(session.pk), run_seq)


def start(owner_client, session, content: str) -> None:
    with mock.patch("orchestrator_app.control.queue.async_task"):
        assert post(owner_client, session, "messages", {"content": content}).status_code == 202


def texts(request: dict) -> str:
    return json.dumps(request["messages"])


def test_an_event_edited_in_the_admin_between_two_steps_reaches_the_next_request(
    owner_client, session, llm, tool_calls, client, fresh_windows
):
    llm.enqueue(tool_reply(tool_call("echo", {"text": "one"})), text_reply("Done."))
    start(owner_client, session, "My card number is 4111 1111 1111 1111")
    step(session)  # the tool step: this worker keeps the window now
    assert fresh_windows.get(session.pk) is not None

    staff = UserFactory(username="repairer", is_staff=True, is_superuser=True)
    client.force_login(staff)
    event = Event.objects.get(session=session, kind=Event.Kind.USER_MESSAGE)
    url = f"/admin/sessions_app/event/{event.pk}/change/"
    saved = client.post(url, {"content": "My card number is [redacted]", "_save": "Save"})
    assert saved.status_code == 302, saved.content
    step(session)

    last = llm.message_requests()[-1]
    assert "[redacted]" in texts(last)
    assert "4111" not in texts(last)


def test_two_workers_each_read_what_the_other_wrote(
    owner_client, session, llm, tool_calls, fresh_windows
):
    """Worker A runs the first step and keeps the window; worker B (its own process: its own
    kept windows) runs the second, which appends a turn and stores a new step context with an
    earlier event; A then runs the third and must send what B wrote."""
    llm.enqueue(
        tool_reply(tool_call("echo", {"text": "one"}, id="toolu_one")),
        tool_reply(tool_call("echo", {"text": "two"}, id="toolu_two")),
        text_reply("Done."),
    )
    start(owner_client, session, "Echo twice")
    step(session)  # worker A
    # A goal makes the next step context differ, so B stores it with step one's answer.
    services.goal_create(session_id=session.pk, description="Echo both words")
    worker_b = window.WindowCache()
    with mock.patch.object(window, "windows", worker_b):
        step(session)
    assert worker_b.get(session.pk) is not None
    step(session)  # worker A again, with what it kept from the first step

    first, second, third = llm.message_requests()
    assert "Echo both words" in texts(second)
    # What a fresh read gives: B's turn and answer, and the context B stored with step one's
    # answer (an earlier event, changed after A read it).
    assert "toolu_two" in texts(third)
    answer_of_one = next(
        message
        for message in third["messages"]
        if any(b.get("tool_use_id") == "toolu_one" for b in message["content"])
    )
    assert "Echo both words" in json.dumps(answer_of_one)


def test_kept_rows_are_immutable_and_every_read_gets_its_own_list(session, fresh_windows):
    services.event_append(session_id=session.pk, kind="user_message", content="Hi")
    stored = Session.objects.get(pk=session.pk)
    values = {"edit_version": stored.edit_version, "last_seq": stored.last_seq, "from_id": None}
    rows = fresh_windows.rows(session.pk, **values)
    with pytest.raises(dataclasses.FrozenInstanceError):
        rows[0].content = "changed"
    rows.append(rows[0])
    assert len(fresh_windows.rows(session.pk, **values)) == 1


def test_the_kept_windows_are_bounded_by_sessions_and_by_size(owner, db):
    kept = window.WindowCache(max_sessions=2, max_tokens=10**6)
    sessions = [services.session_create(owner=owner) for _ in range(3)]
    for s in sessions:
        services.event_append(session_id=s.pk, kind="user_message", content="Hello there")
        kept.rows(s.pk, edit_version=0, last_seq=1, from_id=None)
    assert [kept.get(s.pk) is not None for s in sessions] == [False, True, True]

    small = window.WindowCache(max_sessions=10, max_tokens=1)
    for s in sessions:
        small.rows(s.pk, edit_version=0, last_seq=1, from_id=None)
    # Over the size bound, only the window just read stays.
    assert [small.get(s.pk) is not None for s in sessions] == [False, False, True]


def test_a_new_row_is_read_alone_and_an_unchanged_window_not_at_all(
    session, fresh_windows, django_assert_num_queries
):
    services.event_append(session_id=session.pk, kind="user_message", content="One")
    stored = Session.objects.get(pk=session.pk)
    fresh_windows.rows(
        session.pk, edit_version=stored.edit_version, last_seq=stored.last_seq, from_id=None
    )
    services.event_append(session_id=session.pk, kind="agent_message", content="Two")
    stored = Session.objects.get(pk=session.pk)
    values = {"edit_version": stored.edit_version, "last_seq": stored.last_seq, "from_id": None}
    with django_assert_num_queries(1) as queries:
        rows = fresh_windows.rows(session.pk, **values)
    assert [r.content for r in rows] == ["One", "Two"]
    # Quoted as the database quotes names (MySQL and MariaDB with backticks).
    assert '"seq" > 1' in queries.captured_queries[0]["sql"].replace("`", '"')
    with django_assert_num_queries(0):
        assert fresh_windows.rows(session.pk, **values) == rows


# --- the drift the public ORM removed ----------------------------------------------------------


def test_a_none_in_a_writers_guard_matches_a_null_column_as_the_orm_does(session):
    """The run-state writers filter with the ORM: ``None`` means IS NULL (it was ``= NULL``,
    which matches nothing, when the statements were compiled by hand)."""
    assert Session.objects.get(pk=session.pk).viewport_start_event_id is None
    written = runstate._write(
        {"pk": session.pk, "viewport_start_event_id": None},
        session.pk,
        {"active_workflow": "drafting"},
        visible=False,
    )
    assert written
    assert Session.objects.get(pk=session.pk).active_workflow == "drafting"


def test_retention_sends_a_hosts_delete_signals_for_the_pruned_events(
    owner_client, session, llm, tool_calls, settings
):
    settings.AHENTIC = {**settings.AHENTIC, "ENTRY_RETENTION": 4}
    old = services.events_append(
        session_id=session.pk,
        items=[{"kind": "user_message", "content": f"Earlier {i}"} for i in range(10)],
    )
    services.snapshot_add(
        session_id=session.pk, level=1, from_event_id=old[0].pk, to_event_id=old[-1].pk, text="…"
    )
    deleted: list[int] = []

    def receiver(sender, instance, **kwargs):
        deleted.append(instance.pk)

    post_delete.connect(receiver, sender=Event)
    try:
        llm.enqueue(text_reply("Done."))
        start(owner_client, session, "Hello")
        step(session)
    finally:
        post_delete.disconnect(receiver, sender=Event)

    pruned = [e.pk for e in old if not Event.objects.filter(pk=e.pk).exists()]
    assert pruned and sorted(deleted) == pruned
