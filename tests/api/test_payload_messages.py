"""The payload's messages are rendered once and kept by the session's edit version and last seq:
the first poll after a change reads and renders only the events past the kept ones, and an
edit of an earlier event (the admin, retention) is rendered again."""

import pytest
from django.conf import settings
from django.core.cache import cache
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from sessions_app import services
from sessions_app.models import Event
from tests.support.api import API
from tests.support.factories import UserFactory
from tests.support.runs import remembered


def ahentic(**overrides):
    return override_settings(AHENTIC={**settings.AHENTIC, **overrides})


def poll(client, session) -> dict:
    response = client.get(f"{API}/sessions/{session.pk}")
    assert response.status_code == 200, response.content
    return response.json()


def built_afresh(client, session) -> dict:
    """The payload as a process with nothing kept would build it."""
    cache.clear()
    return poll(client, session)


def shown(payload: dict) -> tuple[list[tuple[int, str, str]], bool]:
    return [(m["seq"], m["kind"], m["content"]) for m in payload["messages"]], payload["hasMore"]


def event_reads(queries) -> list[str]:
    """The statements that read events, names quoted with double quotes whatever the database
    quotes them with (MySQL and MariaDB: backticks)."""
    statements = [q["sql"].replace("`", '"') for q in queries.captured_queries]
    return [sql for sql in statements if '"sessions_app_event"' in sql]


def append_turn(session, i: int) -> None:
    """A user message, a tool call and its answer (tool traffic: not in the basic view), and
    the reply."""
    call = f"toolu_{i}"
    services.events_append(
        session_id=session.pk,
        items=[
            {"kind": "user_message", "content": f"question {i}"},
            {
                "kind": "tool_call",
                "content": "{}",
                "payload": {"tool": "echo", "input": {"text": str(i)}},
                "tool_use_id": call,
            },
            {
                "kind": "tool_response",
                "content": f"result {i}",
                "payload": {"tool": "echo", "ok": True},
                "tool_use_id": call,
            },
            {"kind": "agent_message", "content": f"answer {i}"},
        ],
    )


@ahentic(MESSAGES_WINDOW=5)
@pytest.mark.parametrize("view_mode", ["basic", "debug"])
def test_polls_between_changes_show_what_a_fresh_build_shows(owner_client, session, view_mode):
    assert (
        owner_client.patch(
            f"{API}/sessions/{session.pk}", {"viewMode": view_mode}, format="json"
        ).status_code
        == 200
    )
    assert shown(poll(owner_client, session)) == ([], False)
    for i in range(4):
        append_turn(session, i)
        kept = shown(poll(owner_client, session))
        assert kept == shown(built_afresh(owner_client, session))
        poll(owner_client, session)  # kept again for the next round
    seqs = [seq for seq, _, _ in kept[0]]
    assert len(seqs) == 5 and kept[1] is True
    assert seqs == sorted(seqs) and seqs[-1] == 16


@ahentic(MESSAGES_WINDOW=5)
def test_a_poll_after_a_change_reads_only_the_new_events(owner_client, session):
    append_turn(session, 0)
    poll(owner_client, session)
    services.event_append(session_id=session.pk, kind="agent_message", content="one more")

    with CaptureQueriesContext(connection) as queries:
        payload = poll(owner_client, session)

    [read] = event_reads(queries)
    assert '"seq" > 4' in read
    assert [m["content"] for m in payload["messages"]][-2:] == ["answer 0", "one more"]


@ahentic(MESSAGES_WINDOW=5)
def test_a_change_that_adds_no_event_reads_no_event(owner_client, session):
    append_turn(session, 0)
    before = poll(owner_client, session)
    renamed = owner_client.patch(
        f"{API}/sessions/{session.pk}", {"title": "Renamed"}, format="json"
    )
    assert renamed.status_code == 200

    with CaptureQueriesContext(connection) as queries:
        payload = poll(owner_client, session)

    assert payload["title"] == "Renamed" and payload["version"] > before["version"]
    assert event_reads(queries) == []
    assert shown(payload) == shown(before)


@ahentic(MESSAGES_WINDOW=5)
def test_more_new_events_than_the_window_replace_the_kept_ones(owner_client, session):
    append_turn(session, 0)
    poll(owner_client, session)
    for i in range(1, 4):
        append_turn(session, i)

    payload = poll(owner_client, session)

    assert shown(payload) == shown(built_afresh(owner_client, session))
    assert payload["hasMore"] is True


def test_an_event_edited_in_the_admin_is_shown_edited_at_the_next_poll(
    owner_client, session, client
):
    append_turn(session, 0)
    assert "question 0" in [m["content"] for m in poll(owner_client, session)["messages"]]
    staff = UserFactory(username="repairer", is_staff=True, is_superuser=True)
    client.force_login(staff)
    event = Event.objects.get(session=session, kind=Event.Kind.USER_MESSAGE)
    saved = client.post(
        f"/admin/sessions_app/event/{event.pk}/change/",
        {"content": "question [redacted]", "_save": "Save"},
    )
    assert saved.status_code == 302, saved.content

    contents = [m["content"] for m in poll(owner_client, session)["messages"]]

    assert "question [redacted]" in contents and "question 0" not in contents


@ahentic(ENTRY_RETENTION=5, MESSAGES_WINDOW=5)
def test_events_pruned_by_retention_leave_the_kept_window(owner_client, session):
    for i in range(7):
        services.event_append(session_id=session.pk, kind="user_message", content=f"m{i + 1}")
    assert shown(poll(owner_client, session))[1] is True
    remembered(session, through_seq=7)
    for i in range(5):
        services.event_append(
            session_id=session.pk, kind="user_message", content=f"n{i + 1}", prune=True
        )

    payload = poll(owner_client, session)

    assert shown(payload) == shown(built_afresh(owner_client, session))
