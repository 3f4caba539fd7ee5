"""django-q2 entry points of the run engine: thin, id-only, idempotent. The feature wings
have their own (``schedules/tasks.py``, ``webhooks/tasks.py``, ``notifications/tasks.py``)."""

from __future__ import annotations

from datetime import datetime

from .control import brain, history, runs
from .loop import files, step


def run_step(session_id: str, run_seq: int, trace: dict[str, str] | None = None) -> None:
    """Run one step of a session's run. A redelivered or duplicate task returns quietly.
    ``trace``: the W3C trace context the step joins or links to (``control.queue``); a task
    queued without it runs all the same."""
    step.run_step(session_id, int(run_seq), trace=trace)


def recover() -> int:
    """The ``ahentic_recover`` sweep: re-enqueue running sessions whose worker is gone."""
    return runs.recover_stalled()


def purge_deleted_chats(now: str | None = None) -> int:
    """Purge the chats deleted longer ago than ``HISTORY_UNDO_S`` (a one-off schedule made by
    each deletion). ``now`` (ISO 8601, aware) stands for the clock."""
    return history.purge_due(datetime.fromisoformat(now) if now else None)


def remember(session_id: str) -> None:
    """Summarize events that left the context window into memory snapshots."""
    brain.remember(session_id)


def name_session(session_id: str) -> None:
    """Let the brain model name the session (keeps a title the user set)."""
    brain.name_session(session_id)


def delete_file(file_id: str) -> None:
    """Delete a file uploaded to the Files API whose attachment was deleted (best effort)."""
    files.delete_remote(file_id)
