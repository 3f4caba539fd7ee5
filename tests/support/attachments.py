"""Uploads through the HTTP API: multipart bodies, the upload route, a message that sends them."""

import uuid

from django.core.files.uploadedfile import SimpleUploadedFile

from tests.support.api import post, session_url


def multipart(*files: tuple[str, bytes], field: str = "file") -> tuple[bytes, str]:
    """A multipart/form-data body of ``files`` (name, bytes) and its content type."""
    boundary = uuid.uuid4().hex
    body = b""
    for name, data in files:
        body += (
            (
                f"--{boundary}\r\n"
                f'Content-Disposition: form-data; name="{field}"; filename="{name}"\r\n'
                "Content-Type: application/octet-stream\r\n\r\n"
            ).encode()
            + data
            + b"\r\n"
        )
    body += f"--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}"


def upload_multipart(client, session, *files: tuple[str, bytes], headers=None):
    """POST the files (name, bytes) as a multipart body built here, with extra ``headers``."""
    body, content_type = multipart(*files)
    return client.post(
        session_url(session, "attachments"), body, content_type=content_type, headers=headers
    )


def upload(client, session, *files: tuple[str, bytes, str]):
    """POST the files (name, bytes, declared content type) to the session's upload route."""
    uploads = [SimpleUploadedFile(name, data, content_type=kind) for name, data, kind in files]
    return client.post(session_url(session, "attachments"), {"file": uploads}, format="multipart")


def uploaded(client, session, *files) -> list[dict]:
    response = upload(client, session, *files)
    assert response.status_code == 201, response.content
    return response.json()["attachments"]


def send_with_attachments(client, session, run_tasks, content: str, ids: list[str]):
    """Post a message that sends the uploaded attachments ``ids`` (the response, steps run)."""
    return run_tasks(post, client, session, "messages", {"content": content, "attachments": ids})


PDF = "application/pdf"
