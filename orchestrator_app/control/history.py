"""A chat's deletion, its undo and its purge (README "History").

Deleting is soft: the chat is hidden from its owner's routes at once (``Session.deleted_at``,
``Session.objects.for_user``) and restorable for ``HISTORY_UNDO_S`` seconds, so an undo still
works from another tab or after a reload, and a closed tab still deletes. A one-off django-q2
schedule then purges it with all it holds (``sessions_app.services.sessions_purge``); with
``HISTORY_UNDO_S`` 0 a chat is purged at once.

The delete takes the whole tree: every sub-agent chat under the chat gets the same
``deleted_at`` (so every check of it refuses them too: by id, the poll, uploads, files,
artifacts) and its run is stopped; the undo brings back what that delete took, and a sub-agent
chat is never restored apart from its deleted parent.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.utils import timezone

from sessions_app import runstate, services
from sessions_app.conf import ahentic_settings

from . import queue, runs

# Seconds after the window's end before the purge runs: a restore that arrives on the last
# second still finds the rows.
PURGE_MARGIN_S = 5


def undo_window() -> timedelta:
    return timedelta(seconds=int(ahentic_settings.HISTORY_UNDO_S or 0))


def chat_delete(*, session_id) -> datetime | None:
    """Delete the chat: it is hidden with its sub-agents' chats, their live runs are
    cancelled, and its purge scheduled (or, with no undo window, the runs are cancelled and
    it is purged now). Returns until when it may be restored
    (None: purged now, or it was gone)."""
    window = undo_window()
    if not window:
        _cancel_tree(session_id)
        services.session_delete(session_id=session_id)
        return None
    now = timezone.now()
    if not services.session_trash(session_id=session_id, at=now):
        return None
    # After the trash marked the tree: a sub-agent spawned meanwhile is in it (its run is
    # stopped here), or its spawn saw the deletion and never started it.
    _cancel_tree(session_id)
    queue.enqueue_purge(now + window + timedelta(seconds=PURGE_MARGIN_S))
    return now + window


def _cancel_tree(session_id) -> None:
    """Stop the chat's run and every sub-agent's under it: a sub-agent may still run while
    its parent is idle, and the parent's cancel stops only the children of a live run."""
    runs.run_cancel(session_id=session_id)
    for child_id in runstate.descendant_ids(session_id):
        runs.run_cancel(session_id=child_id)


def chat_restore(*, session_id) -> bool:
    """Undo a deletion still inside the undo window. False when the chat is not deleted, or
    was deleted too long ago (its purge is due)."""
    since = timezone.now() - undo_window()
    return services.session_restore(session_id=session_id, deleted_since=since)


def purge_due(now: datetime | None = None) -> int:
    """Purge every chat whose undo window ended by ``now``; how many went."""
    return services.sessions_purge(deleted_before=(now or timezone.now()) - undo_window())
