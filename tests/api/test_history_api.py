"""The history panel's API: every chat listed page by page, search by title and message text,
rename, delete with an undo window, restore, the purge."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from orchestrator_app import tasks
from orchestrator_app.checks import check_history
from sessions_app import runstate, services
from sessions_app.models import Event, Session
from tests.support.api import API
from tests.support.factories import SessionFactory, agent_create


def listed(client, query=""):
    response = client.get(f"{API}/sessions{query}")
    assert response.status_code == 200, response.json()
    return response.json()


def titles(client, query=""):
    return [row["title"] for row in listed(client, query)["sessions"]]


def say(session, *texts, kind=Event.Kind.USER_MESSAGE):
    services.events_append(
        session_id=session.pk, items=[{"kind": kind, "content": text} for text in texts]
    )


def purge_later(days=1):
    return tasks.purge_deleted_chats((timezone.now() + timedelta(days=days)).isoformat())


# Listing every chat


def test_it_lists_every_chat_page_by_page_with_load_more(owner_client, owner):
    for n in range(7):
        SessionFactory(owner=owner, title=f"Chat {n}")

    seen, cursor, pages = [], "", 0
    while True:
        page = listed(owner_client, f"?limit=3&cursor={cursor}")
        seen += [row["title"] for row in page["sessions"]]
        pages += 1
        if not page["hasMore"]:
            assert page["nextCursor"] is None
            break
        cursor = page["nextCursor"]

    assert pages == 3
    assert sorted(seen) == [f"Chat {n}" for n in range(7)]
    assert len(set(seen)) == 7


def test_each_row_has_its_agent_and_times(owner_client, owner):
    agent_create("writer", name="Writer", colour="#336699")
    created = owner_client.post(f"{API}/sessions", {"agent": "writer"}, format="json").json()

    [row] = listed(owner_client)["sessions"]

    assert row["id"] == created["id"]
    assert row["agent"] == {"slug": "writer", "name": "Writer", "colour": "#336699", "version": 1}
    assert row["createdAt"] and row["modifiedAt"] >= row["createdAt"]
    assert row["match"] is None


def test_the_list_costs_the_same_queries_for_3_chats_as_for_40(owner_client, owner):
    agent = agent_create("helper", name="Helper")

    def count(query):
        owner_client.get(f"{API}/tools")  # the permission answer is read once, then cached
        with CaptureQueriesContext(connection) as queries:
            page = listed(owner_client, query)
        return len(queries), len(page["sessions"])

    for _ in range(3):
        say(SessionFactory(owner=owner, agent_version=agent.versions.first()), "needle here")
    few = count("?q=needle")
    few_plain = count("")
    for _ in range(37):
        say(SessionFactory(owner=owner, agent_version=agent.versions.first()), "needle here")
    many = count("?q=needle")
    many_plain = count("")

    assert few[1] == few_plain[1] == 3 and many[1] == many_plain[1] == 40
    assert few[0] == many[0] <= 4
    assert few_plain[0] == many_plain[0] <= 4


# Search


def test_search_finds_chats_by_title_and_by_any_message_not_only_loaded_ones(owner_client, owner):
    SessionFactory(owner=owner, title="Quarterly Budget")
    by_text = SessionFactory(owner=owner, title="Untitled")
    say(by_text, *[f"filler {n}" for n in range(120)])  # more than a transcript page
    say(by_text, "the old budget numbers are wrong", kind=Event.Kind.AGENT_MESSAGE)
    say(by_text, *[f"later {n}" for n in range(120)])
    SessionFactory(owner=owner, title="Holidays")

    found = listed(owner_client, "?q=BUDGET")["sessions"]

    assert {row["title"] for row in found} == {"Quarterly Budget", "Untitled"}
    match = {row["title"]: row["match"] for row in found}
    assert match["Quarterly Budget"] is None  # only the title matched
    assert "old budget numbers" in match["Untitled"]


def test_search_shows_the_text_around_a_match_deep_in_a_long_message(owner_client, owner):
    chat = SessionFactory(owner=owner, title="Long")
    say(chat, "x" * 5000 + " the word zebra appears " + "y" * 5000)

    [row] = listed(owner_client, "?q=zebra")["sessions"]

    assert "the word zebra appears" in row["match"]
    assert len(row["match"]) <= 180


def test_search_ignores_tool_calls_other_users_and_sub_agents(owner_client, owner, other):
    mine = SessionFactory(owner=owner, title="Mine")
    say(mine, "secret-word in a tool result", kind=Event.Kind.TOOL_RESPONSE)
    theirs = SessionFactory(owner=other, title="Theirs")
    say(theirs, "secret-word")
    child = SessionFactory(owner=owner, parent=mine, title="Child")
    say(child, "secret-word")

    assert titles(owner_client, "?q=secret-word") == []


def test_search_pages_like_the_list(owner_client, owner):
    for n in range(5):
        say(SessionFactory(owner=owner, title=f"Chat {n}"), "kiwi")
    SessionFactory(owner=owner, title="Other")

    first = listed(owner_client, "?q=kiwi&limit=3")
    second = listed(owner_client, f"?q=kiwi&limit=3&cursor={first['nextCursor']}")

    assert first["hasMore"] and not second["hasMore"]
    names = [row["title"] for row in first["sessions"] + second["sessions"]]
    assert sorted(names) == [f"Chat {n}" for n in range(5)]


@pytest.mark.parametrize("query", ["?q=" + "a" * 201, "?q=%00"])
def test_a_bad_search_is_a_400_with_a_stable_code(owner_client, owner, query):
    response = owner_client.get(f"{API}/sessions{query}")

    assert response.status_code == 400
    assert response.json()["code"] == "ahentic_invalid_input"


# Rename


def test_a_rename_is_kept_and_listed(owner_client, session):
    response = owner_client.patch(
        f"{API}/sessions/{session.pk}", {"title": "  Trip to Rome  "}, format="json"
    )

    assert response.status_code == 200
    assert response.json()["title"] == "Trip to Rome"
    assert titles(owner_client) == ["Trip to Rome"]
    assert Session.objects.get(pk=session.pk).title_source == Session.TitleSource.USER


def test_a_blank_rename_is_refused_and_changes_nothing(owner_client, session):
    response = owner_client.patch(f"{API}/sessions/{session.pk}", {"title": "  "}, format="json")

    assert response.status_code == 400
    assert response.json()["code"] == "ahentic_invalid_input"
    assert Session.objects.get(pk=session.pk).title == session.title


# Delete, undo, purge


def test_a_deleted_chat_is_gone_at_once_and_an_undo_brings_it_back(owner_client, owner):
    SessionFactory(owner=owner, title="Older")
    chat = SessionFactory(owner=owner, title="Keep me")
    say(chat, "hello")
    version = Session.objects.get(pk=chat.pk).version

    assert owner_client.delete(f"{API}/sessions/{chat.pk}").status_code == 204
    assert titles(owner_client) == ["Older"]
    assert titles(owner_client, "?q=hello") == []
    assert owner_client.get(f"{API}/sessions/{chat.pk}").status_code == 404
    assert owner_client.get(f"{API}/sessions/{chat.pk}/messages").status_code == 404
    gone = owner_client.post(f"{API}/sessions/{chat.pk}/messages", {"content": "hi"})
    assert gone.status_code == 404

    restored = owner_client.post(f"{API}/sessions/{chat.pk}/restore")

    assert restored.status_code == 200
    assert restored.json()["title"] == "Keep me"
    assert restored.json()["version"] == version
    # Back in its place (a restore is no new activity), with its messages.
    assert titles(owner_client) == ["Keep me", "Older"]
    messages = owner_client.get(f"{API}/sessions/{chat.pk}/messages").json()["messages"]
    assert [m["content"] for m in messages] == ["hello"]


def test_a_second_undo_answers_the_chat_unchanged(owner_client, session):
    owner_client.delete(f"{API}/sessions/{session.pk}")
    first = owner_client.post(f"{API}/sessions/{session.pk}/restore")
    second = owner_client.post(f"{API}/sessions/{session.pk}/restore")

    assert first.status_code == second.status_code == 200
    assert first.json()["version"] == second.json()["version"]


def test_deleting_a_deleted_chat_is_a_404(owner_client, session):
    owner_client.delete(f"{API}/sessions/{session.pk}")

    response = owner_client.delete(f"{API}/sessions/{session.pk}")

    assert response.status_code == 404
    assert response.json()["code"] == "ahentic_session_not_found"


def deleted_ago(session, seconds):
    """Move the chat's deletion back in time, as if the user had deleted it that long ago."""
    runstate.session_untrash(session.pk, deleted_since=timezone.now() - timedelta(days=1))
    runstate.session_trash(session.pk, at=timezone.now() - timedelta(seconds=seconds))


def test_the_purge_deletes_only_chats_past_the_undo_window(owner_client, owner, settings):
    settings.AHENTIC = {**settings.AHENTIC, "HISTORY_UNDO_S": 60}
    old, recent, _ = (SessionFactory(owner=owner, title=t) for t in ("Old", "Recent", "Kept"))
    say(old, "bye")
    owner_client.delete(f"{API}/sessions/{old.pk}")
    owner_client.delete(f"{API}/sessions/{recent.pk}")
    deleted_ago(old, 61)

    assert tasks.purge_deleted_chats() == 1

    assert set(Session.objects.values_list("title", flat=True)) == {"Recent", "Kept"}
    assert not Event.objects.filter(session_id=old.pk).exists()
    assert owner_client.post(f"{API}/sessions/{recent.pk}/restore").status_code == 200
    assert set(titles(owner_client)) == {"Kept", "Recent"}


def test_an_undo_after_the_window_is_a_410_and_the_purge_then_deletes_it(
    owner_client, session, settings
):
    settings.AHENTIC = {**settings.AHENTIC, "HISTORY_UNDO_S": 60}
    owner_client.delete(f"{API}/sessions/{session.pk}")
    deleted_ago(session, 61)

    response = owner_client.post(f"{API}/sessions/{session.pk}/restore")

    assert response.status_code == 410
    assert response.json()["code"] == "ahentic_restore_expired"
    assert Session.objects.filter(pk=session.pk, deleted_at__isnull=False).exists()
    assert tasks.purge_deleted_chats() == 1
    after = owner_client.post(f"{API}/sessions/{session.pk}/restore")
    assert after.status_code == 404
    assert after.json()["code"] == "ahentic_session_not_found"


def test_with_no_undo_window_a_delete_purges_at_once(owner_client, session, settings):
    settings.AHENTIC = {**settings.AHENTIC, "HISTORY_UNDO_S": 0}
    say(session, "bye")

    assert owner_client.delete(f"{API}/sessions/{session.pk}").status_code == 204

    assert not Session.objects.exists() and not Event.objects.exists()


def test_a_delete_schedules_the_purge_when_it_commits(owner_client, session, run_tasks):
    from django_q.models import Schedule

    run_tasks(owner_client.delete, f"{API}/sessions/{session.pk}")

    [purge] = Schedule.objects.filter(func="orchestrator_app.tasks.purge_deleted_chats")
    assert purge.schedule_type == Schedule.ONCE
    assert purge.next_run > timezone.now() + timedelta(seconds=30)


def test_a_deleted_chats_run_is_cancelled_first(owner_client, session):
    runstate.session_transition(session_id=session.pk, from_statuses=["idle"], to_status="running")

    owner_client.delete(f"{API}/sessions/{session.pk}")

    assert Session.objects.get(pk=session.pk).status == Session.Status.CANCELLED


# Ownership


@pytest.mark.parametrize("deleted", [False, True])
def test_another_users_chat_cannot_be_restored_or_deleted(
    owner_client, other_client, session, deleted
):
    if deleted:
        owner_client.delete(f"{API}/sessions/{session.pk}")

    restore = other_client.post(f"{API}/sessions/{session.pk}/restore")
    delete = other_client.delete(f"{API}/sessions/{session.pk}")

    assert restore.status_code == delete.status_code == 404
    assert restore.json()["code"] == delete.json()["code"] == "ahentic_session_not_found"
    assert Session.objects.filter(pk=session.pk, deleted_at__isnull=not deleted).exists()


@pytest.mark.parametrize("session_id", ["not-a-uuid", "00000000-0000-0000-0000-000000000000"])
def test_restoring_an_unknown_chat_is_a_404(owner_client, session_id):
    response = owner_client.post(f"{API}/sessions/{session_id}/restore")

    assert response.status_code == 404
    assert response.json()["code"] == "ahentic_session_not_found"


# Settings


@pytest.mark.parametrize("value", [-1, 1.5, True, "60"])
def test_the_system_check_refuses_a_bad_undo_window(settings, value):
    settings.AHENTIC = {**settings.AHENTIC, "HISTORY_UNDO_S": value}

    assert [e.id for e in check_history()] == ["ahentic.E042"]


def test_the_system_check_takes_a_good_undo_window(settings):
    settings.AHENTIC = {**settings.AHENTIC, "HISTORY_UNDO_S": 0}

    assert check_history() == []
