"""django-q2 entry points: thin, id-only, idempotent."""

from __future__ import annotations

from . import services, step


def run_step(session_id: str, run_seq: int) -> None:
    """Run one step of a session's run. A redelivered or duplicate task returns quietly."""
    step.run_step(session_id, int(run_seq))


def recover() -> int:
    """The ``ahentic_recover`` sweep: re-enqueue running sessions whose worker is gone."""
    return services.recover_stalled()
