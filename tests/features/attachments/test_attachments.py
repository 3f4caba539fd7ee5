"""Attachments through the HTTP API: upload (typed from the bytes, limited in size and count),
the owner-only content route, a message that sends them, the image and document blocks the
model receives (the same bytes at every step, so the prompt cache holds), and their files
deleted with the session.

The model is the strict local Messages API server, reached through the real SDK.
"""

import base64
from datetime import timedelta

import pytest
from django.utils import timezone

from orchestrator_app.tasks import purge_deleted_chats
from orchestrator_app.testing.localapi import count_request_tokens, text_reply
from sessions_app import attachments as attachment_store
from sessions_app import media
from sessions_app.conf import ahentic_settings
from sessions_app.models import Attachment, Session
from tests.support.api import payload_of, post, session_url, transcript_of
from tests.support.attachment_files import ELF, SVG, WINDOWS_EXE, gif, pdf, png, webp_header
from tests.support.attachments import PDF, send_with_attachments, upload, uploaded
from tests.support.factories import SessionFactory
from tests.support.model import model_requests
from tests.support.window import read_share, starts_with

pytestmark = pytest.mark.usefixtures("llm_strict")


def main_requests(llm) -> list[dict]:
    return [entry["json"] for entry in model_requests(llm, ahentic_settings.MODEL)]


def test_an_uploaded_image_is_typed_sized_and_served_to_its_owner(owner_client, session):
    data = png(40, 30)
    [item] = uploaded(owner_client, session, ("shot.png", data, "image/png"))

    assert item["name"] == "shot.png"
    assert item["contentType"] == "image/png"
    assert (item["size"], item["width"], item["height"]) == (len(data), 40, 30)
    response = owner_client.get(item["url"])
    assert response.status_code == 200
    assert b"".join(response.streaming_content) == data
    assert response["Content-Type"] == "image/png"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Content-Disposition"].startswith("inline")


def test_several_files_in_one_upload_each_typed_from_its_bytes(owner_client, session):
    items = uploaded(
        owner_client,
        session,
        # The declared types and names are wrong on purpose: the bytes decide.
        ("a.jpg", png(2, 2), "image/jpeg"),
        ("b.gif", gif(5, 7), "application/octet-stream"),
        ("c.webp", webp_header(300, 200), "image/webp"),
        ("d.pdf", pdf(3), "application/pdf"),
    )

    assert [i["contentType"] for i in items] == ["image/png", "image/gif", "image/webp", PDF]
    assert [(i["width"], i["height"]) for i in items[:3]] == [(2, 2), (5, 7), (300, 200)]
    assert items[3]["pages"] == 3


@pytest.mark.parametrize(
    ("name", "data"),
    [("x.png", ELF), ("setup.png", WINDOWS_EXE), ("logo.svg", SVG), ("notes.txt", b"hello")],
)
def test_a_file_that_is_not_an_image_or_pdf_is_refused(owner_client, session, name, data):
    response = upload(owner_client, session, (name, data, "image/png"))

    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "ahentic_attachment_type"
    assert "PNG, JPEG, GIF, WebP" in body["detail"]
    assert not Attachment.objects.exists()


def test_a_file_over_the_size_limit_is_a_413_and_nothing_is_stored(owner_client, session, settings):
    settings.AHENTIC = {**settings.AHENTIC, "ATTACHMENT_MAX_IMAGE_BYTES": 1000}

    response = upload(
        owner_client, session, ("big.png", png(200, 200, (1, 2, 3)) + b"\0" * 2000, "image/png")
    )

    assert response.status_code == 413
    assert response.json()["code"] == "ahentic_attachment_too_large"
    assert not Attachment.objects.exists()


def test_more_files_than_a_message_takes_is_a_400(owner_client, session, settings):
    settings.AHENTIC = {**settings.AHENTIC, "ATTACHMENT_MAX_PER_MESSAGE": 2}

    response = upload(owner_client, session, *[(f"{n}.png", png(), "image/png") for n in range(3)])

    assert response.status_code == 400
    assert response.json()["code"] == "ahentic_attachment_limit"
    assert not Attachment.objects.exists()


def test_a_session_holds_at_most_its_limit(owner_client, session, settings):
    settings.AHENTIC = {**settings.AHENTIC, "ATTACHMENT_MAX_PER_SESSION": 3}
    uploaded(owner_client, session, ("1.png", png(), "image/png"), ("2.png", png(), "image/png"))

    response = upload(owner_client, session, *[(f"{n}.png", png(), "image/png") for n in range(2)])

    assert response.status_code == 400
    assert response.json()["code"] == "ahentic_attachment_limit"
    assert Attachment.objects.count() == 2


def test_an_upload_without_a_file_is_a_400(owner_client, session):
    response = owner_client.post(session_url(session, "attachments"), {}, format="multipart")

    assert response.status_code == 400
    assert response.json()["code"] == "ahentic_attachment_missing"


def test_another_users_attachment_is_a_404_and_cannot_be_sent(
    owner_client, other_client, other, session, run_tasks
):
    [item] = uploaded(owner_client, session, ("mine.png", png(), "image/png"))
    theirs = SessionFactory(owner=other)

    # Through the owner's session: not theirs.
    response = other_client.get(item["url"])
    assert response.status_code == 404
    assert response.json()["code"] == "ahentic_session_not_found"
    # Through a session of their own: no such attachment there.
    response = other_client.get(session_url(theirs, f"attachments/{item['id']}"))
    assert response.status_code == 404
    assert response.json()["code"] == "ahentic_attachment_not_found"
    response = other_client.delete(session_url(theirs, f"attachments/{item['id']}"))
    assert response.status_code == 404
    # Nor can they send it with a message of theirs.
    response = send_with_attachments(other_client, theirs, run_tasks, "look", [item["id"]])
    assert response.status_code == 409
    assert response.json()["code"] == "ahentic_attachment_invalid"
    assert not theirs.events.exists()
    # The owner's upload is untouched.
    assert Attachment.objects.get(pk=item["id"]).sent is False


def test_an_attachment_id_that_is_not_one_is_a_404(owner_client, session):
    for bad in ("nope", "00000000-0000-0000-0000-000000000000"):
        response = owner_client.get(session_url(session, f"attachments/{bad}"))
        assert response.status_code == 404
        assert response.json()["code"] == "ahentic_attachment_not_found"


def test_the_model_receives_the_image_before_the_text_and_the_same_bytes_every_turn(
    owner_client, session, llm, run_tasks
):
    data = png(64, 48)
    [item] = uploaded(owner_client, session, ("chart.png", data, "image/png"))
    llm.enqueue(text_reply("A red chart."), text_reply("Yes."), text_reply("Sure."))

    response = send_with_attachments(
        owner_client, session, run_tasks, "What is in this chart?", [item["id"]]
    )
    assert response.status_code == 202, response.content
    for follow_up in ("Is it red?", "Thanks, and the axis?"):
        response = run_tasks(post, owner_client, session, "messages", {"content": follow_up})
        assert response.status_code == 202, response.content

    first, *later = main_requests(llm)
    image, text = first["messages"][0]["content"][:2]
    assert image == {
        "type": "image",
        "source": {
            "type": "base64",
            "media_type": "image/png",
            "data": base64.b64encode(data).decode(),
        },
    }
    assert text["text"] == "What is in this chart?"
    # Every later request starts with the earlier one, the image byte for byte.
    requests = [first, *later]
    for previous, current in zip(requests, later, strict=False):
        assert starts_with(current["messages"], previous["messages"])
    usages = [e["response"]["usage"] for e in model_requests(llm, ahentic_settings.MODEL)]
    for n in range(1, 3):
        assert usages[n]["cache_read_input_tokens"] == count_request_tokens(requests[n - 1])
    assert read_share(usages[1:]) >= 0.90
    # The transcript shows the attachment with its owner-only URL.
    [message] = [m for m in transcript_of(owner_client, session) if m["kind"] == "user_message"][:1]
    [shown] = message["meta"]["attachments"]
    assert shown["id"] == item["id"] and shown["url"] == item["url"]
    assert shown["width"] == 64


def test_a_pdf_is_sent_as_a_document_block(owner_client, session, llm, run_tasks):
    data = pdf(2)
    [item] = uploaded(owner_client, session, ("report.pdf", data, PDF))

    response = send_with_attachments(owner_client, session, run_tasks, "Summarize it", [item["id"]])

    assert response.status_code == 202, response.content
    [request] = main_requests(llm)
    document = request["messages"][0]["content"][0]
    assert document["type"] == "document"
    assert document["source"]["media_type"] == PDF
    assert base64.b64decode(document["source"]["data"]) == data


def test_a_message_of_attachments_only_is_sent(owner_client, session, llm, run_tasks):
    [item] = uploaded(owner_client, session, ("only.png", png(10, 10), "image/png"))
    llm.responder = _offline

    response = send_with_attachments(owner_client, session, run_tasks, "", [item["id"]])

    assert response.status_code == 202, response.content
    [request] = main_requests(llm)
    assert [b["type"] for b in request["messages"][0]["content"]][0] == "image"
    reply = payload_of(owner_client, session)["messages"][-1]["content"]
    assert "PNG image of 10x10 pixels" in reply


def _offline(body):
    from orchestrator_app.testing.offline import demo_responder

    return demo_responder(body)


def test_the_offline_model_reads_an_attached_images_size(owner_client, session, llm, run_tasks):
    items = uploaded(
        owner_client,
        session,
        ("a.gif", gif(33, 21), "image/gif"),
        ("b.webp", webp_header(1024, 768), "image/webp"),
    )
    llm.responder = _offline

    send_with_attachments(
        owner_client, session, run_tasks, "What do you see?", [i["id"] for i in items]
    )

    reply = payload_of(owner_client, session)["messages"][-1]["content"]
    assert "GIF image of 33x21 pixels" in reply
    assert "WEBP image of 1024x768 pixels" in reply


def test_an_attachment_is_sent_once(owner_client, session, llm, run_tasks):
    [item] = uploaded(owner_client, session, ("once.png", png(), "image/png"))
    send_with_attachments(owner_client, session, run_tasks, "first", [item["id"]])

    response = send_with_attachments(owner_client, session, run_tasks, "again", [item["id"]])

    assert response.status_code == 409
    assert response.json()["code"] == "ahentic_attachment_invalid"
    response = owner_client.delete(item["url"])
    assert response.status_code == 409
    assert response.json()["code"] == "ahentic_attachment_sent"


def test_an_unsent_upload_can_be_deleted_with_its_file(owner_client, session, run_tasks):
    [item] = uploaded(owner_client, session, ("gone.png", png(), "image/png"))
    name = Attachment.objects.get(pk=item["id"]).storage_name
    assert attachment_store.storage().exists(name)

    # The file goes once the deletion commits.
    response = run_tasks(owner_client.delete, item["url"])

    assert response.status_code == 204
    assert not Attachment.objects.filter(pk=item["id"]).exists()
    assert not attachment_store.storage().exists(name)
    assert owner_client.get(item["url"]).status_code == 404


def test_a_message_queued_while_busy_keeps_its_attachments(owner_client, session, llm, run_tasks):
    from sessions_app import runstate

    [item] = uploaded(owner_client, session, ("later.png", png(7, 5), "image/png"))
    runstate.run_begin(session_id=session.pk, from_statuses=[Session.Status.IDLE])

    response = send_with_attachments(owner_client, session, run_tasks, "when you can", [item["id"]])

    assert response.status_code == 200, response.content
    assert Attachment.objects.get(pk=item["id"]).sent is True
    from orchestrator_app.control.runs import pending_promote

    pending_promote(session.pk)
    event = session.events.get(kind="user_message")
    assert [a["id"] for a in event.payload["attachments"]] == [item["id"]]


def test_deleting_the_session_deletes_its_files(owner_client, session, llm, run_tasks):
    items = uploaded(owner_client, session, ("a.png", png(), "image/png"), ("b.pdf", pdf(), PDF))
    send_with_attachments(owner_client, session, run_tasks, "keep these", [items[0]["id"]])
    names = list(Attachment.objects.values_list("storage_name", flat=True))
    assert len(names) == 2 and all(attachment_store.storage().exists(n) for n in names)

    response = run_tasks(owner_client.delete, session_url(session))
    run_tasks(purge_deleted_chats, (timezone.now() + timedelta(days=1)).isoformat())

    assert response.status_code == 204
    assert not Attachment.objects.exists()
    assert not any(attachment_store.storage().exists(n) for n in names)


def test_context_usage_counts_an_image_as_the_api_does(owner_client, session, llm, run_tasks):
    [item] = uploaded(owner_client, session, ("wide.png", png(3000, 1000), "image/png"))
    llm.enqueue(text_reply("Wide."), text_reply("Ok."))

    send_with_attachments(owner_client, session, run_tasks, "How wide?", [item["id"]])
    predicted = payload_of(owner_client, session)["contextUsage"]["usedTokens"]
    run_tasks(post, owner_client, session, "messages", {"content": "x"})

    # The API scales 3000x1000 to a long edge of 1568 and counts width x height / 750.
    assert media.image_tokens(3000, 1000) == 1093
    entry = model_requests(llm, ahentic_settings.MODEL)[-1]
    usage = entry["response"]["usage"]
    counted = sum(
        usage[k] for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    )
    assert counted > 1093
    assert abs(predicted - counted) <= 10


# --- a tool that returns an image -------------------------------------------------------------


@pytest.fixture
def screenshot_tool():
    from orchestrator_app.tools import tool, unregister
    from sessions_app.attachments import ToolImage

    @tool(name="screenshot", description="A screenshot of the page.", readonly=True)
    def screenshot(ctx, input):
        return {
            "ok": True,
            "page": "/home",
            "images": [ToolImage(png(120, 80), "home.png"), ToolImage(SVG, "logo.svg")],
        }

    yield screenshot
    unregister("screenshot")


def test_a_tool_returns_an_image_the_model_and_the_transcript_receive(
    owner_client, session, llm, run_tasks, screenshot_tool
):
    from orchestrator_app.testing.localapi import tool_call, tool_reply

    llm.enqueue(tool_reply(tool_call("screenshot", {}, id="toolu_shot")))
    llm.responder = _offline

    response = run_tasks(post, owner_client, session, "messages", {"content": "Show me the page"})

    assert response.status_code == 202, response.content
    requests = main_requests(llm)
    [result] = [
        b
        for b in requests[1]["messages"][-1]["content"]
        if b["type"] == "tool_result" and b["tool_use_id"] == "toolu_shot"
    ]
    text, image = result["content"][:2]
    assert text["type"] == "text" and "home.png (image/png, 120x80): attached below" in text["text"]
    # The SVG is not an image the API takes: dropped, with a note for the model.
    assert "logo.svg: not sent" in text["text"]
    assert image["type"] == "image"
    assert base64.b64decode(image["source"]["data"]) == png(120, 80)
    assert len(result["content"]) == 2
    # The offline model saw the image in the tool result.
    reply = payload_of(owner_client, session)["messages"][-1]["content"]
    assert "PNG image of 120x80 pixels" in reply
    # The transcript shows it through the owner-only route.
    [answer] = [m for m in transcript_of(owner_client, session) if m["kind"] == "tool_response"]
    [shown] = answer["meta"]["attachments"]
    assert owner_client.get(shown["url"]).status_code == 200
    # A later request carries the same tool_result bytes.
    llm.enqueue(text_reply("Ok."))
    run_tasks(post, owner_client, session, "messages", {"content": "thanks"})
    later = main_requests(llm)[-1]
    assert starts_with(later["messages"], requests[1]["messages"])


# --- the strict local Messages API, through the real SDK --------------------------------------


@pytest.fixture
def sdk(llm):
    import anthropic

    return anthropic.Anthropic(api_key="test-key", base_url=llm.url, max_retries=0)


def image_block(data: bytes, media_type: str) -> dict:
    encoded = base64.b64encode(data).decode()
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": media_type, "data": encoded},
    }


def ask(sdk, content: list[dict], role: str = "user"):
    messages = [{"role": "user", "content": content}]
    if role == "assistant":
        messages = [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": content},
        ]
    return sdk.messages.create(model="claude-test", max_tokens=10, messages=messages)


@pytest.mark.parametrize(
    ("block", "message"),
    [
        (image_block(png(), "image/jpeg"), "does not match the provided media type image/jpeg"),
        (image_block(SVG, "image/svg+xml"), "media_type: Input should be 'image/jpeg'"),
        (image_block(ELF, "image/png"), "does not match the provided media type image/png"),
        (
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": "%%"},
            },
            "not valid base64",
        ),
        (
            {
                "type": "document",
                "source": {"type": "base64", "media_type": "application/pdf", "data": "aGVsbG8="},
            },
            "The PDF specified was not valid",
        ),
        (
            {
                "type": "document",
                "source": {
                    "type": "base64",
                    "media_type": "text/plain",
                    "data": base64.b64encode(pdf()).decode(),
                },
            },
            "media_type: Input should be 'application/pdf'",
        ),
    ],
)
def test_the_local_api_refuses_media_the_real_api_refuses(sdk, llm, block, message):
    import anthropic

    with pytest.raises(anthropic.BadRequestError, match=message):
        ask(sdk, [block, {"type": "text", "text": "What is it?"}])
    llm.reset()  # the rejections are the point here (llm_strict checks the rest)


def test_the_local_api_refuses_an_image_over_5_mb_and_in_an_assistant_turn(sdk, llm):
    import anthropic

    with pytest.raises(anthropic.BadRequestError, match="image exceeds 5 MB maximum"):
        ask(sdk, [image_block(png() + b"\0" * 4_000_000, "image/png")])
    with pytest.raises(anthropic.BadRequestError, match="can only be in `user` messages"):
        ask(sdk, [image_block(png(), "image/png")], role="assistant")
    llm.reset()


def test_the_local_api_takes_images_and_counts_them_as_the_real_api(sdk, llm):
    data = png(1000, 1000)
    reply = ask(sdk, [image_block(data, "image/png"), {"type": "text", "text": "hi"}])

    # 1000 x 1000 / 750 tokens (under the API's scaling bounds), the text 1, the role 4.
    assert reply.usage.input_tokens == media.image_tokens(1000, 1000) + 1 + 4
    assert media.image_tokens(1000, 1000) == 1334
    count = sdk.messages.count_tokens(
        model="claude-test",
        messages=[{"role": "user", "content": [image_block(png(30, 30), "image/png")]}],
    )
    assert count.input_tokens == media.image_tokens(30, 30) + 4 == 6


def test_a_recalled_queued_message_gives_its_attachments_back(
    owner_client, session, llm, run_tasks
):
    from sessions_app import runstate

    [item] = uploaded(owner_client, session, ("back.png", png(), "image/png"))
    runstate.run_begin(session_id=session.pk, from_statuses=[Session.Status.IDLE])
    response = send_with_attachments(owner_client, session, run_tasks, "queued", [item["id"]])
    assert response.status_code == 200, response.content
    queued = response.json()["pendingMessage"]
    assert [a["id"] for a in queued["attachments"]] == [item["id"]]
    assert queued["attachments"][0]["url"] == item["url"]

    response = owner_client.delete(session_url(session, f"pending-messages/{queued['id']}"))

    assert response.status_code == 204
    assert Attachment.objects.get(pk=item["id"]).sent is False


def test_a_configured_storage_holds_the_files(owner_client, session, settings, run_tasks):
    from django.core.files.storage import default_storage

    settings.STORAGES = {
        **settings.STORAGES,
        "ahentic_files": {"BACKEND": "django.core.files.storage.InMemoryStorage"},
    }
    settings.AHENTIC = {**settings.AHENTIC, "ATTACHMENT_STORAGE": "ahentic_files"}
    data = png(9, 9)

    [item] = uploaded(owner_client, session, ("s3.png", data, "image/png"))

    name = Attachment.objects.get(pk=item["id"]).storage_name
    assert attachment_store.storage().exists(name)
    assert not default_storage.exists(name)
    assert b"".join(owner_client.get(item["url"]).streaming_content) == data
    run_tasks(owner_client.delete, session_url(session))
    run_tasks(purge_deleted_chats, (timezone.now() + timedelta(days=1)).isoformat())
    assert not attachment_store.storage().exists(name)


def test_the_system_checks_refuse_an_unknown_storage_and_a_files_api_not_a_bool(settings):
    from orchestrator_app.checks import check_ahentic_settings

    settings.AHENTIC = {
        **settings.AHENTIC,
        "ATTACHMENT_STORAGE": "nowhere",
        "ATTACHMENT_MAX_PER_MESSAGE": 0,
        "FILES_API": "yes",
    }

    messages = [e.msg for e in check_ahentic_settings() if e.id == "ahentic.E008"]

    assert len(messages) == 3
    assert "names no storage of STORAGES: 'nowhere'" in messages[0]
    assert "ATTACHMENT_MAX_PER_MESSAGE" in messages[1]
    assert "FILES_API" in messages[2]


def test_memory_keeps_that_files_were_attached(owner_client, session, llm, run_tasks):
    from orchestrator_app.control.brain import extractive_summary

    [item] = uploaded(owner_client, session, ("plan.pdf", pdf(), PDF))
    send_with_attachments(owner_client, session, run_tasks, "", [item["id"]])

    summary = extractive_summary(list(session.events.order_by("seq")))

    assert "- User:  [attached: plan.pdf]" in summary
