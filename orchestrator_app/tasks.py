"""django-q2 entry points: thin, id-only, idempotent."""

from __future__ import annotations

from datetime import datetime

from .control import brain, runs, schedules
from .loop import files, step


def run_step(session_id: str, run_seq: int) -> None:
    """Run one step of a session's run. A redelivered or duplicate task returns quietly."""
    step.run_step(session_id, int(run_seq))


def recover() -> int:
    """The ``ahentic_recover`` sweep: re-enqueue running sessions whose worker is gone."""
    return runs.recover_stalled()


def schedule_tick(now: str | None = None) -> int:
    """The ``ahentic_schedule_tick`` schedule, every minute: settle ended scheduled runs and
    fire the schedules that came due. ``now`` (ISO 8601, aware) stands for the clock."""
    return schedules.tick(datetime.fromisoformat(now) if now else None)


def remember(session_id: str) -> None:
    """Summarize events that left the context window into memory snapshots."""
    brain.remember(session_id)


def name_session(session_id: str) -> None:
    """Let the brain model name the session (keeps a title the user set)."""
    brain.name_session(session_id)


def delete_file(file_id: str) -> None:
    """Delete a file uploaded to the Files API whose attachment was deleted (best effort)."""
    files.delete_remote(file_id)
