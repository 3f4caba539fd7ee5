"""The upload route's body, streamed: Django's multipart parser feeds each file to
``AttachmentUploadHandler`` in chunks, which types it from its first bytes, counts and hashes
it, and writes it to a temporary file, stopping at the limit. A file is never held whole in
memory, and whatever goes wrong in the form (too many files, a part's headers too long, a
malformed body) is the API's ``{code, detail}``, whoever reads the body first (the CSRF check
of session authentication reads it before the view does).
"""

from __future__ import annotations

import hashlib
import re

from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.core.files.uploadedfile import TemporaryUploadedFile
from django.core.files.uploadhandler import FileUploadHandler, StopUpload
from django.http import QueryDict
from django.http.multipartparser import MultiPartParser, MultiPartParserError
from django.utils.datastructures import MultiValueDict

from sessions_app import attachments, media
from sessions_app.attachments import AttachmentError, Incoming
from sessions_app.conf import ahentic_settings

FIELD = "file"
# How many bytes of a file are read before its type is decided (the longest magic number).
SNIFF_BYTES = 16
# Django refuses a part whose headers pass this many bytes (``multipartparser``): most often a
# file name of about a thousand characters or more.
MAX_PART_HEADERS = 1024
_FILENAME = re.compile(rb'filename\*?="?([^"\r\n;]{1,80})')


class _Tail:
    """The request body as the parser reads it, keeping its last bytes (to name the file whose
    headers were refused)."""

    def __init__(self, stream):
        self.stream = stream
        self.tail = b""

    def read(self, *args):
        data = self.stream.read(*args)
        self.tail = (self.tail + data)[-4 * MAX_PART_HEADERS :]
        return data


class AttachmentUploadHandler(FileUploadHandler):
    """The one upload handler of the upload route. It stops the upload at the first refused
    file (its type, its size, one file too many) and keeps the refusal in ``error``, which the
    view raises once the body is read; nothing refused is kept."""

    chunk_size = 64 * 1024

    def __init__(self, request=None):
        super().__init__(request)
        self.error: AttachmentError | None = None
        self.received: list[Incoming] = []
        self.count = 0
        self.parsing = False
        self.active = False  # a file is being received

    # --- the body -----------------------------------------------------------------------------

    def handle_raw_input(self, input_data, META, content_length, boundary, encoding=None):
        """Parse the body with this handler alone, turning the parser's own refusals into
        ``error`` (Django raises them as exceptions its views would answer with an HTML 400,
        or a 500 from the CSRF check)."""
        if self.parsing:
            return None  # the inner parse below
        empty = QueryDict(encoding=encoding), MultiValueDict()
        limit = attachments.upload_limit()
        if content_length > limit:
            self.fail(
                AttachmentError(
                    "ahentic_body_too_large",
                    f"Request body is {content_length} bytes; the limit is {limit}.",
                    413,
                )
            )
            return empty
        stream = _Tail(input_data)
        self.parsing = True
        try:
            return MultiPartParser(META, stream, [self], encoding).parse()
        except TooManyFilesSent:
            self.fail(self.too_many())
        except MultiPartParserError as exc:
            if "header size" in str(exc):
                self.fail(self.name_too_long(stream.tail))
            else:
                self.fail(AttachmentError("ahentic_upload_malformed", f"Malformed upload: {exc}"))
        except (TooManyFieldsSent, RequestDataTooBig) as exc:
            self.fail(AttachmentError("ahentic_upload_malformed", f"Malformed upload: {exc}"))
        finally:
            self.parsing = False
        return empty

    def too_many(self) -> AttachmentError:
        per_message = int(ahentic_settings.ATTACHMENT_MAX_PER_MESSAGE)
        return AttachmentError(
            "ahentic_attachment_limit",
            f"More than {per_message} files; a message takes at most {per_message}.",
        )

    @staticmethod
    def name_too_long(tail: bytes) -> AttachmentError:
        found = _FILENAME.findall(tail)
        start = found[-1].decode("utf-8", "replace") if found else ""
        named = f"The file name {start + '...'!r}" if start else "A file name"
        return AttachmentError(
            "ahentic_attachment_name",
            f"{named} is too long: a file's part headers must stay under {MAX_PART_HEADERS} "
            f"bytes. Rename the file (names up to {attachments.MAX_NAME_CHARS} characters are "
            "kept) and upload it again.",
        )

    def fail(self, error: AttachmentError) -> None:
        if self.error is None:
            self.error = error
        self.discard()

    def discard(self) -> None:
        # ``file`` stays set: Django's parser closes ``handler.file`` when an upload stops.
        if self.active:
            self.file.close()
            self.active = False
        for item in self.received:
            item.file.close()
        self.received = []

    # --- each file ----------------------------------------------------------------------------

    def new_file(self, field_name, file_name, *args, **kwargs):
        super().new_file(field_name, file_name, *args, **kwargs)
        if self.error is not None:
            raise StopUpload(connection_reset=False)
        self.count += 1
        if self.count > int(ahentic_settings.ATTACHMENT_MAX_PER_MESSAGE):
            self.fail(self.too_many())
            raise StopUpload(connection_reset=False)  # the rest of the body is read, not kept
        # Named by us: the temporary file's suffix comes from the name, which may be anything.
        self.file = TemporaryUploadedFile("upload", "application/octet-stream", 0, None)
        self.active = True
        self.head = b""
        self.content_type: str | None = None
        self.limit = attachments.largest_file()
        self.digest = hashlib.sha256()

    def receive_data_chunk(self, raw_data, start):
        if self.content_type is None:
            self.head += raw_data[:SNIFF_BYTES]
            if len(self.head) >= SNIFF_BYTES:
                self.typed()
        size = start + len(raw_data)
        if size > self.limit:
            self.fail(attachments.too_large(self.file_name, self.content_type, size, partial=True))
            raise StopUpload(connection_reset=False)
        self.digest.update(raw_data)
        self.file.write(raw_data)
        return None

    def typed(self) -> None:
        self.content_type = media.sniff(self.head)
        if self.content_type is None:
            self.fail(attachments.not_allowed(self.file_name))
            raise StopUpload(connection_reset=False)
        self.limit = attachments.max_bytes(self.content_type)

    def file_complete(self, file_size):
        if not self.active:
            return None
        if self.content_type is None:  # a file shorter than SNIFF_BYTES
            self.content_type = media.sniff(self.head)
            if self.content_type is None:
                self.fail(attachments.not_allowed(self.file_name))
                return None
        self.active = False
        self.file.size = file_size
        self.file.seek(0)
        if self.field_name != FIELD:
            self.file.close()  # not an attachment
            return None
        self.received.append(
            Incoming(
                self.file_name, self.file, file_size, self.digest.hexdigest(), self.content_type
            )
        )
        # In request.FILES too: Django closes (and so deletes) it when the request ends, the
        # view refused it or not.
        return self.file

    def upload_interrupted(self):
        self.fail(AttachmentError("ahentic_upload_malformed", "The upload was cut off."))


def install(request) -> AttachmentUploadHandler:
    """Make ``request`` (Django's) stream its body through a new handler; before anything
    reads the body."""
    handler = AttachmentUploadHandler(request)
    request.upload_handlers = [handler]
    return handler


def received(request, handler: AttachmentUploadHandler) -> list[Incoming]:
    """The files of the upload, once its body is read; the handler's refusal raised."""
    request.FILES  # noqa: B018 - reads the body (a no-op when the CSRF check did)
    if handler.error is not None:
        raise handler.error
    return list(handler.received)
