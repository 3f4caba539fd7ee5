"""What an attachment is, read from its bytes: its type, an image's size, a PDF's pages, and
what it costs a model request in tokens.

Shared by the upload route, the request builder, the token estimate and the local Messages API
server (which refuses what the real API refuses), so it imports nothing from Django.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
import struct
from typing import Any

PNG = "image/png"
JPEG = "image/jpeg"
GIF = "image/gif"
WEBP = "image/webp"
PDF = "application/pdf"
IMAGE_TYPES = (PNG, JPEG, GIF, WEBP)
TYPES = (*IMAGE_TYPES, PDF)

# The Messages API's own limits: an image's base64 data, the long edge it scales an image down
# to, and the pixels it keeps (about 1.15 megapixels) before it counts tokens.
API_IMAGE_BASE64_BYTES = 5 * 1024 * 1024
API_IMAGE_LONG_EDGE = 1568
API_IMAGE_PIXELS = 1_150_000
# What a request may carry: at most 100 images; none over 8000 px on a side, and none over
# 2000 px on a side once it carries more than 20 (a request breaking either is refused whole).
API_MAX_IMAGES = 100
API_MAX_SIDE = 8000
API_MANY_IMAGES = 20
API_MANY_IMAGES_SIDE = 2000
PIXELS_PER_TOKEN = 750
# A request's body is at most 32 MB (the API answers 413 ``request_too_large`` past it). Inline
# files (base64 images and PDFs) may take this much of it; the rest is left for the text of the
# window (bounded by the context budget), the system prompt and the tools.
API_MAX_REQUEST_BYTES = 32_000_000
API_INLINE_FILE_BYTES = 30_000_000
# A PDF page as the model reads it: its text (about 1,500 tokens for a dense page) and an image
# of the page (about 1,500 more). The estimate of a PDF is pages x this.
PDF_PAGE_TOKENS = 3000
# A document the API holds (the Files API): its pages are not known here.
FILE_DOCUMENT_TOKENS = PDF_PAGE_TOKENS


def sniff(data: bytes) -> str | None:
    """The content type ``data`` starts like (its magic bytes), or None when it is none of
    ``TYPES``. A name or a declared type is never trusted: a renamed executable or an SVG (text)
    is None."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return PNG
    if data.startswith(b"\xff\xd8\xff"):
        return JPEG
    if data.startswith((b"GIF87a", b"GIF89a")):
        return GIF
    if len(data) >= 12 and data.startswith(b"RIFF") and data[8:12] == b"WEBP":
        return WEBP
    if data.startswith(b"%PDF-"):
        return PDF
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    i = 2
    while i + 4 <= len(data):
        if data[i] != 0xFF:
            i += 1
            continue
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # no length
            i += 2
            continue
        (length,) = struct.unpack(">H", data[i + 2 : i + 4])
        # Start of frame (baseline, progressive...; not DHT C4, JPG C8, DAC CC).
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            if i + 9 > len(data):
                return None
            height, width = struct.unpack(">HH", data[i + 5 : i + 9])
            return width, height
        i += 2 + length
    return None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8 " and len(data) >= 30:
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if chunk == b"VP8L" and len(data) >= 25:
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X" and len(data) >= 30:
        return int.from_bytes(data[24:27], "little") + 1, int.from_bytes(data[27:30], "little") + 1
    return None


def image_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) of a PNG, JPEG, GIF or WebP from its header, else None."""
    kind = sniff(data)
    try:
        if kind == PNG and len(data) >= 24:
            return struct.unpack(">II", data[16:24])
        if kind == GIF and len(data) >= 10:
            return struct.unpack("<HH", data[6:10])
        if kind == JPEG:
            return _jpeg_size(data)
        if kind == WEBP:
            return _webp_size(data)
    except struct.error:
        return None
    return None


# How much of a file's start ``image_size_file`` reads: every header but a JPEG's (whose frame
# header may follow large metadata segments, walked with seeks).
HEAD_BYTES = 64 * 1024


def image_size_file(handle) -> tuple[int, int] | None:
    """``image_size`` of an image file open for binary reading, without reading it whole: its
    first ``HEAD_BYTES``, and for a JPEG the segment headers up to its frame header."""
    handle.seek(0)
    head = handle.read(HEAD_BYTES)
    size = image_size(head)
    if size is not None or sniff(head) != JPEG:
        return size
    position = 2
    for _ in range(10_000):  # segments; a real file has tens
        handle.seek(position)
        marker = handle.read(4)
        if len(marker) < 4 or marker[0] != 0xFF:
            return None
        kind = marker[1]
        if kind == 0xFF:  # fill byte
            position += 1
            continue
        if kind in (0xD8, 0x01) or 0xD0 <= kind <= 0xD7:
            position += 2
            continue
        if 0xC0 <= kind <= 0xCF and kind not in (0xC4, 0xC8, 0xCC):
            frame = handle.read(5)
            if len(frame) < 5:
                return None
            height, width = struct.unpack(">HH", frame[1:5])
            return width, height
        position += 2 + struct.unpack(">H", marker[2:4])[0]
    return None


PAGE = re.compile(rb"/Type\s*/Page(?![a-zA-Z])")


def pdf_pages(data: bytes) -> int:
    """A PDF's page count as its page objects (at least 1). Compressed object streams hide them;
    then the estimate counts one page."""
    return max(1, len(PAGE.findall(data)))


def image_tokens(width: int, height: int) -> int:
    """What an image costs a request: the API scales it down to a long edge of 1568 pixels
    and about 1.15 megapixels, then counts width x height / 750 tokens."""
    width, height = max(1, int(width)), max(1, int(height))
    scale = min(1.0, API_IMAGE_LONG_EDGE / max(width, height))
    scale = min(scale, math.sqrt(API_IMAGE_PIXELS / (width * height)))
    return max(1, math.ceil((width * scale) * (height * scale) / PIXELS_PER_TOKEN))


def attachment_tokens(content_type: str, width: int | None, height: int | None, pages: int) -> int:
    """The estimate of an attachment from what was read of it when it was stored."""
    if content_type == PDF:
        return max(1, pages) * PDF_PAGE_TOKENS
    return image_tokens(width or 1, height or 1)


def decoded(source: dict[str, Any]) -> bytes | None:
    """The bytes of a base64 source, or None when its data is not base64."""
    data = source.get("data")
    if not isinstance(data, str):
        return None
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None


def media_tokens(block: dict[str, Any]) -> int | None:
    """An image or document block's tokens as the API counts them, else None (not media)."""
    kind = block.get("type")
    if kind not in ("image", "document"):
        return None
    source = block.get("source") or {}
    if source.get("type") != "base64":
        return FILE_DOCUMENT_TOKENS if kind == "document" else image_tokens(1000, 1000)
    data = decoded(source) or b""
    if kind == "document":
        return pdf_pages(data) * PDF_PAGE_TOKENS
    size = image_size(data) or (1, 1)
    return image_tokens(*size)
