"""An attachment's file leaves storage only once the deletion of its row commits: a delete that
is rolled back (a later write of the same transaction failed) leaves the file with its row."""

from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import transaction
from django.utils import timezone

from orchestrator_app.tasks import purge_deleted_chats
from sessions_app import attachments as attachment_store
from sessions_app.models import Attachment
from tests.support.api import session_url
from tests.support.attachment_files import pdf, png


class RolledBack(Exception):
    """Raised inside the test's transaction to roll the delete back."""


def uploaded(client, session, *files) -> list[dict]:
    uploads = [SimpleUploadedFile(name, data, content_type=kind) for name, data, kind in files]
    response = client.post(
        session_url(session, "attachments"), {"file": uploads}, format="multipart"
    )
    assert response.status_code == 201, response.content
    return response.json()["attachments"]


def purge_if_a_chat(what: str) -> None:
    """A deleted chat's rows and files go when its undo window is over (the purge task)."""
    if what == "session":
        purge_deleted_chats((timezone.now() + timedelta(days=1)).isoformat())


@pytest.mark.parametrize("what", ["attachment", "session"])
def test_a_rolled_back_delete_leaves_the_file_and_a_committed_one_removes_it(
    owner_client, session, django_capture_on_commit_callbacks, what
):
    items = uploaded(
        owner_client, session, ("a.png", png(), "image/png"), ("b.pdf", pdf(), "application/pdf")
    )
    names = list(Attachment.objects.values_list("storage_name", flat=True))
    assert len(names) == 2 and all(attachment_store.storage().exists(n) for n in names)
    url = items[0]["url"] if what == "attachment" else session_url(session)
    gone = names[:1] if what == "attachment" else names

    with django_capture_on_commit_callbacks(execute=True):
        with pytest.raises(RolledBack), transaction.atomic():
            assert owner_client.delete(url).status_code == 204
            purge_if_a_chat(what)
            raise RolledBack

    assert Attachment.objects.count() == 2
    assert all(attachment_store.storage().exists(n) for n in names)
    assert owner_client.get(items[0]["url"]).status_code == 200

    with django_capture_on_commit_callbacks(execute=True):
        assert owner_client.delete(url).status_code == 204
        purge_if_a_chat(what)

    assert not any(attachment_store.storage().exists(n) for n in gone)
