"""Attachments under abuse, through the HTTP API: image dimensions the Messages API refuses
(scaled down at upload, a decompression bomb refused before decoding, at most 100 images per
request), uploads streamed rather than read whole, the shared write throttle, the per-user
quota, the per-chat limit under interleaved and concurrent uploads, a chat deleted during an
upload, malformed forms as the API's ``{code, detail}``, and served files sandboxed.

The model is the strict local Messages API server (which refuses what the real API refuses,
image dimensions and counts included), reached through the real SDK.
"""

from __future__ import annotations

import io
import json
import struct
import threading
import tracemalloc
import zlib

import pytest
from django.core.cache import cache
from django.core.files.storage import InMemoryStorage
from django.db import connection
from django.db.models.signals import pre_delete
from django.test import Client
from PIL import Image

from orchestrator_app.testing.localapi import text_reply
from sessions_app import attachments as attachment_store
from sessions_app import media
from sessions_app.conf import ahentic_settings
from sessions_app.models import Attachment, Session
from tests.support.api import csrf_client, csrf_token_for, post, session_url
from tests.support.attachment_files import pdf, png
from tests.support.attachments import multipart, upload_multipart
from tests.support.factories import SessionFactory
from tests.support.model import model_requests

pytestmark = pytest.mark.usefixtures("llm_strict")


def uploaded(client, session, *files) -> list[dict]:
    response = upload_multipart(client, session, *files)
    assert response.status_code == 201, response.content
    return response.json()["attachments"]


def png_header(width: int, height: int) -> bytes:
    """A PNG's signature and header claiming ``width`` x ``height``, with no pixels: what a
    decompression bomb looks like to anything that does not decode it."""
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    body = b"IHDR" + header
    chunk = struct.pack(">I", len(header)) + body + struct.pack(">I", zlib.crc32(body))
    return b"\x89PNG\r\n\x1a\n" + chunk + b"\x00" * 64


def jpeg(width: int, height: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (20, 120, 200)).save(out, format="JPEG", quality=70)
    return out.getvalue()


def image_size_of(data: bytes) -> tuple[int, int]:
    return Image.open(io.BytesIO(data)).size


def served(client, item) -> bytes:
    response = client.get(item["url"])
    assert response.status_code == 200
    return b"".join(response.streaming_content)


def images_of(request: dict) -> list[dict]:
    found = []
    for message in request["messages"]:
        for block in message["content"] if isinstance(message["content"], list) else []:
            if block["type"] == "image":
                found.append(block)
            elif block["type"] == "tool_result" and isinstance(block.get("content"), list):
                found += [b for b in block["content"] if b["type"] == "image"]
    return found


# --- 1. image dimensions -----------------------------------------------------------------------


def test_an_image_over_2000_px_is_scaled_to_fit_and_sent_so(owner_client, session, llm, run_tasks):
    [item] = uploaded(owner_client, session, ("wide.png", png(3000, 1200)))

    assert (item["width"], item["height"]) == (2000, 800)
    data = served(owner_client, item)
    assert image_size_of(data) == (2000, 800)
    assert item["size"] == len(data)
    assert media.sniff(data) == media.PNG
    response = run_tasks(
        post, owner_client, session, "messages", {"content": "Wide?", "attachments": [item["id"]]}
    )
    assert response.status_code == 202, response.content
    [request] = [e["json"] for e in model_requests(llm, ahentic_settings.MODEL)]
    [image] = images_of(request)
    assert media.image_size(media.decoded(image["source"])) == (2000, 800)


def test_a_large_jpeg_is_decoded_at_a_reduced_scale_within_the_pixel_bound(
    owner_client, session, settings
):
    # 4400x2200 is 9.7 megapixels; the JPEG decoder's draft at half scale (2200x1100, 2.4 MP)
    # covers 2000x1000, so it fits a bound of 2.5 MP. A PNG of that size decodes whole.
    settings.AHENTIC = {**settings.AHENTIC, "ATTACHMENT_MAX_IMAGE_PIXELS": 2_500_000}

    [item] = uploaded(owner_client, session, ("photo.jpg", jpeg(4400, 2200)))
    response = upload_multipart(owner_client, session, ("screen.png", png_header(4400, 2200)))

    assert (item["width"], item["height"]) == (2000, 1000)
    assert image_size_of(served(owner_client, item)) == (2000, 1000)
    assert response.status_code == 413
    assert response.json()["code"] == "ahentic_attachment_too_many_pixels"
    assert "4400x2200" in response.json()["detail"]


def test_a_decompression_bomb_is_refused_before_decoding(owner_client, session):
    response = upload_multipart(owner_client, session, ("bomb.png", png_header(60_000, 60_000)))

    assert response.status_code == 413
    body = response.json()
    assert body["code"] == "ahentic_attachment_too_many_pixels"
    assert "'bomb.png' is 60000x60000 pixels" in body["detail"]
    assert not Attachment.objects.exists()


def test_a_tool_image_over_2000_px_is_scaled_too(owner_client, session, llm, run_tasks):
    from orchestrator_app.testing.localapi import tool_call, tool_reply
    from orchestrator_app.tools import tool, unregister
    from sessions_app.attachments import ToolImage

    @tool(name="tall_shot", description="A tall screenshot.", readonly=True)
    def tall_shot(ctx, input):
        return {"ok": True, "images": [ToolImage(png(900, 4500), "tall.png")]}

    try:
        llm.enqueue(tool_reply(tool_call("tall_shot", {}, id="toolu_tall")), text_reply("Tall."))
        response = run_tasks(post, owner_client, session, "messages", {"content": "Shoot"})
    finally:
        unregister("tall_shot")

    assert response.status_code == 202, response.content
    request = [e["json"] for e in model_requests(llm, ahentic_settings.MODEL)][1]
    [image] = images_of(request)
    assert media.image_size(media.decoded(image["source"])) == (400, 2000)


def test_a_tool_image_past_the_users_quota_is_dropped_with_a_note(
    owner_client, session, llm, run_tasks, settings
):
    from orchestrator_app.testing.localapi import tool_call, tool_reply
    from orchestrator_app.tools import tool, unregister
    from sessions_app.attachments import ToolImage

    data = png(300, 200)
    settings.AHENTIC = {**settings.AHENTIC, "ATTACHMENT_QUOTA_BYTES": len(data) + 10}
    uploaded(owner_client, session, ("mine.png", png(300, 200)))

    @tool(name="shot", description="A screenshot.", readonly=True)
    def shot(ctx, input):
        return {"ok": True, "images": [ToolImage(data, "shot.png")]}

    try:
        llm.enqueue(tool_reply(tool_call("shot", {}, id="toolu_shot")), text_reply("Ok."))
        response = run_tasks(post, owner_client, session, "messages", {"content": "Shoot"})
    finally:
        unregister("shot")

    assert response.status_code == 202, response.content
    request = [e["json"] for e in model_requests(llm, ahentic_settings.MODEL)][1]
    assert images_of(request) == []
    assert "shot.png: not sent (Your attachments take" in str(request["messages"][-1])
    assert Attachment.objects.count() == 1


def test_the_system_checks_refuse_a_pixel_bound_or_quota_that_is_not_a_count(settings):
    from orchestrator_app.checks import check_ahentic_settings

    settings.AHENTIC = {
        **settings.AHENTIC,
        "ATTACHMENT_MAX_IMAGE_PIXELS": 0,
        "ATTACHMENT_QUOTA_BYTES": "1 GB",
    }

    messages = [e.msg for e in check_ahentic_settings() if e.id == "ahentic.E008"]

    assert messages == [
        "AHENTIC['ATTACHMENT_MAX_IMAGE_PIXELS'] must be a positive integer.",
        "AHENTIC['ATTACHMENT_QUOTA_BYTES'] must be a positive integer.",
    ]
    settings.AHENTIC = {
        **settings.AHENTIC,
        "ATTACHMENT_MAX_IMAGE_PIXELS": 10,
        "ATTACHMENT_QUOTA_BYTES": None,
    }
    assert not [e for e in check_ahentic_settings() if e.id == "ahentic.E008"]


def test_a_request_carries_at_most_100_images_the_oldest_noted(
    owner_client, session, llm, run_tasks, settings
):
    settings.AHENTIC = {**settings.AHENTIC, "ATTACHMENT_MAX_PER_SESSION": 200}
    sent = []
    for turn in range(21):  # 105 images over 21 messages
        items = uploaded(
            owner_client, session, *[(f"{turn}-{n}.png", png(3, 2 + n)) for n in range(5)]
        )
        sent.append(items)
        llm.enqueue(text_reply(f"Seen {turn}."))
        response = run_tasks(
            post,
            owner_client,
            session,
            "messages",
            {"content": f"Look {turn}", "attachments": [i["id"] for i in items]},
        )
        assert response.status_code == 202, response.content

    requests = [e["json"] for e in model_requests(llm, ahentic_settings.MODEL)]
    assert [len(images_of(r)) for r in requests][-2:] == [100, 100]
    last = requests[-1]
    # The first message's five images are notes now; the newest 100 are sent.
    first = last["messages"][0]["content"]
    assert [b["type"] for b in first[:5]] == ["text"] * 5
    assert "a request carries at most 100 images" in first[0]["text"]
    assert media.image_size(media.decoded(images_of(last)[0]["source"])) == (3, 2)


def test_a_chat_of_large_pdfs_stays_within_the_requests_size_the_oldest_noted(
    owner_client, session, llm, run_tasks
):
    """Three 9 MiB PDFs are about 38 MB of base64: past the 32 MB a request may be, which a
    chat sending its history every turn would hit for good. The newest two are sent, the
    oldest is a note, and the strict local API (which refuses a body over 32 MB) answers."""
    for turn in range(3):
        [item] = uploaded(owner_client, session, (f"{turn}.pdf", pdf() + b"%" * (9 << 20)))
        llm.enqueue(text_reply(f"Read {turn}."))
        response = run_tasks(
            post,
            owner_client,
            session,
            "messages",
            {"content": f"Read {turn}", "attachments": [item["id"]]},
        )
        assert response.status_code == 202, response.content

    entries = [
        e
        for e in llm.requests
        if e["path"] == "/v1/messages" and (e["json"] or {}).get("model") == ahentic_settings.MODEL
    ]
    assert [e["status"] for e in entries] == [200, 200, 200]
    last = entries[-1]["json"]
    blocks = [b for m in last["messages"] if m["role"] == "user" for b in m["content"]]
    assert [b["type"] for b in blocks if b["type"] == "document"] == ["document"] * 2
    assert "An earlier PDF is not sent again" in blocks[0]["text"]
    assert len(json.dumps(last)) < media.API_MAX_REQUEST_BYTES


@pytest.mark.parametrize(
    ("count", "size", "message"),
    [
        (1, (8001, 10), "exceed max allowed size: 8000 pixels"),
        (21, (2001, 10), "exceed max allowed size for many-image requests: 2000 pixels"),
        (101, (10, 10), "Too many images: 101 > 100"),
    ],
)
def test_the_local_api_refuses_images_the_real_api_refuses(llm, count, size, message):
    import base64

    import anthropic

    sdk = anthropic.Anthropic(api_key="test-key", base_url=llm.url, max_retries=0)
    data = base64.b64encode(png_header(*size)).decode()
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}

    with pytest.raises(anthropic.BadRequestError, match=message):
        sdk.messages.create(
            model="claude-test",
            max_tokens=10,
            messages=[
                {"role": "user", "content": [image] * count + [{"type": "text", "text": "?"}]}
            ],
        )
    llm.reset()


# --- 2. memory ---------------------------------------------------------------------------------


@pytest.fixture
def disk_storage(settings, tmp_path):
    settings.STORAGES = {
        **settings.STORAGES,
        "ahentic_disk": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path)},
        },
    }
    settings.AHENTIC = {**settings.AHENTIC, "ATTACHMENT_STORAGE": "ahentic_disk"}


def test_an_upload_is_streamed_never_held_whole_in_memory(owner_client, session, disk_storage):
    size = 8 * 1024 * 1024
    data = pdf(1)[:-6] + b"%" + b"x" * (size - len(pdf(1))) + b"%%EOF\n"
    body, content_type = multipart(("big.pdf", data))
    url = session_url(session, "attachments")

    tracemalloc.start()
    try:
        response = owner_client.post(url, body, content_type=content_type)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert response.status_code == 201, response.content
    assert response.json()["attachments"][0]["size"] == len(data)
    # The test client's own copy of the body is one size; reading the file whole is another.
    assert peak < size * 1.5, peak


def test_a_file_over_its_limit_is_stopped_at_the_limit(owner_client, session, settings):
    settings.AHENTIC = {**settings.AHENTIC, "ATTACHMENT_MAX_PDF_BYTES": 100_000}

    response = upload_multipart(owner_client, session, ("big.pdf", pdf() + b"%" * 300_000))

    assert response.status_code == 413
    body = response.json()
    assert body["code"] == "ahentic_attachment_too_large"
    assert body["detail"] == (
        "'big.pdf' is more than 97.7\xa0KB; a file of this type can be at most 97.7\xa0KB. "
        "Attach a smaller file."
    )


# --- 3. abuse ----------------------------------------------------------------------------------


def test_uploads_share_the_write_routes_rate(owner_client, session, settings, llm):
    from unittest import mock

    cache.clear()
    settings.AHENTIC = {**settings.AHENTIC, "THROTTLE_MESSAGES": "2/min"}
    try:
        first = upload_multipart(owner_client, session, ("a.png", png()))
        with mock.patch("orchestrator_app.control.queue.async_task"):  # no step runs
            message = post(owner_client, session, "messages", {"content": "hi"})
        third = upload_multipart(owner_client, session, ("b.png", png()))
    finally:
        cache.clear()

    assert (first.status_code, message.status_code) == (201, 202)
    assert third.status_code == 429
    assert third.json()["code"] == "ahentic_throttled"
    assert Attachment.objects.count() == 1


def test_a_users_files_stay_within_their_quota(owner_client, other_client, owner, other, settings):
    data = pdf(1) + b"%" * 1000
    settings.AHENTIC = {**settings.AHENTIC, "ATTACHMENT_QUOTA_BYTES": 2 * len(data) + 10}
    first, second = SessionFactory(owner=owner), SessionFactory(owner=owner)
    uploaded(owner_client, first, ("1.pdf", data))
    uploaded(other_client, SessionFactory(owner=other), ("theirs.pdf", data), ("2.pdf", data))

    response = upload_multipart(owner_client, second, ("2.pdf", data), ("3.pdf", data))

    assert response.status_code == 409
    body = response.json()
    assert body["code"] == "ahentic_attachment_quota"
    assert (
        "storage quota of 2.3\xa0KB. Delete chats with files you no longer need."
        in (body["detail"])
    )
    assert not Attachment.objects.filter(session=second).exists()
    # One more file fits, whatever the other user holds.
    uploaded(owner_client, second, ("2.pdf", data))


class HookedStorage(InMemoryStorage):
    """An in-memory storage that runs ``hook`` once, after it saves the next file: what
    another request does while an upload is between its checks and its rows."""

    hook = None

    def _save(self, name, content):
        saved = super()._save(name, content)
        hook, HookedStorage.hook = HookedStorage.hook, None
        if hook is not None:
            hook()
        return saved


@pytest.fixture
def hooked(settings):
    settings.STORAGES = {
        **settings.STORAGES,
        "ahentic_hooked": {"BACKEND": f"{__name__}.HookedStorage"},
    }
    settings.AHENTIC = {**settings.AHENTIC, "ATTACHMENT_STORAGE": "ahentic_hooked"}
    yield HookedStorage
    HookedStorage.hook = None


def stored_files(session) -> list[str]:
    try:
        return attachment_store.storage().listdir(f"ahentic/attachments/{session.pk}")[1]
    except FileNotFoundError:
        return []


def test_the_chat_limit_holds_when_uploads_interleave(owner_client, session, settings, hooked):
    settings.AHENTIC = {**settings.AHENTIC, "ATTACHMENT_MAX_PER_SESSION": 4}
    uploaded(owner_client, session, ("1.png", png()), ("2.png", png()))
    inner = []
    # Another upload of two files completes while this one saves its files.
    hooked.hook = lambda: inner.append(
        upload_multipart(owner_client, session, ("5.png", png()), ("6.png", png()))
    )

    response = upload_multipart(owner_client, session, ("3.png", png()), ("4.png", png()))

    assert inner[0].status_code == 201
    assert response.status_code == 400
    assert response.json()["code"] == "ahentic_attachment_limit"
    assert Attachment.objects.filter(session=session).count() == 4
    assert len(stored_files(session)) == 4  # the refused upload's files are gone


@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="concurrent uploads need PostgreSQL's row locks"
)
@pytest.mark.django_db(transaction=True)
def test_the_chat_limit_holds_under_concurrent_uploads(owner, settings):
    settings.AHENTIC = {**settings.AHENTIC, "ATTACHMENT_MAX_PER_SESSION": 10, "API_KEY": "k"}
    session = SessionFactory(owner=owner)
    start = threading.Barrier(8)
    statuses = []

    def one(n):
        client = Client()
        client.force_login(owner)
        body, content_type = multipart(*[(f"{n}-{k}.png", png()) for k in range(2)])
        start.wait()
        response = client.post(session_url(session, "attachments"), body, content_type=content_type)
        statuses.append(response.status_code)
        connection.close()

    threads = [threading.Thread(target=one, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    assert sorted(statuses) == [201] * 5 + [400] * 3
    assert Attachment.objects.filter(session=session).count() == 10
    assert len(stored_files(session)) == 10
    connection.close()


# --- 4. errors ---------------------------------------------------------------------------------


def test_a_chat_deleted_during_an_upload_is_a_404_and_keeps_nothing(owner_client, session, hooked):
    deleted = []
    hooked.hook = lambda: deleted.append(owner_client.delete(session_url(session)))

    response = upload_multipart(owner_client, session, ("late.png", png()))

    assert deleted[0].status_code == 204
    assert response.status_code == 404
    assert response.json()["code"] == "ahentic_session_not_found"
    assert owner_client.get(session_url(session)).status_code == 404
    assert not Attachment.objects.exists()
    assert stored_files(session) == []


@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="the delete race needs PostgreSQL's row locks"
)
@pytest.mark.django_db(transaction=True)
def test_an_upload_racing_a_chat_delete_waits_for_it_and_is_a_404(owner, settings):
    """The delete has gathered the chat's rows (none) when an upload to it starts: the upload
    must not insert a row the delete did not gather (a foreign-key error, a 500). The chat's
    row is locked first, so the upload waits for the delete and then finds no chat. With no
    undo window the API's delete purges the chat at once (the purge task does the same later
    otherwise), so the race is the one the purge meets."""
    settings.AHENTIC = {**settings.AHENTIC, "HISTORY_UNDO_S": 0}
    session = SessionFactory(owner=owner)
    uploads = []

    def upload_now():
        client = Client()
        client.force_login(owner)
        body, content_type = multipart(("racing.png", png()))
        uploads.append(
            client.post(session_url(session, "attachments"), body, content_type=content_type)
        )
        connection.close()

    racer = threading.Thread(target=upload_now)

    def during_the_delete(sender, instance, **kwargs):
        if instance.pk == session.pk and not racer.is_alive() and not uploads:
            racer.start()
            racer.join(3)  # an upload that is not held by the lock is done by then

    pre_delete.connect(during_the_delete, sender=Session, dispatch_uid="test_delete_race")
    try:
        client = Client()
        client.force_login(owner)
        deleted = client.delete(session_url(session))
        racer.join(60)
    finally:
        pre_delete.disconnect(sender=Session, dispatch_uid="test_delete_race")

    assert deleted.status_code == 204
    assert uploads[0].status_code == 404, uploads[0].content
    assert uploads[0].json()["code"] == "ahentic_session_not_found"
    assert not Attachment.objects.exists()
    assert stored_files(session) == []
    connection.close()


@pytest.fixture(params=["test client", "csrf checked"])
def any_client(request, owner, owner_client):
    """The upload's body is read by the view, or first by the CSRF check of a browser's
    session (as in production)."""
    if request.param == "test client":
        return owner_client, {}
    owner.set_password("pw")
    owner.save()
    client = csrf_client(owner)
    return client, {"X-CSRFToken": csrf_token_for(client)}


def test_a_form_of_100_files_or_more_is_the_apis_json_error(any_client, session):
    client, headers = any_client

    response = upload_multipart(
        client, session, *[(f"{n}.png", png()) for n in range(101)], headers=headers
    )

    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert response.json()["code"] == "ahentic_attachment_limit"
    assert "a message takes at most 5" in response.json()["detail"]
    assert not Attachment.objects.exists()


def test_a_very_long_file_name_is_an_error_naming_the_file_name(any_client, session):
    client, headers = any_client
    name = "quarterly-report-" + "x" * 2000 + ".png"

    response = upload_multipart(client, session, (name, png()), headers=headers)

    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "ahentic_attachment_name"
    assert body["detail"].startswith("The file name 'quarterly-report-xxx")
    assert "too long" in body["detail"]
    assert "JSON" not in body["detail"]


def test_a_form_without_a_boundary_is_the_apis_json_error(any_client, session):
    client, headers = any_client

    response = client.post(
        session_url(session, "attachments"),
        b"--x\r\n",
        content_type="multipart/form-data",
        headers=headers,
    )

    assert response.status_code == 400
    assert response.json()["code"] == "ahentic_upload_malformed"
    assert "boundary" in response.json()["detail"]


def test_a_long_file_name_that_fits_the_form_keeps_its_extension(owner_client, session):
    [item] = uploaded(owner_client, session, ("n" * 400 + ".png", png()))

    assert len(item["name"]) == 255
    assert item["name"].endswith("n.png")


def test_a_refused_file_in_a_csrf_checked_upload_is_the_apis_json_error(any_client, session):
    client, headers = any_client

    response = upload_multipart(
        client, session, ("a.png", png()), ("x.exe", b"MZ" + b"\0" * 64), headers=headers
    )

    assert response.status_code == 400
    assert response.json()["code"] == "ahentic_attachment_type"
    assert not Attachment.objects.exists()


# --- 5. served files ---------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "data"), [("doc.pdf", pdf()), ("shot.png", png())])
def test_a_served_file_is_sandboxed(owner_client, session, name, data):
    [item] = uploaded(owner_client, session, (name, data))

    response = owner_client.get(item["url"])

    assert response.status_code == 200
    assert response["Content-Security-Policy"] == "sandbox"
    assert response["X-Content-Type-Options"] == "nosniff"
