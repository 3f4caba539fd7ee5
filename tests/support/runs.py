"""Runs held at chosen points: a run started with no step executed, a step in a thread, a
sub-agent's steps held back, a memory snapshot, the live text of a streaming reply."""

import threading
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any
from unittest import mock

from django.db import connection

from orchestrator_app import tasks
from sessions_app import services
from sessions_app.models import Event, Session
from tests.support.api import post, session_url

QUEUE = "orchestrator_app.control.queue.async_task"

SPAWN = {"name": "researcher", "task": "Find three facts about tea.", "tools": ["echo"]}


class DeferChildSteps:
    """Runs the parent's steps inline (django-q2 sync mode) but holds the child's back."""

    def __init__(self, parent):
        self.parent_id = str(parent.pk)
        self.held: list[tuple] = []

    def __call__(self, func, *args, **kwargs):
        if func == "orchestrator_app.tasks.run_step" and args[0] != self.parent_id:
            self.held.append(args)
            return None
        return getattr(tasks, func.rsplit(".", 1)[1])(*args)


def post_unqueued(client, session, content: str):
    """Post a message with the queue stubbed: the run starts and no step is enqueued (the
    test runs them, ``step_next``). Returns the response."""
    with mock.patch(QUEUE):
        return post(client, session, "messages", {"content": content})


def step_next(session, measure: Callable[[Callable[[], None]], Any] | None = None) -> Any:
    """Run the session's next step as a worker would, the queue stubbed (the step after it
    is not enqueued). ``measure(step)``, when given, runs ``step`` inside what it measures (a
    statement count, a walk) and its answer is returned."""
    run_seq = Session.objects.values_list("run_seq", flat=True).get(pk=session.pk)

    def step() -> None:
        tasks.run_step(str(session.pk), run_seq)

    with mock.patch(QUEUE):
        return step() if measure is None else measure(step)


def start_run_without_steps(client, session, content="Do the job"):
    """Start a run whose step is never executed; returns its run_seq."""
    response = post(client, session, "messages", {"content": content})
    assert response.status_code == 202, response.content
    assert response.json()["status"] == "running"
    return response.json()["runSeq"]


def start_run_in_committed_db(client, session, content="Do the job"):
    with mock.patch("orchestrator_app.control.queue.async_task") as enqueued:
        run_seq = start_run_without_steps(client, session, content)
    assert enqueued.call_count == 1
    return run_seq


@contextmanager
def step_in_background(session, run_seq, *, release):
    """Run one step in a thread; on exit ``release()`` lets it finish, then it is joined."""

    def step():
        try:
            tasks.run_step(str(session.pk), run_seq)
        finally:
            connection.close()

    worker = threading.Thread(target=step)
    worker.start()
    try:
        yield
    finally:
        release()
        worker.join(timeout=30)
    assert not worker.is_alive()


def live_text(client, session) -> str:
    response = client.get(session_url(session, "live"))
    assert response.status_code == 200, response.content
    return response.json()["text"]


def remembered(session, through_seq: int) -> None:
    """A memory snapshot covering the session's events up to ``through_seq``."""
    events = list(Event.objects.filter(session=session, seq__lte=through_seq).order_by("seq"))
    services.snapshot_add(
        session_id=session.pk,
        level=1,
        from_event_id=events[0].pk,
        to_event_id=events[-1].pk,
        text="Summary.",
    )
