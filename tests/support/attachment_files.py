"""Small files for the attachment tests: real PNG, GIF, WebP and PDF bytes, and the impostors
the upload route must refuse."""

import struct
import zlib


def png(width: int = 4, height: int = 3, color: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    """A valid RGB PNG of one color."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\x00" + bytes(color) * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def gif(width: int = 2, height: int = 2) -> bytes:
    """A valid GIF89a of one black pixel scaled to ``width`` x ``height`` (header and a
    minimal image)."""
    return (
        b"GIF89a"
        + struct.pack("<HH", width, height)
        + b"\x80\x00\x00\x00\x00\x00\xff\xff\xff"
        + b",\x00\x00\x00\x00"
        + struct.pack("<HH", width, height)
        + b"\x00\x02\x02D\x01\x00;"
    )


def webp_header(width: int, height: int) -> bytes:
    """The header of a lossless WebP (VP8L): enough to be typed and sized."""
    bits = (width - 1) | ((height - 1) << 14)
    payload = b"\x2f" + bits.to_bytes(4, "little") + b"\x00" * 8
    body = b"WEBP" + b"VP8L" + struct.pack("<I", len(payload)) + payload
    return b"RIFF" + struct.pack("<I", len(body)) + body


def pdf(pages: int = 2) -> bytes:
    """A small PDF with ``pages`` page objects."""
    kids = " ".join(f"{3 + i} 0 R" for i in range(pages))
    objects = [
        "1 0 obj<</Type /Catalog /Pages 2 0 R>>endobj",
        f"2 0 obj<</Type /Pages /Kids [{kids}] /Count {pages}>>endobj",
        *(f"{3 + i} 0 obj<</Type /Page /Parent 2 0 R>>endobj" for i in range(pages)),
    ]
    return ("%PDF-1.4\n" + "\n".join(objects) + "\ntrailer<</Root 1 0 R>>\n%%EOF\n").encode()


ELF = b"\x7fELF\x02\x01\x01\x00" + b"\x00" * 120
WINDOWS_EXE = b"MZ\x90\x00\x03\x00\x00\x00" + b"\x00" * 120
SVG = b'<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><script>1</script></svg>'
