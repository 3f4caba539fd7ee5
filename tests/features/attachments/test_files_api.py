"""PDFs through the Files API (``AHENTIC["FILES_API"]``), through the HTTP API: a PDF of at
least ``FILES_API_MIN_BYTES`` is uploaded once, when a step first sends it, and is the same
``file`` document block in every later request (with the Files API beta header, which no other
request carries); a smaller one, or one sent as base64 before the setting was turned on, stays
base64; a failed upload fails the run resumably and writes nothing; the uploaded file is
deleted with its session.

The model is the strict local Messages API server, reached through the real SDK.
"""

import base64
from datetime import timedelta

import pytest
from django.utils import timezone

from orchestrator_app.tasks import purge_deleted_chats
from orchestrator_app.testing.localapi import (
    FILES_BETA,
    count_request_tokens,
    error_reply,
    text_reply,
)
from sessions_app.conf import ahentic_settings
from sessions_app.models import Attachment, Session
from tests.support.api import payload_of, post, session_url
from tests.support.attachment_files import pdf, png
from tests.support.attachments import PDF, send_with_attachments, uploaded
from tests.support.model import model_requests
from tests.support.window import starts_with

pytestmark = pytest.mark.usefixtures("llm_strict")


@pytest.fixture
def files_api(settings):
    """The Files API on, for every PDF of 100 bytes or more (``pdf()`` is bigger)."""
    settings.AHENTIC = {**settings.AHENTIC, "FILES_API": True, "FILES_API_MIN_BYTES": 100}


def message_entries(llm) -> list[dict]:
    return model_requests(llm, ahentic_settings.MODEL)


def file_requests(llm, method: str = "POST") -> list[dict]:
    return [e for e in llm.requests if e["path"].startswith("/v1/files") and e["method"] == method]


def betas(entry: dict) -> list[str]:
    return [b.strip() for b in entry["headers"].get("anthropic-beta", "").split(",") if b]


def test_a_large_pdf_is_uploaded_once_and_sent_as_the_same_file_block_at_every_step(
    owner_client, session, llm, run_tasks, files_api
):
    data = pdf(3)
    [item] = uploaded(owner_client, session, ("report.pdf", data, PDF))
    assert file_requests(llm) == []  # nothing is uploaded with the web request
    llm.enqueue(text_reply("A three-page report."), text_reply("Page two is a table."))

    response = send_with_attachments(owner_client, session, run_tasks, "Summarize it", [item["id"]])
    assert response.status_code == 202, response.content
    response = run_tasks(post, owner_client, session, "messages", {"content": "And page two?"})
    assert response.status_code == 202, response.content

    [upload] = file_requests(llm)
    assert upload["status"] == 200
    [(file_id, held)] = llm.files.items()
    assert held["bytes"] == data
    assert (held["filename"], held["mime_type"], held["size_bytes"]) == (
        "report.pdf",
        PDF,
        len(data),
    )
    row = Attachment.objects.get(pk=item["id"])
    assert (row.file_id, row.sent_as) == (file_id, "file")
    first, second = message_entries(llm)
    block = {"type": "document", "source": {"type": "file", "file_id": file_id}}
    assert first["json"]["messages"][0]["content"][0] == block
    assert second["json"]["messages"][0]["content"][0] == block
    assert starts_with(second["json"]["messages"], first["json"]["messages"])
    assert FILES_BETA in betas(first) and FILES_BETA in betas(second)
    # Billed as the same PDF sent as base64: its pages, and the second request reads the
    # first from the cache.
    inline = {
        "type": "document",
        "source": {"type": "base64", "media_type": PDF, "data": base64.b64encode(data).decode()},
    }
    as_base64 = {
        **first["json"],
        "messages": [
            {
                **first["json"]["messages"][0],
                "content": [inline, *first["json"]["messages"][0]["content"][1:]],
            },
            *first["json"]["messages"][1:],
        ],
    }
    sent = count_request_tokens(first["json"], {file_id: data})
    assert sent == count_request_tokens(as_base64)
    usage = first["response"]["usage"]
    assert sum(usage[k] for k in ("input_tokens", "cache_creation_input_tokens")) == sent
    assert second["response"]["usage"]["cache_read_input_tokens"] == sent


def test_a_pdf_under_the_threshold_stays_base64_and_no_request_carries_the_beta(
    owner_client, session, llm, run_tasks, settings
):
    data = pdf(2)
    settings.AHENTIC = {
        **settings.AHENTIC,
        "FILES_API": True,
        "FILES_API_MIN_BYTES": len(data) + 1,
    }
    [item] = uploaded(owner_client, session, ("small.pdf", data, PDF))

    send_with_attachments(owner_client, session, run_tasks, "Read it", [item["id"]])
    run_tasks(post, owner_client, session, "messages", {"content": "Thanks"})

    assert file_requests(llm) == []
    first, second = message_entries(llm)
    document = first["json"]["messages"][0]["content"][0]
    assert document["source"]["type"] == "base64"
    assert base64.b64decode(document["source"]["data"]) == data
    assert second["json"]["messages"][0]["content"][0] == document
    assert "anthropic-beta" not in first["headers"]
    assert "anthropic-beta" not in second["headers"]
    assert Attachment.objects.get(pk=item["id"]).sent_as == "base64"


def test_a_pdf_sent_as_base64_stays_base64_when_the_files_api_is_turned_on(
    owner_client, session, llm, run_tasks, settings
):
    [item] = uploaded(owner_client, session, ("early.pdf", pdf(2), PDF))
    send_with_attachments(owner_client, session, run_tasks, "Read it", [item["id"]])

    settings.AHENTIC = {**settings.AHENTIC, "FILES_API": True, "FILES_API_MIN_BYTES": 0}
    run_tasks(post, owner_client, session, "messages", {"content": "And again"})

    assert file_requests(llm) == []
    first, second = message_entries(llm)
    assert starts_with(second["json"]["messages"], first["json"]["messages"])
    assert second["json"]["messages"][0]["content"][0]["source"]["type"] == "base64"
    assert second["response"]["usage"]["cache_read_input_tokens"] > 0


def test_images_and_messages_without_files_never_go_through_the_files_api(
    owner_client, session, llm, run_tasks, settings
):
    settings.AHENTIC = {**settings.AHENTIC, "FILES_API": True, "FILES_API_MIN_BYTES": 0}
    [item] = uploaded(owner_client, session, ("shot.png", png(30, 20), "image/png"))

    send_with_attachments(owner_client, session, run_tasks, "What is this?", [item["id"]])
    run_tasks(post, owner_client, session, "messages", {"content": "Plain words"})

    assert file_requests(llm) == []
    for entry in message_entries(llm):
        assert "anthropic-beta" not in entry["headers"]
    assert message_entries(llm)[0]["json"]["messages"][0]["content"][0]["type"] == "image"


def test_a_failed_upload_fails_the_run_resumably_writes_nothing_and_continue_uploads(
    owner_client, session, llm, run_tasks, files_api
):
    data = pdf(2)
    [item] = uploaded(owner_client, session, ("report.pdf", data, PDF))
    # Every attempt of the SDK's retries (LLM_MAX_RETRIES) fails.
    attempts = int(ahentic_settings.LLM_MAX_RETRIES) + 1
    llm.fail_uploads(*(error_reply(500, retry_after_ms=1) for _ in range(attempts)))

    send_with_attachments(owner_client, session, run_tasks, "Summarize it", [item["id"]])

    body = payload_of(owner_client, session)
    assert body["status"] == Session.Status.ERROR
    assert body["lastErrorCode"] == "ahentic_attachment_upload"
    assert body["jobResumable"] is True
    assert "could not be uploaded" in body["lastError"]
    assert len(file_requests(llm)) == attempts
    assert message_entries(llm) == []
    assert llm.files == {}
    row = Attachment.objects.get(pk=item["id"])
    assert (row.file_id, row.sent_as) == ("", "")

    llm.enqueue(text_reply("Got it now."))
    response = run_tasks(owner_client.post, session_url(session, "continue"))

    assert response.status_code == 200, response.content
    assert payload_of(owner_client, session)["status"] == Session.Status.IDLE
    [file_id] = llm.files
    assert Attachment.objects.get(pk=item["id"]).file_id == file_id
    [entry] = message_entries(llm)
    document = entry["json"]["messages"][0]["content"][0]
    assert document == {"type": "document", "source": {"type": "file", "file_id": file_id}}


def test_deleting_the_session_deletes_the_uploaded_file(
    owner_client, session, llm, run_tasks, files_api
):
    [item] = uploaded(owner_client, session, ("report.pdf", pdf(2), PDF))
    send_with_attachments(owner_client, session, run_tasks, "Keep this", [item["id"]])
    [file_id] = llm.files

    response = run_tasks(owner_client.delete, session_url(session))
    run_tasks(purge_deleted_chats, (timezone.now() + timedelta(days=1)).isoformat())

    assert response.status_code == 204
    assert llm.files == {}
    [deletion] = file_requests(llm, "DELETE")
    assert (deletion["path"], deletion["status"]) == (f"/v1/files/{file_id}", 200)
    assert FILES_BETA in betas(deletion)


def test_the_system_check_takes_the_files_api_and_refuses_a_bad_threshold(settings):
    from orchestrator_app.checks import check_ahentic_settings

    settings.AHENTIC = {**settings.AHENTIC, "FILES_API": True, "FILES_API_MIN_BYTES": 0}
    assert [e for e in check_ahentic_settings() if e.id == "ahentic.E008"] == []

    settings.AHENTIC = {**settings.AHENTIC, "FILES_API": 1, "FILES_API_MIN_BYTES": -1}
    messages = [e.msg for e in check_ahentic_settings() if e.id == "ahentic.E008"]
    assert len(messages) == 2
    assert "FILES_API'] must be True or False" in messages[0]
    assert "FILES_API_MIN_BYTES" in messages[1]


# --- the local server refuses what the real API refuses ---------------------------------------


@pytest.fixture
def sdk(llm):
    import anthropic

    return anthropic.Anthropic(api_key="test-key", base_url=llm.url, max_retries=0)


def test_the_local_api_takes_a_file_source_only_with_the_beta_and_a_file_it_holds(sdk, llm):
    import anthropic

    upload = sdk.beta.files.upload(file=("a.pdf", pdf(2), PDF), betas=[FILES_BETA])
    assert (upload.type, upload.filename, upload.downloadable) == ("file", "a.pdf", False)

    def ask(file_id: str, **extra):
        document = {"type": "document", "source": {"type": "file", "file_id": file_id}}
        return sdk.messages.create(
            model="claude-test",
            max_tokens=50,
            messages=[{"role": "user", "content": [document, {"type": "text", "text": "hi"}]}],
            **extra,
        )

    beta = {"extra_headers": {"anthropic-beta": FILES_BETA}}
    with pytest.raises(anthropic.BadRequestError, match="requires the beta header"):
        ask(upload.id)
    with pytest.raises(anthropic.BadRequestError, match="File not found"):
        ask("file_unknown", **beta)
    reply = ask(upload.id, **beta)
    assert reply.usage.input_tokens == 2 * 3000 + 1 + 4  # pages, the text, the role
    with pytest.raises(anthropic.BadRequestError, match="requires the beta header"):
        sdk.beta.files.upload(file=("a.pdf", pdf(2), PDF))
    sdk.beta.files.delete(upload.id, betas=[FILES_BETA])
    with pytest.raises(anthropic.NotFoundError):
        sdk.beta.files.delete(upload.id, betas=[FILES_BETA])
    llm.reset()  # the rejections are the point here (llm_strict checks the rest)
