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
import io
import tempfile
import threading
import uuid
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import IO, Any

from django.conf import settings as django_settings
from django.core.files.base import File
from django.core.files.storage import default_storage, storages
from django.db import IntegrityError
from django.db.models import Sum
from django.db.models.signals import post_delete
from django.template.defaultfilters import filesizeformat
from django.utils.translation import gettext, gettext_lazy

from . import db, media
from .conf import ahentic_settings
from .models import Attachment, AttachmentQuota, Session

MAX_NAME_CHARS = 255
EXTENSIONS = {
    media.PNG: ".png",
    media.JPEG: ".jpg",
    media.GIF: ".gif",
    media.WEBP: ".webp",
    media.PDF: ".pdf",
}
ALLOWED = gettext_lazy("PNG, JPEG, GIF, WebP images and PDF documents")
# An image over this on a side is scaled down to fit it when it is stored: every request obeys
# the API's rule for requests of more than 20 images, however many a chat holds (the API scales
# an image above a 1568 px long edge down anyway, so its tokens do not change).
MAX_IMAGE_SIDE = media.API_MANY_IMAGES_SIDE
PIL_FORMATS = {media.PNG: "PNG", media.JPEG: "JPEG", media.GIF: "GIF", media.WEBP: "WEBP"}
# One image is decoded at a time per process: its pixels are bounded (ATTACHMENT_MAX_IMAGE_PIXELS),
# so is the memory scaling takes, however many uploads arrive at once.
_decoding = threading.BoundedSemaphore(1)


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


def clean_name(name: str, content_type: str | None = None) -> str:
    """The name kept: its last path part, printable, at most ``MAX_NAME_CHARS`` (a longer one
    keeps its extension)."""
    name = "".join(ch for ch in (name or "").replace("\\", "/").rsplit("/", 1)[-1] if ch >= " ")
    name = name.strip()
    if len(name) > MAX_NAME_CHARS:
        stem, dot, extension = name.rpartition(".")
        extension = extension[:16] if dot and stem else ""
        name = name[: MAX_NAME_CHARS - len(extension) - 1].rstrip() + "." + extension
        name = name.rstrip(".")
    return name or f"attachment{EXTENSIONS.get(content_type or media.PNG, '')}"


def too_large(name: str, content_type: str, size: int, *, partial: bool = False) -> AttachmentError:
    """413 ``ahentic_attachment_too_large``; ``partial``: ``size`` is what was read when the
    upload was stopped."""
    limit = max_bytes(content_type)
    if partial:
        size_text = gettext("more than %(size)s") % {"size": human_size(limit)}
    else:
        size_text = human_size(size)
    return AttachmentError(
        "ahentic_attachment_too_large",
        gettext(
            "%(name)s is %(size)s; a file of this type can be at most %(limit)s. Attach a "
            "smaller file."
        )
        % {
            "name": repr(clean_name(name, content_type)),
            "size": size_text,
            "limit": human_size(limit),
        },
        413,
    )


def human_size(size: int) -> str:
    """A size as people read it ("2.0 MB"), in the user's language."""
    return str(filesizeformat(size))


def not_allowed(name: str) -> AttachmentError:
    return AttachmentError(
        "ahentic_attachment_type",
        gettext("%(name)s is a kind of file the agent cannot read. Attach %(allowed)s.")
        % {"name": repr(clean_name(name)), "allowed": ALLOWED},
    )


@dataclass
class Incoming:
    """A file on its way in: its bytes in ``file`` (a binary file object, on disk for an
    upload), its size and sha256, and its type read from its first bytes."""

    name: str
    file: IO[bytes]
    size: int
    sha256: str
    content_type: str

    @classmethod
    def of_bytes(cls, name: str, data: bytes) -> Incoming:
        """A file already in memory (an image a tool returned); typed and size-checked."""
        content_type = media.sniff(data)
        if content_type is None:
            raise not_allowed(name)
        if len(data) > max_bytes(content_type):
            raise too_large(name, content_type, len(data))
        return cls(
            name, io.BytesIO(data), len(data), hashlib.sha256(data).hexdigest(), content_type
        )


def inspect(incoming: Incoming) -> dict[str, Any]:
    """What a file is, read from its header (never decoding it), or ``AttachmentError``: its
    name, type, size, sha256, an image's width and height (400 ``ahentic_attachment_type`` when
    unreadable), a PDF's pages, and its tokens. An image over ``MAX_IMAGE_SIDE`` on a side is
    scaled down to fit it (``fit_image``) and the facts are the scaled file's."""
    content_type = incoming.content_type
    name = clean_name(incoming.name, content_type)
    width = height = None
    pages = 0
    if content_type == media.PDF:
        pages = _pdf_pages(incoming.file)
    else:
        size = media.image_size_file(incoming.file)
        if size is None or not all(size):
            raise AttachmentError(
                "ahentic_attachment_type", f"{name!r} is not a readable {content_type} image."
            )
        width, height = size
        if max(width, height) > MAX_IMAGE_SIDE:
            incoming, (width, height) = fit_image(incoming, width, height)
    return {
        "name": name,
        "content_type": content_type,
        "size": incoming.size,
        "sha256": incoming.sha256,
        "width": width,
        "height": height,
        "pages": pages,
        "token_count": media.attachment_tokens(content_type, width, height, pages),
        "file": incoming.file,
    }


def _pdf_pages(handle) -> int:
    """``media.pdf_pages`` over the file in chunks (a page object split by a chunk's edge is
    counted by the overlap)."""
    handle.seek(0)
    count, tail = 0, b""
    while chunk := handle.read(256 * 1024):
        window = tail + chunk
        count += len(media.PAGE.findall(window)) - len(media.PAGE.findall(tail))
        tail = window[-64:]
    return max(1, count)


def _draft_scale(content_type: str, width: int, height: int, box: tuple[int, int]) -> int:
    """The reduction a JPEG decoder applies before any pixel is kept (1, 2, 4 or 8: the largest
    that still covers ``box``); 1 for the other formats, which decode whole."""
    if content_type != media.JPEG:
        return 1
    for scale in (8, 4, 2):
        if -(-width // scale) >= box[0] and -(-height // scale) >= box[1]:
            return scale
    return 1


def fit_image(incoming: Incoming, width: int, height: int) -> tuple[Incoming, tuple[int, int]]:
    """The image scaled down to fit ``MAX_IMAGE_SIDE`` on a side, in its own format (upright:
    a JPEG's EXIF orientation is applied), and its size. Refused before any decoding (413
    ``ahentic_attachment_too_many_pixels``) when it would decode to more than
    ``ATTACHMENT_MAX_IMAGE_PIXELS``: a decompression bomb costs its header's read."""
    from PIL import Image, ImageOps

    content_type = incoming.content_type
    name = clean_name(incoming.name, content_type)
    ratio = MAX_IMAGE_SIDE / max(width, height)
    box = (max(1, round(width * ratio)), max(1, round(height * ratio)))
    bound = int(ahentic_settings.ATTACHMENT_MAX_IMAGE_PIXELS)

    def refuse(w: int, h: int) -> AttachmentError:
        return AttachmentError(
            "ahentic_attachment_too_many_pixels",
            gettext(
                "%(name)s is %(width)sx%(height)s pixels, too many to scale down (images are "
                "scaled to %(side)s px on a side from at most %(bound)s pixels, a JPEG from "
                "%(jpeg)s). Attach a smaller image."
            )
            % {
                "name": repr(name),
                "width": w,
                "height": h,
                "side": MAX_IMAGE_SIDE,
                "bound": bound,
                "jpeg": bound * 64,
            },
            413,
        )

    scale = _draft_scale(content_type, width, height, box)
    if -(-width // scale) * -(-height // scale) > bound:
        raise refuse(width, height)
    fmt = PIL_FORMATS[content_type]
    with _decoding:
        incoming.file.seek(0)
        try:
            image = Image.open(incoming.file, formats=[fmt])
            if image.size != (width, height):  # its decoder reads the header differently
                width, height = image.size
                if max(width, height) <= MAX_IMAGE_SIDE:
                    return incoming, (width, height)
                scale = _draft_scale(content_type, width, height, box)
                if -(-width // scale) * -(-height // scale) > bound:
                    raise refuse(width, height)
            if content_type == media.JPEG:
                image.draft(image.mode, box)
            if image.size[0] * image.size[1] > bound:
                raise refuse(width, height)
            image.thumbnail((MAX_IMAGE_SIDE, MAX_IMAGE_SIDE), Image.Resampling.LANCZOS)
            image = ImageOps.exif_transpose(image)
            out = tempfile.TemporaryFile(dir=django_settings.FILE_UPLOAD_TEMP_DIR)
            options = {"quality": 90} if content_type in (media.JPEG, media.WEBP) else {}
            if content_type == media.JPEG and image.mode not in ("RGB", "L", "CMYK"):
                image = image.convert("RGB")
            image.save(out, format=fmt, **options)
        except AttachmentError:
            raise
        except (Image.DecompressionBombError, OSError, ValueError, SyntaxError) as exc:
            raise AttachmentError(
                "ahentic_attachment_type",
                gettext(
                    "%(name)s could not be read as an image (%(error)s). Attach it again, or "
                    "save it anew as PNG or JPEG and attach that."
                )
                % {"name": repr(name), "error": exc.__class__.__name__},
            ) from None
        scaled = image.size
    size = out.tell()
    if size > max_bytes(content_type):
        out.close()
        raise AttachmentError(
            "ahentic_attachment_too_large",
            gettext(
                "%(name)s scaled to %(width)sx%(height)s is %(size)s; a file of this type can "
                "be at most %(limit)s. Attach a smaller image."
            )
            % {
                "name": repr(name),
                "width": scaled[0],
                "height": scaled[1],
                "size": human_size(size),
                "limit": human_size(max_bytes(content_type)),
            },
            413,
        )
    out.seek(0)
    digest = hashlib.sha256()
    while chunk := out.read(1024 * 1024):
        digest.update(chunk)
    fitted = Incoming(incoming.name, out, size, digest.hexdigest(), content_type)
    return fitted, scaled


def _quota_error(used: int, adding: int, quota: int) -> AttachmentError:
    return AttachmentError(
        "ahentic_attachment_quota",
        gettext(
            "Your attachments take %(used)s; these %(adding)s more would pass your storage "
            "quota of %(quota)s. Delete chats with files you no longer need."
        )
        % {"used": human_size(used), "adding": human_size(adding), "quota": human_size(quota)},
        409,
    )


def _limits(session_id, owner_id, adding: int, count: int, *, per_session: bool) -> None:
    """The per-chat count (400 ``ahentic_attachment_limit``) and the owner's quota (409
    ``ahentic_attachment_quota``) with ``count`` more files of ``adding`` bytes."""
    limit = int(ahentic_settings.ATTACHMENT_MAX_PER_SESSION)
    if per_session:
        held = Attachment.objects.filter(session_id=session_id).count()
        if held + count > limit:
            raise AttachmentError(
                "ahentic_attachment_limit",
                gettext(
                    "This chat holds %(held)s attachments; a chat holds at most %(limit)s. Start "
                    "a new chat to attach more."
                )
                % {"held": held, "limit": limit},
            )
    quota = ahentic_settings.ATTACHMENT_QUOTA_BYTES
    if quota is not None:
        used = (
            Attachment.objects.filter(session__owner_id=owner_id).aggregate(total=Sum("size"))[
                "total"
            ]
            or 0
        )
        if used + adding > int(quota):
            raise _quota_error(used, adding, int(quota))


def _owner_of(session_id, *, lock: bool):
    # A chat its owner deleted takes no more files (it is purged after the undo window).
    rows = Session.objects.filter(pk=session_id, deleted_at__isnull=True)
    if lock:
        rows = rows.select_for_update()
    owner = list(rows.values_list("owner_id", flat=True))
    if not owner:
        raise AttachmentError("ahentic_session_not_found", "Session not found.", 404)
    return owner[0]


def _quota_lock(owner_id) -> None:
    """Lock the owner's ``AttachmentQuota`` row (made on first use) until the caller's
    transaction ends: the quota's sum and the inserts that follow it are then one user's
    upload at a time, whichever chats they go to. Lock order: the session row, then this."""
    rows = db.primary(AttachmentQuota).select_for_update().filter(user_id=owner_id)
    if list(rows.values_list("pk", flat=True)):
        return
    try:
        with db.atomic(AttachmentQuota):  # a savepoint: a concurrent first upload may win
            db.primary(AttachmentQuota).create(user_id=owner_id)
    except IntegrityError:  # made meanwhile by another upload (committed): take its lock
        list(rows.values_list("pk", flat=True))


def store_files(
    *,
    session_id,
    files: list[Incoming],
    source: str = Attachment.Source.UPLOAD,
    per_session: bool = True,
) -> list[Attachment]:
    """Store files of the session, all or none: each inspected (and scaled), the limits checked
    (the chat's count, the owner's quota), the files saved to the storage, then the count and
    quota checked again and the rows inserted under the session row's lock and the owner's
    quota row's (``_quota_lock``), so concurrent uploads, into one chat or several, cannot
    pass the limits together. A session deleted meanwhile is a 404
    ``ahentic_session_not_found``; the saved files go with any refusal."""
    owner_id = _owner_of(session_id, lock=False)
    facts = [inspect(incoming) for incoming in files]
    adding = sum(f["size"] for f in facts)
    _limits(session_id, owner_id, adding, len(facts), per_session=per_session)
    saved: list[str] = []
    try:
        rows = []
        for item in facts:
            with item.pop("file") as handle:  # a scaled image's temporary file too
                handle.seek(0)
                pk = uuid.uuid4()
                path = f"ahentic/attachments/{session_id}/{pk}{EXTENSIONS[item['content_type']]}"
                saved.append(storage().save(path, File(handle, name=path)))
            rows.append(Attachment(pk=pk, session_id=session_id, source=source, **item))
            rows[-1].storage_name = saved[-1]
        with db.atomic(Attachment):
            owner_id = _owner_of(session_id, lock=True)
            if ahentic_settings.ATTACHMENT_QUOTA_BYTES is not None:
                _quota_lock(owner_id)
            _limits(session_id, owner_id, adding, len(rows), per_session=per_session)
            for row in rows:
                row.save(force_insert=True)
        return rows
    except BaseException:
        for name in saved:  # no file without its row
            try:
                storage().delete(name)
            except OSError:
                pass
        raise


def store(*, session_id, name: str, data: bytes, source: str = Attachment.Source.UPLOAD):
    """Store one file of the session from its bytes; returns its row."""
    [row] = store_files(
        session_id=session_id,
        files=[Incoming.of_bytes(name, data)],
        source=source,
        per_session=source == Attachment.Source.UPLOAD,
    )
    return row


def store_uploads(*, session_id, files: list[Incoming | tuple[str, bytes]]) -> list[Attachment]:
    """The upload route: at least one file, at most a message's worth (400
    ``ahentic_attachment_limit``), every file checked before any is stored (``store_files``)."""
    per_message = int(ahentic_settings.ATTACHMENT_MAX_PER_MESSAGE)
    if not files:
        raise AttachmentError("ahentic_attachment_missing", "Send the files in the field 'file'.")
    if len(files) > per_message:
        raise AttachmentError(
            "ahentic_attachment_limit",
            gettext(
                "%(count)s files; a message takes at most %(limit)s. Send the rest with another "
                "message."
            )
            % {"count": len(files), "limit": per_message},
        )
    incoming = [f if isinstance(f, Incoming) else Incoming.of_bytes(*f) for f in files]
    return store_files(session_id=session_id, files=incoming)


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
    transaction; their refs in the order given (``take=False``: only check them). 400 ``ahentic_attachment_invalid`` for an id that is
    not a UUID, 409 when one is not an unsent upload of this session (another session's or
    user's, sent already, unknown),
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
            gettext(
                "%(count)s attachments; a message takes at most %(limit)s. Send the rest with "
                "another message."
            )
            % {"count": len(wanted), "limit": per_message},
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
                409,
            )
        if take:
            Attachment.objects.filter(pk__in=wanted).update(sent=True)
    return [ref(found[key]) for key in wanted]


def unsent_delete(*, session_id, attachment_id) -> bool:
    """Delete an upload of the session that was not sent with a message (its file goes once
    the delete commits); False when it was sent (a sent file is part of the chat's history and
    goes with the chat) or is gone."""
    deleted, _ = Attachment.objects.filter(
        pk=attachment_id, session_id=session_id, sent=False
    ).delete()
    return bool(deleted)


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
            if media.sniff(bytes(image.data[:16])) not in media.IMAGE_TYPES:
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


def image_note() -> dict[str, Any]:
    return {
        "type": "text",
        "text": f"[An earlier image is not sent again: a request carries at most "
        f"{media.API_MAX_IMAGES} images.]",
    }


def file_note(block: dict[str, Any]) -> dict[str, Any]:
    kind = "image" if block.get("type") == "image" else "PDF"
    return {
        "type": "text",
        "text": f"[An earlier {kind} is not sent again: the files a request carries inline "
        f"are at most {media.API_INLINE_FILE_BYTES // 1_000_000} MB.]",
    }


class RequestLimits:
    """What one request has used of the API's limits, counted from its newest block back:
    images (``media.API_MAX_IMAGES``) and inline file bytes (``media.API_INLINE_FILE_BYTES``,
    base64 images and PDFs, within the 32 MB a request may be)."""

    def __init__(self) -> None:
        self.images = 0
        self.inline_bytes = 0
        self.replaced = 0

    def note_for(self, block: Any) -> dict[str, Any] | None:
        """None when ``block`` still fits (and counts it), else the note that replaces it."""
        if not isinstance(block, dict) or block.get("type") not in ("image", "document"):
            return None
        source = block.get("source") or {}
        size = len(source.get("data") or "") if source.get("type") == "base64" else 0
        note = None
        if block["type"] == "image":
            self.images += 1
            if self.images > media.API_MAX_IMAGES:
                note = image_note()
        if note is None and size:
            if self.inline_bytes + size > media.API_INLINE_FILE_BYTES:
                note = file_note(block)
            else:
                self.inline_bytes += size
        self.replaced += note is not None
        return note


def within_request_limits(messages: list[dict[str, Any]]) -> int:
    """Keep a request within the API's limits on what it carries (``RequestLimits``: at most
    100 images, inline files within the request's size): the newest stay, each older one past
    a limit is replaced, in the messages given, by a short text note. Returns how many were
    replaced. Every stored image fits ``MAX_IMAGE_SIDE``, so any count of them obeys the API's
    side limits. A chat sends its history every turn, so without this one request too many
    would break it for good; the prefix changes from the oldest replaced file on, once per
    file past a limit, as an eviction does."""
    limits = RequestLimits()
    for message in reversed(messages):
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for i in range(len(content) - 1, -1, -1):
            block = content[i]
            note = limits.note_for(block)
            if note is not None:
                content[i] = note
            elif block.get("type") == "tool_result" and isinstance(block.get("content"), list):
                inner = list(block["content"])
                changed = False
                for k in range(len(inner) - 1, -1, -1):
                    note = limits.note_for(inner[k])
                    if note is not None:
                        inner[k] = note
                        changed = True
                if changed:  # a copy: built blocks are shared (``_blocks``)
                    content[i] = {**block, "content": inner}
    return limits.replaced


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
