"""The task queue: django-q2 tasks are enqueued here, on commit, with ids only."""

from __future__ import annotations

from django.db import transaction
from django_q.tasks import async_task


def enqueue_step(session_id, run_seq: int) -> None:
    """Enqueue ``run_step`` once the surrounding transaction commits (ids only)."""
    transaction.on_commit(
        lambda: async_task(
            "orchestrator_app.tasks.run_step",
            str(session_id),
            run_seq,
            group="ahentic",
            q_options={"ack_failure": True},
        )
    )


def enqueue_memory(session_id) -> None:
    """Summarize events that left the context window (background, on commit)."""
    transaction.on_commit(
        lambda: async_task("orchestrator_app.tasks.remember", str(session_id), group="ahentic")
    )


def enqueue_naming(session_id) -> None:
    transaction.on_commit(
        lambda: async_task("orchestrator_app.tasks.name_session", str(session_id), group="ahentic")
    )
