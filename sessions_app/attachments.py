"""Attachments: files a user attaches to a message, and images tools return.

Stored through Django's storage API (``AHENTIC["ATTACHMENT_STORAGE"]`` names a ``STORAGES``
alias; None is ``default_storage``), typed from their bytes (``media.sniff``), never from a
name or a declared type. A message takes the uploads it names (``claim``); its event keeps
their ``refs``, and the request builder turns each into an image or document block whose bytes
never change once sent (``content_block``, encoded once per process), so the prompt cache holds:
a PDF is sent as base64 or, with ``FILES_API``, as an uploaded file, decided the first time a
request carries it and kept.
A row's file is deleted once the deletion of the row commits (its session's, its user's or its
own: ``_file_delete``).
"""

from __future__ import annotations

import base64
import hashlib
import threading
import uuid
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage, storages
from django.db.models.signals import post_delete

from . import db, media
from .conf import ahentic_settings
from .models import Attachment

MAX_NAME_CHARS = 255
EXTENSIONS = {
    media.PNG: ".png",
    media.JPEG: ".jpg",
    media.GIF: ".gif",
    media.WEBP: ".webp",
    media.PDF: ".pdf",
}
ALLOWED = "PNG, JPEG, GIF, WebP images and PDF documents"


class AttachmentError(Exception):
    """A refused attachment: a stable code, a detail for the user and the HTTP status."""

    def __init__(self, code: str, detail: str, status: int = 400):
        super().__init__(detail)
        self.code = code
        self.detail = detail
        self.status = status


def storage():
    alias = ahentic_settings.ATTACHMENT_STORAGE
    return storages[alias] if alias else default_storage


def max_bytes(content_type: str) -> int:
    if content_type == media.PDF:
        return int(ahentic_settings.ATTACHMENT_MAX_PDF_BYTES)
    return int(ahentic_settings.ATTACHMENT_MAX_IMAGE_BYTES)


def largest_file() -> int:
    return max(max_bytes(media.PDF), max_bytes(media.PNG))


def upload_limit() -> int:
    """The largest body the upload route reads: a message's worth of the largest files, and
    room for the multipart framing."""
    return largest_file() * int(ahentic_settings.ATTACHMENT_MAX_PER_MESSAGE) + 64 * 1024


def _clean_name(name: str, content_type: str) -> str:
    name = "".join(ch for ch in (name or "").replace("\\", "/").rsplit("/", 1)[-1] if ch >= " ")
    name = name.strip()[:MAX_NAME_CHARS] or f"attachment{EXTENSIONS[content_type]}"
    return name


def inspect(name: str, data: bytes) -> dict[str, Any]:
    """What a file is, read from its bytes, or ``AttachmentError``: its type (400
    ``ahentic_attachment_type`` unless one of ``media.TYPES``), size (413
    ``ahentic_attachment_too_large``), an image's width and height, a PDF's pages."""
    content_type = media.sniff(data)
    if content_type is None:
        raise AttachmentError(
            "ahentic_attachment_type",
            f"{_clean_name(name, media.PNG)!r} is not an allowed file; attach {ALLOWED}.",
        )
    limit = max_bytes(content_type)
    if len(data) > limit:
        raise AttachmentError(
            "ahentic_attachment_too_large",
            f"{_clean_name(name, content_type)!r} is {len(data)} bytes; "
            f"the limit for this type is {limit}.",
            413,
        )
    width = height = None
    pages = 0
    if content_type == media.PDF:
        pages = media.pdf_pages(data)
    else:
        size = media.image_size(data)
        if size is None or not all(size):
            raise AttachmentError(
                "ahentic_attachment_type",
                f"{_clean_name(name, content_type)!r} is not a readable {content_type} image.",
            )
        width, height = size
    return {
        "name": _clean_name(name, content_type),
        "content_type": content_type,
        "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "width": width,
        "height": height,
        "pages": pages,
        "token_count": media.attachment_tokens(content_type, width, height, pages),
    }


def store(*, session_id, name: str, data: bytes, source: str = Attachment.Source.UPLOAD):
    """Store one file of the session (``inspect`` first); returns its row."""
    facts = inspect(name, data)
    pk = uuid.uuid4()
    path = f"ahentic/attachments/{session_id}/{pk}{EXTENSIONS[facts['content_type']]}"
    saved = storage().save(path, ContentFile(data))
    try:
        return Attachment.objects.create(pk=pk, session_id=session_id, storage_name=saved, **facts)
    except Exception:
        storage().delete(saved)  # no file without its row
        raise


def store_uploads(*, session_id, files: list[tuple[str, bytes]]) -> list[Attachment]:
    """The upload route: every file checked before any is stored, within the count limits
    (400 ``ahentic_attachment_limit``)."""
    per_message = int(ahentic_settings.ATTACHMENT_MAX_PER_MESSAGE)
    if not files:
        raise AttachmentError("ahentic_attachment_missing", "Send the files in the field 'file'.")
    if len(files) > per_message:
        raise AttachmentError(
            "ahentic_attachment_limit",
            f"{len(files)} files; a message takes at most {per_message}.",
        )
    per_session = int(ahentic_settings.ATTACHMENT_MAX_PER_SESSION)
    held = Attachment.objects.filter(session_id=session_id).count()
    if held + len(files) > per_session:
        raise AttachmentError(
            "ahentic_attachment_limit",
            f"This chat holds {held} attachments; a chat holds at most {per_session}.",
        )
    for name, data in files:
        inspect(name, data)
    return [store(session_id=session_id, name=name, data=data) for name, data in files]


def ref(attachment: Attachment) -> dict[str, Any]:
    """What an event keeps of an attachment: enough to build its block and show it."""
    return {
        "id": str(attachment.pk),
        "name": attachment.name,
        "contentType": attachment.content_type,
        "size": attachment.size,
        "width": attachment.width,
        "height": attachment.height,
        "pages": attachment.pages,
        "sha256": attachment.sha256,
        "tokens": attachment.token_count,
    }


def claim(*, session_id, ids: Iterable[str], take: bool = True) -> list[dict[str, Any]]:
    """Take the session's unsent uploads ``ids`` for one message, in the caller's
    transaction; their refs in the order given (``take=False``: only check them). 400 ``ahentic_attachment_invalid`` when one is
    not an unsent upload of this session (another session's or user's, sent already, unknown),
    ``ahentic_attachment_limit`` over the per-message count."""
    wanted: list[uuid.UUID] = []
    for value in ids:
        try:
            key = uuid.UUID(str(value))
        except ValueError:
            raise AttachmentError(
                "ahentic_attachment_invalid", f"{str(value)[:64]!r} is not an attachment id."
            ) from None
        if key not in wanted:
            wanted.append(key)
    if not wanted:
        return []
    per_message = int(ahentic_settings.ATTACHMENT_MAX_PER_MESSAGE)
    if len(wanted) > per_message:
        raise AttachmentError(
            "ahentic_attachment_limit",
            f"{len(wanted)} attachments; a message takes at most {per_message}.",
        )
    with db.atomic(Attachment):
        rows = Attachment.objects.select_for_update().filter(
            session_id=session_id, pk__in=wanted, sent=False, source=Attachment.Source.UPLOAD
        )
        found = {row.pk: row for row in rows}
        missing = [str(key) for key in wanted if key not in found]
        if missing:
            raise AttachmentError(
                "ahentic_attachment_invalid",
                f"Not an unsent attachment of this chat: {', '.join(missing)}. Upload the file "
                "to this chat (POST attachments) and send each upload once.",
            )
        if take:
            Attachment.objects.filter(pk__in=wanted).update(sent=True)
    return [ref(found[key]) for key in wanted]


# --- images tools return -----------------------------------------------------------------------


@dataclass(frozen=True)
class ToolImage:
    """An image a tool returns: ``{"ok": True, ..., "images": [ToolImage(data, "chart.png")]}``.
    It is stored as an attachment of the session and sent in the tool's tool_result."""

    data: bytes
    name: str = "image.png"


def tool_images(*, session_id, result: dict[str, Any]) -> tuple[dict[str, Any], list[dict]]:
    """A tool result without its ``ToolImage``s, which are stored (``source=tool``): the
    result, with a line per image for the model's text, and the images' refs. A value that is
    not an image the API takes is dropped with a note; at most ``ATTACHMENT_MAX_PER_MESSAGE``
    images are kept."""
    images = result.get("images")
    if not isinstance(images, list | tuple) or not any(isinstance(i, ToolImage) for i in images):
        return result, []
    limit = int(ahentic_settings.ATTACHMENT_MAX_PER_MESSAGE)
    refs: list[dict[str, Any]] = []
    lines: list[str] = []
    for image in images:
        if not isinstance(image, ToolImage):
            continue
        if len(refs) >= limit:
            lines.append(f"{image.name}: not sent (a result carries at most {limit} images)")
            continue
        try:
            facts = inspect(image.name, bytes(image.data))
            if facts["content_type"] not in media.IMAGE_TYPES:
                raise AttachmentError("ahentic_attachment_type", f"{image.name}: not an image")
            row = store(
                session_id=session_id, name=image.name, data=bytes(image.data), source="tool"
            )
        except AttachmentError as exc:
            lines.append(f"{image.name}: not sent ({exc.detail})")
            continue
        refs.append(ref(row))
        lines.append(f"{row.name} ({row.content_type}, {row.width}x{row.height}): attached below")
    return {**result, "images": lines}, refs


# --- the request blocks ----------------------------------------------------------------------

# How a PDF is sent (``Attachment.sent_as``); images are always base64.
BASE64 = "base64"
FILE = "file"

# Built blocks kept per process, by attachment id, digest and form, up to this many base64
# bytes (the least recently used go first). A block is the same bytes every time it is built:
# the stored file never changes, its encoding is deterministic, and a PDF's form is decided
# once (``decide_base64``, ``record_file``); only decided blocks are kept.
BLOCK_CACHE_BYTES = 64 * 1024 * 1024


class _BlockCache:
    def __init__(self):
        self.blocks: OrderedDict[tuple[str, str, str], tuple[dict[str, Any], int]] = OrderedDict()
        self.size = 0
        self.lock = threading.Lock()

    def get(self, key):
        with self.lock:
            entry = self.blocks.get(key)
            if entry is None:
                return None
            self.blocks.move_to_end(key)
            return entry[0]

    def put(self, key, block: dict[str, Any], size: int) -> None:
        with self.lock:
            if key in self.blocks:
                return
            self.blocks[key] = (block, size)
            self.size += size
            while self.size > BLOCK_CACHE_BYTES and len(self.blocks) > 1:
                _, (_, dropped) = self.blocks.popitem(last=False)
                self.size -= dropped


_blocks = _BlockCache()


def read_bytes(storage_name: str) -> bytes | None:
    try:
        with storage().open(storage_name, "rb") as handle:
            return handle.read()
    except (FileNotFoundError, OSError):
        return None


def wants_file(content_type: str, size: int) -> bool:
    """Whether a PDF not sent yet goes through the Files API: ``FILES_API`` is on and it is
    at least ``FILES_API_MIN_BYTES``."""
    return (
        content_type == media.PDF
        and bool(ahentic_settings.FILES_API)
        and size >= int(ahentic_settings.FILES_API_MIN_BYTES)
    )


def cached_block(item: dict[str, Any]) -> dict[str, Any] | None:
    """The decided block of a ref this process has built already, else None."""
    for form in (FILE, BASE64):
        block = _blocks.get((item["id"], item["sha256"], form))
        if block is not None:
            return block
    return None


def undecided(items: Iterable[dict[str, Any]]) -> list[Attachment]:
    """The rows of the PDF refs ``items`` whose form is not decided yet (one query, none when
    every PDF's block is in this process's cache)."""
    ids = [
        item["id"]
        for item in items
        if item.get("contentType") == media.PDF and cached_block(item) is None
    ]
    if not ids:
        return []
    return list(Attachment.objects.filter(pk__in=ids, sent_as="", file_id=""))


def decide_base64(attachment_id) -> None:
    """The PDF is sent as base64 from now on (unless its form was decided already)."""
    Attachment.objects.filter(pk=attachment_id, sent_as="", file_id="").update(sent_as=BASE64)


def record_file(attachment_id, file_id: str) -> bool:
    """The PDF is sent as the Files API's ``file_id`` from now on; False when its form was
    decided already (the caller deletes the file it uploaded)."""
    return bool(
        Attachment.objects.filter(pk=attachment_id, sent_as="", file_id="").update(
            sent_as=FILE, file_id=file_id
        )
    )


def content_block(item: dict[str, Any]) -> dict[str, Any]:
    """The image or document block of an attachment ref; a text note when its file is gone
    (or no longer the bytes that were sent). A PDF uploaded to the Files API is its file
    block; any other is its base64 block (a PDF whose form is not decided yet too, not kept:
    the step decides it before it sends a request, ``orchestrator_app.loop.files.prepare``)."""
    block = cached_block(item)
    if block is not None:
        return block
    row = (
        Attachment.objects.filter(pk=item["id"])
        .values_list("storage_name", "sent_as", "file_id")
        .first()
    )
    if row and row[2]:
        block = {"type": "document", "source": {"type": "file", "file_id": row[2]}}
        _blocks.put((item["id"], item["sha256"], FILE), block, len(row[2]))
        return block
    data = read_bytes(row[0]) if row else None
    if data is None or hashlib.sha256(data).hexdigest() != item["sha256"]:
        return {"type": "text", "text": f"[Attachment {item['name']!r} is no longer available.]"}
    kind = "document" if item["contentType"] == media.PDF else "image"
    encoded = base64.b64encode(data).decode("ascii")
    block = {
        "type": kind,
        "source": {"type": "base64", "media_type": item["contentType"], "data": encoded},
    }
    if kind == "image" or row[1] == BASE64:
        _blocks.put((item["id"], item["sha256"], BASE64), block, len(encoded))
    return block


def refs_tokens(refs: Iterable[dict[str, Any]]) -> int:
    return sum(int(item.get("tokens") or 1) for item in refs)


# --- deletion --------------------------------------------------------------------------------


def _file_delete(sender, instance: Attachment, **kwargs) -> None:
    """Delete a row's file once its deletion commits (a rolled-back delete keeps the file)."""
    name = instance.storage_name

    def delete():
        try:
            storage().delete(name)
        except OSError:
            pass  # already gone

    db.on_commit(delete, Attachment)


post_delete.connect(_file_delete, sender=Attachment, dispatch_uid="ahentic_attachment_file")
