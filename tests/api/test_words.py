"""Words, not internals (issue 31, section 1), through the HTTP API: the payload gives the
sidebar's Basic view the tool's label, each field's verbose_name and sentences; a save whose
form changes nothing answers without an approval card; errors say what to do next."""

import json

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.flatpages.models import FlatPage
from django.contrib.sites.models import Site
from rest_framework.test import APIClient

from orchestrator_app.testing.localapi import text_reply, tool_call, tool_reply
from tests.support.api import API, decide, post, post_message, result_of, session_url
from tests.support.attachments import upload_multipart
from tests.support.factories import SessionFactory, UserFactory

pytestmark = pytest.mark.usefixtures("llm_strict")

PAGES = "flatpages.flatpage"


@pytest.fixture
def admin_chat(settings, db):
    """A superuser's chat with admin tools on flat pages, and one page, "Coffee"."""
    settings.AHENTIC = {**settings.AHENTIC, "ADMIN_TOOLS": [PAGES]}
    user = UserFactory(username="boss", is_staff=True, is_superuser=True, agent_permission=True)
    client = APIClient()
    client.force_login(user)
    page = FlatPage.objects.create(url="/coffee/", title="Coffee", content="<p>Beans.</p>")
    page.sites.add(Site.objects.get_current())
    return client, SessionFactory(owner=user), page


def view(client, session, mode: str) -> list[dict]:
    response = client.patch(session_url(session), {"viewMode": mode}, format="json")
    assert response.status_code == 200, response.content
    return response.json()["messages"]


def test_the_approval_card_names_the_tool_and_the_fields_as_people_read_them(
    admin_chat, llm, run_tasks
):
    client, session, page = admin_chat
    llm.enqueue(
        tool_reply(
            tool_call(
                "admin_save",
                {
                    "model": PAGES,
                    "id": page.pk,
                    "values": {
                        "title": "Coffee and tea",
                        "registration_required": True,
                    },
                },
            )
        ),
        text_reply("Saved."),
    )

    body = post_message(client, session, run_tasks, "Rename the coffee page")

    pending = body["pendingTool"]
    assert pending["name"] == "admin_save"
    assert pending["label"] == "Save a record in the admin"
    assert [(c["field"], c["label"]) for c in pending["changes"]] == [
        ("title", "Title"),
        ("registration_required", "Registration required"),
    ]
    assert pending["changes"][0]["before"] == "“Coffee”"
    assert pending["changes"][0]["after"] == "“Coffee and tea”"


def test_a_save_that_changes_nothing_is_answered_without_a_card(admin_chat, llm, run_tasks):
    client, session, page = admin_chat
    llm.enqueue(
        tool_reply(
            tool_call(
                "admin_save",
                {"model": PAGES, "id": page.pk, "values": {"title": "Coffee"}},
                id="toolu_same",
            )
        ),
        text_reply("It already had that title."),
    )

    body = post_message(client, session, run_tasks, "Set the title to Coffee")

    assert body["status"] == "idle"
    assert body["pendingTool"] is None
    assert not LogEntry.objects.exists()  # nothing saved, nothing logged
    result = json.loads(result_of(llm.message_requests()[-1], "toolu_same")["content"])
    assert result["ok"] is True
    assert result["changed"] is False
    assert result["message"].startswith("Nothing changed")
    # The Basic view shows the line (no tool traffic, no registry name in its content).
    [line] = [m for m in body["messages"] if m["role"] == "tool"]
    assert line["meta"]["unchanged"] is True
    assert line["meta"]["label"] == "Save a record in the admin"
    assert line["content"] == ""


def test_a_save_that_changes_something_still_asks(admin_chat, llm, run_tasks):
    client, session, page = admin_chat
    llm.enqueue(
        tool_reply(
            tool_call("admin_save", {"model": PAGES, "id": page.pk, "values": {"title": "Tea"}})
        ),
        text_reply("Saved."),
    )

    assert post_message(client, session, run_tasks, "Retitle it")["status"] == "awaiting_human"
    assert decide(client, session, run_tasks)["status"] == "idle"
    page.refresh_from_db()
    assert page.title == "Tea"


def test_artifact_lines_read_as_sentences_in_the_basic_view(owner_client, session, llm, run_tasks):
    body = "<p>" + "x" * 200 + "</p>"
    llm.enqueue(
        tool_reply(
            tool_call(
                "stage_artifact",
                {"key": "coffee", "kind": "html", "title": "Coffee", "payload": {"content": body}},
            )
        ),
        tool_reply(tool_call("delete_artifact", {"key": "coffee"})),
        text_reply("Drafted, then dropped it."),
    )

    post_message(owner_client, session, run_tasks, "Draft a page")

    basic = [m["content"] for m in view(owner_client, session, "basic") if m["role"] == "event"]
    assert basic == ["Drafted “Coffee” (221\xa0bytes)", "Deleted the draft “Coffee”"]
    verbose = [m["content"] for m in view(owner_client, session, "verbose") if m["role"] == "event"]
    assert verbose[0].startswith("Artifact coffee staged: coffee: ready · html")


def test_an_unsupported_file_says_which_files_to_attach(owner_client, session):
    response = upload_multipart(owner_client, session, ("notes.exe", b"MZ\x90\x00" * 10))

    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "ahentic_attachment_type"
    assert body["detail"] == (
        "'notes.exe' is a kind of file the agent cannot read. Attach PNG, JPEG, GIF, WebP "
        "images and PDF documents."
    )


def test_a_late_decision_says_the_chat_moved_on_without_its_status(
    owner_client, session, llm, run_tasks
):
    llm.enqueue(text_reply("Hello."))
    post_message(owner_client, session, run_tasks, "Hi")

    response = post(owner_client, session, "approvals", {"decision": "allow_once"})

    assert response.status_code == 409
    assert response.json()["detail"] == "Nothing is waiting for you in this chat any more."


def test_a_call_that_must_be_approved_each_time_names_the_tool_as_people_read_it(
    admin_chat, llm, run_tasks
):
    client, session, page = admin_chat
    llm.enqueue(
        tool_reply(tool_call("admin_delete", {"model": PAGES, "id": page.pk})),
        text_reply("Deleted."),
    )
    post_message(client, session, run_tasks, "Delete the coffee page")

    response = post(client, session, "approvals", {"decision": "allow_session"})

    assert response.status_code == 400
    assert response.json() == {
        "code": "ahentic_hitl_not_preallowable",
        "detail": "Delete a record in the admin must be approved every time: use Allow once.",
    }


def test_the_tool_catalog_is_unchanged_by_labels(owner_client, session, llm, run_tasks):
    """Labels are for people: what the model is sent stays the registry's names."""
    llm.enqueue(text_reply("Hello."))
    post_message(owner_client, session, run_tasks, "Hi")

    sent = {tool["name"] for tool in llm.message_requests()[0]["tools"]}
    assert "stage_artifact" in sent
    assert not any("label" in tool for tool in llm.message_requests()[0]["tools"])
    assert owner_client.get(f"{API}/tools").status_code == 200
