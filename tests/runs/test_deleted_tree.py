"""A deleted chat takes its whole tree with it: its sub-agents' chats, its files and its
artifacts are unreadable and unwritable by id at once, a poll is a 404 whatever the client or
the payload cache holds, and an undo brings back what that delete took. A sub-agent's chat
takes no message from the user.

Through the REST API; the sub-agent is spawned by a run on the local Messages API server."""

from datetime import timedelta
from unittest import mock

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from artifacts_app import store
from orchestrator_app import tasks
from orchestrator_app.testing.localapi import text_reply, tool_call, tool_reply
from sessions_app import attachments as attachment_store
from sessions_app import runstate
from sessions_app import services as session_services
from sessions_app.models import Attachment, Event, Session
from tests.support.api import post_message, session_url
from tests.support.attachment_files import png
from tests.support.factories import SessionFactory
from tests.support.runs import SPAWN, DeferChildSteps

pytestmark = pytest.mark.usefixtures("llm_strict")


def spawn_child(client, session, llm_strict, run_tasks) -> Session:
    """The parent's run starts a sub-agent, whose own run is held back (it stays running)."""
    defer = DeferChildSteps(session)
    llm_strict.enqueue(tool_reply(tool_call("spawn_subagent", SPAWN)), text_reply("Waiting."))
    with mock.patch("orchestrator_app.control.queue.async_task", side_effect=defer):
        post_message(client, session, run_tasks, "Research tea for me")
    return Session.objects.get(parent=session)


def upload(client, session) -> str:
    image = SimpleUploadedFile("tea.png", png(), content_type="image/png")
    response = client.post(session_url(session, "attachments"), {"file": [image]})
    assert response.status_code == 201, response.content
    return response.json()["attachments"][0]["id"]


def stage(session) -> None:
    store.stage(session_id=session.pk, key="notes", kind="markdown", payload="# Tea", title="Tea")


def reads(session, attachment_id) -> list[str]:
    """Every route that reads the chat or something in it by id."""
    return [
        session_url(session),
        session_url(session) + "?include=artifacts",
        session_url(session, "messages"),
        session_url(session, "messages") + "?view=debug",
        session_url(session, "diagnostics"),
        session_url(session, "live"),
        session_url(session, "artifacts"),
        session_url(session, "artifacts/notes"),
        session_url(session, f"attachments/{attachment_id}"),
        session_url(session, "agent/latest"),
    ]


WRITES = [
    ("patch", "", {"title": "Renamed"}),
    ("post", "messages", {"content": "Hello"}),
    ("post", "retry", {}),
    ("post", "messages/1/edit", {"content": "Other"}),
    ("post", "approvals", {"decision": "allow_once"}),
    ("post", "browser-results", {"callId": "x", "result": {}}),
    ("post", "cancel", {}),
    ("post", "continue", {}),
    ("post", "actions", {"name": "echo", "input": {}}),
    ("post", "agent/latest", {}),
    ("delete", "pending-messages/1", None),
]


def assert_gone(client, session, attachment_id) -> None:
    for url in reads(session, attachment_id):
        response = client.get(url)
        assert response.status_code == 404, (url, response.status_code)
        assert response.json()["code"] == "ahentic_session_not_found", url
    for method, path, body in WRITES:
        response = getattr(client, method)(session_url(session, path), body, format="json")
        assert response.status_code == 404, (method, path, response.status_code)
        assert response.json()["code"] == "ahentic_session_not_found", path
    image = SimpleUploadedFile("more.png", png(), content_type="image/png")
    assert client.post(session_url(session, "attachments"), {"file": [image]}).status_code == 404
    assert client.delete(session_url(session, f"attachments/{attachment_id}")).status_code == 404


def test_a_deleted_chats_sub_agents_files_and_artifacts_are_gone_at_once_and_an_undo_restores_them(
    owner_client, session, llm_strict, run_tasks
):
    child = spawn_child(owner_client, session, llm_strict, run_tasks)
    # A sub-agent's chat takes no upload: its file is one a tool of its run returned.
    files = {
        session.pk: upload(owner_client, session),
        child.pk: str(
            attachment_store.store(
                session_id=child.pk, name="tea.png", data=png(), source=Attachment.Source.TOOL
            ).pk
        ),
    }
    for chat in (session, child):
        stage(chat)
        for url in reads(chat, files[chat.pk]):
            assert owner_client.get(url).status_code == 200, url
    events = Event.objects.count()

    assert owner_client.delete(session_url(session)).status_code == 204

    for chat in (session, child):
        assert_gone(owner_client, chat, files[chat.pk])
    # Nothing was written through the refused routes, and the sub-agent's run was stopped.
    assert Attachment.objects.count() == 2
    assert Session.objects.get(pk=child.pk).status == "cancelled"
    assert (
        Event.objects.filter(session=session).count() + Event.objects.filter(session=child).count()
        == events + 1
    )  # the child's "Run cancelled." notice

    restored = owner_client.post(session_url(session, "restore"))

    assert restored.status_code == 200
    for chat in (session, child):
        for url in reads(chat, files[chat.pk]):
            assert owner_client.get(url).status_code == 200, url


def test_staff_still_see_a_deleted_chat_and_its_sub_agents_in_the_admin(
    owner_client, admin_client, session, llm_strict, run_tasks
):
    child = spawn_child(owner_client, session, llm_strict, run_tasks)
    owner_client.delete(session_url(session))

    for chat in (session, child):
        page = admin_client.get(f"/admin/sessions_app/session/{chat.pk}/change/")
        assert page.status_code == 200


def test_an_undo_of_the_parent_leaves_a_sub_agent_deleted_on_its_own_deleted(
    owner_client, owner, session
):
    kept_apart, taken = (SessionFactory(owner=owner, parent=session) for _ in range(2))
    assert owner_client.delete(session_url(kept_apart)).status_code == 204
    assert owner_client.delete(session_url(session)).status_code == 204
    assert owner_client.get(session_url(taken)).status_code == 404

    assert owner_client.post(session_url(session, "restore")).status_code == 200

    assert owner_client.get(session_url(taken)).status_code == 200
    assert owner_client.get(session_url(kept_apart)).status_code == 404
    # It has an undo of its own.
    assert owner_client.post(session_url(kept_apart, "restore")).status_code == 200
    assert owner_client.get(session_url(kept_apart)).status_code == 200


def test_a_sub_agents_chat_is_not_restored_apart_from_its_deleted_parent(
    owner_client, owner, session
):
    child = SessionFactory(owner=owner, parent=session)
    owner_client.delete(session_url(session))

    response = owner_client.post(session_url(child, "restore"))

    assert response.status_code == 404
    assert response.json()["code"] == "ahentic_session_not_found"
    assert owner_client.get(session_url(child)).status_code == 404


def test_the_purge_takes_the_whole_tree_at_once(owner_client, owner, session, settings):
    settings.AHENTIC = {**settings.AHENTIC, "HISTORY_UNDO_S": 60}
    SessionFactory(owner=owner, parent=session)
    owner_client.delete(session_url(session))
    later = (timezone.now() + timedelta(seconds=120)).isoformat()

    assert tasks.purge_deleted_chats(later) == 1

    assert not Session.objects.exists()


def test_a_sub_agent_spawned_while_its_chat_is_being_deleted_goes_with_it(
    owner_client, session, llm_strict, run_tasks
):
    # The delete lands between the step's last check and the spawn tool's insert.
    create = session_services.session_create

    def create_while_deleted(**fields):
        runstate.session_trash(session.pk, at=timezone.now())
        return create(**fields)

    llm_strict.enqueue(tool_reply(tool_call("spawn_subagent", SPAWN)), text_reply("Waiting."))
    with mock.patch.object(session_services, "session_create", side_effect=create_while_deleted):
        run_tasks(
            owner_client.post, session_url(session, "messages"), {"content": "Go"}, format="json"
        )

    child = Session.objects.get(parent=session)
    assert child.deleted_at == Session.objects.get(pk=session.pk).deleted_at
    assert owner_client.get(session_url(child)).status_code == 404
    assert not Event.objects.filter(session=child).exists()  # its task never started


# --- the poll and its caches --------------------------------------------------------------------


@pytest.mark.parametrize("which", ["chat", "sub-agent"])
@pytest.mark.parametrize("include", ["", "?include=artifacts"])
def test_a_poll_of_a_deleted_chat_is_a_404_with_a_cached_etag_or_payload(
    owner_client, other_client, owner, session, which, include
):
    chat = session if which == "chat" else SessionFactory(owner=owner, parent=session)
    url = session_url(chat) + include
    first = owner_client.get(url)
    assert first.status_code == 200
    etag = first["ETag"]
    # The payload of this version is in the payload cache now; the client holds its tag.
    assert owner_client.get(url, HTTP_IF_NONE_MATCH=etag).status_code == 304
    assert owner_client.get(url).content == first.content

    assert owner_client.delete(session_url(session)).status_code == 204

    for headers in ({}, {"HTTP_IF_NONE_MATCH": etag}, {"HTTP_IF_NONE_MATCH": "*"}):
        response = owner_client.get(url, **headers)
        assert response.status_code == 404, headers
        assert response.json()["code"] == "ahentic_session_not_found"
        assert "ETag" not in response
    # Nor is it served to anyone else.
    assert other_client.get(url, HTTP_IF_NONE_MATCH=etag).status_code == 404


# --- a sub-agent's chat takes no message from the user ------------------------------------------


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("messages", {"content": "Do something else"}),
        ("messages", {"content": "Later", "ifBusy": "enqueue"}),
        ("actions", {"name": "echo", "input": {"text": "hi"}}),
        ("retry", {}),
        ("messages/1/edit", {"content": "Other task"}),
    ],
)
def test_a_sub_agents_chat_takes_no_message_from_the_user(owner_client, owner, session, path, body):
    child = SessionFactory(owner=owner, parent=session)
    session_services.events_append(
        session_id=child.pk, items=[{"kind": Event.Kind.USER_MESSAGE, "content": "Task"}]
    )
    before = owner_client.get(session_url(child)).json()

    response = owner_client.post(session_url(child, path), body, format="json")

    assert response.status_code == 409
    assert response.json()["code"] == "ahentic_read_only_chat"
    after = owner_client.get(session_url(child)).json()
    assert (after["version"], after["status"], after["pendingMessages"]) == (
        before["version"],
        "idle",
        [],
    )
    assert Event.objects.filter(session=child).count() == 1


def test_a_sub_agents_chat_deleted_on_its_own_leaves_its_parents_list_and_an_undo_puts_it_back(
    owner_client, owner, session
):
    child = SessionFactory(owner=owner, parent=session, title="researcher")
    first = owner_client.get(session_url(session))
    assert [c["id"] for c in first.json()["children"]] == [str(child.pk)]

    assert owner_client.delete(session_url(child)).status_code == 204

    # A new version of the parent: neither the client's tag nor the payload cache serve the
    # list with the deleted chat in it.
    assert (
        owner_client.get(session_url(session), HTTP_IF_NONE_MATCH=first["ETag"]).status_code == 200
    )
    assert owner_client.get(session_url(session)).json()["children"] == []

    assert owner_client.post(session_url(child, "restore")).status_code == 200
    children = owner_client.get(session_url(session)).json()["children"]
    assert [c["id"] for c in children] == [str(child.pk)]


def test_a_sub_agents_chat_takes_no_upload_from_the_user(owner_client, owner, session):
    """Nothing could ever send a file uploaded into a sub-agent's chat (it takes no message)."""
    child = SessionFactory(owner=owner, parent=session)
    image = SimpleUploadedFile("tea.png", png(), content_type="image/png")

    response = owner_client.post(session_url(child, "attachments"), {"file": [image]})

    assert response.status_code == 409
    assert response.json()["code"] == "ahentic_read_only_chat"
    assert not Attachment.objects.filter(session=child).exists()
