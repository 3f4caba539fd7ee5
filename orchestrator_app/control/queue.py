"""The task queue: django-q2 tasks are enqueued here, on commit, with ids only."""

from __future__ import annotations

from django_q.tasks import async_task

from sessions_app import db

from .. import telemetry


def enqueue_step(session_id, run_seq: int, *, origin: str | None = None) -> None:
    """Enqueue ``run_step`` once the surrounding transaction commits (ids only).

    A step that succeeds is not stored as a django-q2 task row (``save``: False): the
    session's trace records every step, and with django-q2's default ``save_limit`` the
    cluster's monitor would read and prune up to 250 stored tasks after each step. A failed
    step is still stored, for the django-q2 admin.

    The task carries the trace context (``telemetry.task_context``, read now: the web
    request's, or the run's first step's; ``origin``: the run's first step a paused call kept,
    for a decision resuming it) as ``trace=``, only when there is one."""
    carried = telemetry.task_context(origin)
    context = {"trace": carried} if carried else {}
    db.on_commit(
        lambda: async_task(
            "orchestrator_app.tasks.run_step",
            str(session_id),
            run_seq,
            group="ahentic",
            q_options={"ack_failure": True, "save": False},
            **context,
        )
    )


def enqueue_memory(session_id) -> None:
    """Summarize events that left the context window (background, on commit)."""
    db.on_commit(
        lambda: async_task("orchestrator_app.tasks.remember", str(session_id), group="ahentic")
    )


def enqueue_naming(session_id) -> None:
    db.on_commit(
        lambda: async_task("orchestrator_app.tasks.name_session", str(session_id), group="ahentic")
    )


def enqueue_purge(at) -> None:
    """Purge the chats deleted before the undo window at ``at`` (a one-off django-q2
    schedule, made on commit; each run purges every chat that is due, so a missed one is
    caught by the next)."""
    from django_q.models import Schedule
    from django_q.tasks import schedule

    db.on_commit(
        lambda: schedule(
            "orchestrator_app.tasks.purge_deleted_chats",
            schedule_type=Schedule.ONCE,
            repeats=-1,  # a ONCE schedule with negative repeats is deleted after it ran
            next_run=at,
        )
    )
