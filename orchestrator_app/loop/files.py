"""PDFs through the Files API (``AHENTIC["FILES_API"]``).

A PDF's form is decided the first time a step sends a request that carries it, and kept: a PDF
of at least ``FILES_API_MIN_BYTES`` is uploaded then (once; its ``file_id`` is stored on the
row) and sent as a ``file`` document block from then on; any other PDF is sent as base64 from
then on, even if ``FILES_API`` is turned on later. A block that changed after it was sent
would change the cached prefix of every later request.

Nothing is uploaded by the web request that stores an attachment: a missing key or a Files API
outage cannot fail an upload, and a PDF that is never sent is never uploaded. An upload that
fails fails the step (``ahentic_attachment_upload``, resumable: Continue uploads again) and
writes nothing. A row deleted with an uploaded file has the remote file deleted too, once the
deletion commits, by a background task (best effort: a file that cannot be deleted stays in the
organization's Files API storage until deleted there).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from typing import Any

from django_q.tasks import async_task

from sessions_app import attachments as attachment_store
from sessions_app import db
from sessions_app.models import Attachment

from .. import llm

log = logging.getLogger("ahentic")


def prepare(refs: list[dict[str, Any]], keep_going: Callable[[], bool] | None = None) -> int:
    """Decide the form of every PDF of ``refs`` not decided yet, uploading those the Files API
    takes; the number uploaded. Raises ``llm.LLMError`` when an upload fails (nothing is
    written for that PDF). ``keep_going`` is asked after each upload (the step refreshes its
    lease); False stops early."""
    uploaded = 0
    for row in attachment_store.undecided(refs):
        if not attachment_store.wants_file(row.content_type, row.size):
            attachment_store.decide_base64(row.pk)
            continue
        data = attachment_store.read_bytes(row.storage_name)
        if data is None or hashlib.sha256(data).hexdigest() != row.sha256:
            continue  # its block is a note that the file is gone
        file_id = llm.upload_file(row.name, data, row.content_type)
        if attachment_store.record_file(row.pk, file_id):
            uploaded += 1
        else:  # decided meanwhile: the upload is not needed
            delete_remote(file_id)
        if keep_going is not None and not keep_going():
            break
    return uploaded


def delete_remote(file_id: str) -> None:
    """Delete an uploaded file, best effort (the ``delete_file`` task)."""
    try:
        llm.delete_file(file_id)
    except llm.LLMError as exc:
        log.warning("ahentic could not delete the uploaded file %s: %s", file_id, exc)


def remote_delete(sender, instance: Attachment, **kwargs) -> None:
    """Once the deletion of a row with an uploaded file commits, delete the file (a task)."""
    file_id = instance.file_id
    if file_id:
        db.on_commit(
            lambda: async_task("orchestrator_app.tasks.delete_file", file_id, group="ahentic"),
            Attachment,
        )
