"""Staff repair what an event says in the admin, and the model sees it at once.

An edit moves the session's edit version, so a worker that kept the window's rows between steps
(``sessions_app.window``) reads them again: an event edited in the admin (a redaction, a
correction) is what the next request to the model carries, whichever worker runs it; the
session's version moves, so clients see it too."""

import gc
import threading
import weakref
from unittest import mock

import pytest
from django.contrib.auth.models import Permission
from django.db import connections

from orchestrator_app import tasks
from orchestrator_app.control import runs
from orchestrator_app.testing.localapi import text_reply, tool_call, tool_reply
from sessions_app.conf import ahentic_settings
from sessions_app.models import Event
from sessions_app.services import session_create
from sessions_app.tokens import estimate_tokens
from tests.support.api import payload_of, post_message
from tests.support.factories import UserFactory
from tests.support.model import model_requests


@pytest.fixture
def repairer(db):
    user = UserFactory(username="repairer", is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label="sessions_app", codename__in=["view_event", "change_event"]
        )
    )
    return user


def test_an_event_edited_in_the_admin_reaches_the_next_request_to_the_model(
    owner_client, session, llm, run_tasks, repairer, client
):
    llm.enqueue(text_reply("Noted."), text_reply("Understood."))
    post_message(owner_client, session, run_tasks, "My card number is 4111 1111 1111 1111")
    before = owner_client.get(f"/ahentic/v1/sessions/{session.pk}")
    event = Event.objects.get(session=session, kind=Event.Kind.USER_MESSAGE)

    client.force_login(repairer)
    url = f"/admin/sessions_app/event/{event.pk}/change/"
    assert client.get(url).status_code == 200
    saved = client.post(url, {"content": "My card number is [redacted]", "_save": "Save"})
    assert saved.status_code == 302, saved.content
    event.refresh_from_db()
    assert event.content == "My card number is [redacted]"
    assert event.token_count == estimate_tokens(event.content)  # measured again
    # The session's version moved: a client's conditional GET gets the new transcript.
    again = owner_client.get(
        f"/ahentic/v1/sessions/{session.pk}", HTTP_IF_NONE_MATCH=before["ETag"]
    )
    assert again.status_code == 200

    post_message(owner_client, session, run_tasks, "What did I tell you?")
    request = model_requests(llm, ahentic_settings.MODEL)[-1]["json"]
    sent = str(request["messages"])
    assert "[redacted]" in sent
    assert "4111" not in sent
    assert payload_of(owner_client, session)["status"] == "idle"


def test_an_event_is_read_only_without_the_change_permission(owner, session, client, db):
    viewer = UserFactory(username="viewer", is_staff=True)
    viewer.user_permissions.add(
        Permission.objects.get(content_type__app_label="sessions_app", codename="view_event")
    )
    event = Event.objects.create(session=session, seq=1, kind="user_message", content="Hi")
    client.force_login(viewer)
    url = f"/admin/sessions_app/event/{event.pk}/change/"
    assert client.post(url, {"content": "Changed", "_save": "Save"}).status_code == 403
    event.refresh_from_db()
    assert event.content == "Hi"


@pytest.mark.django_db(transaction=True)
def test_a_step_in_a_thread_of_its_own_leaves_no_hold_on_the_threads_connection(
    owner, llm, tool_calls
):
    """A step run in a thread of its own leaves nothing that holds the thread's connection
    (what a worker keeps between steps is plain values), which is closed when the thread's
    objects are collected (an open one would stay a database session for good)."""
    session = session_create(owner=owner)
    llm.enqueue(tool_reply(tool_call("echo", {"text": "x"})), text_reply("Done."))
    with mock.patch("orchestrator_app.control.queue.async_task"):
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
