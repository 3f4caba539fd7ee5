"""A real ``qcluster`` worker runs the agent loop end to end.

The test process enqueues the first step to the ORM broker for real (it runs django-q2 in sync
mode itself), a worker started with ``tests.settings_worker`` picks it up from the same test
database and calls the test's local Messages API server; the test polls the API like the
sidebar does. The test tools reach the worker through tool discovery (tests/ahentic_tools.py).
"""

import os
import re
import signal
import time
from pathlib import Path
from unittest import mock

import pytest
from django.utils import timezone
from django_q.models import Success, Task
from django_q.tasks import async_task

from orchestrator_app.testing.localapi import text_reply, tool_call, tool_reply
from tests.support.api import payload_of, session_url, transcript_of
from tests.support.workers import POLL_LIMIT_S, wait_for_log

pytestmark = [
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("llm_strict"),
]


@pytest.fixture
def qcluster(workers):
    """One ``manage.py qcluster`` process on the committed test database."""
    return workers.start()


def enqueue_to_the_broker(*args, **kwargs):
    """``async_task`` as in production: queued in the ORM broker, not run inline."""
    return async_task(*args, **{**kwargs, "sync": False})


def wait_until_settled(client, session) -> dict:
    deadline = time.monotonic() + POLL_LIMIT_S
    while True:
        body = payload_of(client, session)
        if body["status"] not in ("running",) or time.monotonic() > deadline:
            return body
        time.sleep(0.1)  # polling the worker's progress, like the sidebar


def test_a_real_worker_runs_a_message_through_a_tool_to_the_final_reply(
    owner_client, session, llm, qcluster
):
    llm.enqueue(
        tool_reply(tool_call("echo", {"text": "from the worker"}, id="toolu_worker")),
        text_reply("The worker echoed it."),
    )

    with mock.patch("orchestrator_app.control.queue.async_task", enqueue_to_the_broker):
        response = owner_client.post(
            session_url(session, "messages"), {"content": "Echo something"}, format="json"
        )
    assert response.status_code == 202, response.content
    assert response.json()["status"] == "running"

    body = wait_until_settled(owner_client, session)

    assert qcluster.poll() is None, "the worker died"
    assert body["status"] == "idle", body
    transcript = transcript_of(owner_client, session)
    assert [m["kind"] for m in transcript] == [
        "user_message",
        "tool_call",
        "tool_response",
        "agent_message",
    ]
    call, result = transcript[1], transcript[2]
    assert (call["meta"]["tool"], call["meta"]["input"]) == ("echo", {"text": "from the worker"})
    assert result["meta"] == {
        "tool": "echo",
        "label": "Echo",
        "callId": "toolu_worker",
        "ok": True,
    }
    assert '"echo": "from the worker"' in result["content"]
    assert transcript[3]["content"] == "The worker echoed it."
    assert len(llm.message_requests()) == 2
    assert body["stepCount"] == 2
    assert body["tokensIn"] > 0
    # A step that succeeded is not stored as a task row (the trace has it). A task queued
    # after the steps is stored once the cluster's monitor got to it, and so would they be.
    marker = enqueue_to_the_broker("math.floor", 2.5)
    deadline = time.monotonic() + POLL_LIMIT_S
    while not Success.objects.filter(id=marker).exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert Success.objects.filter(id=marker).exists()
    assert not Task.objects.filter(func="orchestrator_app.tasks.run_step").exists()


def test_a_run_whose_worker_is_killed_mid_tool_is_recovered_once(
    owner_client, session, llm, workers, settings
):
    """A worker SIGKILLed while a tool runs: its task is gone (the Redis broker delivers at
    most once; the ORM broker would only redeliver after ``retry``). Once the lease expires,
    the ahentic_recover sweep re-enqueues the step; a new worker answers the interrupted call
    and finishes the run, with no event written twice."""
    from orchestrator_app import tasks
    from sessions_app.models import Event, Session

    llm.enqueue(
        tool_reply(tool_call("sleeps", {"seconds": 30}, id="toolu_sleeps")),
        text_reply("Recovered after the worker died."),
    )
    workers.env["AHENTIC_TEST_RUN_LEASE_S"] = "2"
    first = workers.start()
    with mock.patch("orchestrator_app.control.queue.async_task", enqueue_to_the_broker):
        response = owner_client.post(
            session_url(session, "messages"), {"content": "Sleep on it"}, format="json"
        )
    assert response.status_code == 202, response.content
    deadline = time.monotonic() + POLL_LIMIT_S
    while not Event.objects.filter(tool_use_id="toolu_sleeps", payload__has_key="started"):
        assert time.monotonic() < deadline, "the tool never started"
        time.sleep(0.1)

    workers.kill(first)
    lease = Session.objects.values_list("lease_expires_at", flat=True).get(pk=session.pk)
    while timezone.now() <= lease:  # the dead worker's lease runs out (tool timeout + lease)
        assert time.monotonic() < deadline + 60, "the lease never expired"
        time.sleep(0.2)
    workers.start()
    with mock.patch("orchestrator_app.control.queue.async_task", enqueue_to_the_broker):
        assert tasks.recover() == 1
    body = wait_until_settled(owner_client, session)

    assert body["status"] == "idle", body
    transcript = transcript_of(owner_client, session)
    assert [m["kind"] for m in transcript] == [
        "user_message",
        "tool_call",
        "tool_response",
        "agent_message",
    ]
    assert transcript[2]["meta"]["error"] == "tool_interrupted"
    assert transcript[3]["content"] == "Recovered after the worker died."
    assert len(llm.message_requests()) == 2
    seqs = list(Event.objects.filter(session=session).values_list("seq", flat=True))
    assert len(seqs) == len(set(seqs)) == 4


def worker_pids(log_path: Path) -> list[int]:
    """The django-q2 worker processes a cluster started, oldest first (from its log)."""
    return [int(pid) for pid in re.findall(r"ready for work at (\d+)", log_path.read_text())]


def test_a_run_whose_worker_process_is_killed_mid_tool_resumes_with_nobody_acting(
    owner_client, session, llm, workers
):
    """The worker process is SIGKILLed while a tool runs; its cluster spawns a new one. Nobody
    calls continue or the sweep, and the ahentic_recover schedule is off: the lease watch of the worker processes notices the lease
    expire and re-enqueues the step, which answers the interrupted call and finishes."""
    from sessions_app.models import Event

    llm.enqueue(
        tool_reply(tool_call("sleeps", {"seconds": 30}, id="toolu_sleeps")),
        text_reply("Back after the worker died."),
    )
    workers.env["AHENTIC_TEST_RUN_LEASE_S"] = "2"
    workers.env["AHENTIC_TEST_NO_SCHEDULER"] = "1"
    workers.start()
    log_path = workers.processes[-1][1]
    wait_for_log(log_path, "ready for work")
    with mock.patch("orchestrator_app.control.queue.async_task", enqueue_to_the_broker):
        response = owner_client.post(
            session_url(session, "messages"), {"content": "Sleep on it"}, format="json"
        )
    assert response.status_code == 202, response.content
    deadline = time.monotonic() + POLL_LIMIT_S
    while not Event.objects.filter(tool_use_id="toolu_sleeps", payload__has_key="started"):
        assert time.monotonic() < deadline, "the tool never started"
        time.sleep(0.05)

    [worker] = worker_pids(log_path)
    os.kill(worker, signal.SIGKILL)
    body = wait_until_settled(owner_client, session)

    assert body["status"] == "idle", body
    assert len(worker_pids(log_path)) == 2  # the cluster replaced the dead worker
    transcript = transcript_of(owner_client, session)
    assert [m["kind"] for m in transcript] == [
        "user_message",
        "tool_call",
        "tool_response",
        "agent_message",
    ]
    assert transcript[2]["meta"]["error"] == "tool_interrupted"
    assert transcript[3]["content"] == "Back after the worker died."
    assert len(llm.message_requests()) == 2


def test_a_continue_sent_before_a_dead_clusters_lease_expires_takes_effect_when_it_does(
    owner_client, session, llm, workers
):
    """A host dies mid-model-call (its whole cluster is SIGKILLed) while another cluster runs.
    The user presses Continue at once, while the dead worker's lease still holds: it is not
    ignored, the run resumes on the other cluster once the lease runs out."""
    from sessions_app.models import Session

    slow = text_reply("a long reply " * 200)
    slow.chunk_delay_s = 0.2  # deltas keep coming, so the worker keeps refreshing its lease
    llm.enqueue(slow, text_reply("Finished on the other host."))
    workers.env["AHENTIC_TEST_RUN_LEASE_S"] = "6"
    workers.env["AHENTIC_TEST_NO_SCHEDULER"] = "1"
    first = workers.start()
    wait_for_log(workers.processes[-1][1], "ready for work")
    with mock.patch("orchestrator_app.control.queue.async_task", enqueue_to_the_broker):
        response = owner_client.post(
            session_url(session, "messages"), {"content": "Write a lot"}, format="json"
        )
    assert response.status_code == 202, response.content
    assert llm.wait_for_requests(1, timeout=POLL_LIMIT_S), "the model was never called"
    workers.start()
    wait_for_log(workers.processes[-1][1], "ready for work")

    workers.kill(first)
    with mock.patch("orchestrator_app.control.queue.async_task", enqueue_to_the_broker):
        response = owner_client.post(session_url(session, "continue"))
    assert response.status_code == 200, response.content
    held = Session.objects.values_list("lease_expires_at", flat=True).get(pk=session.pk)
    body = wait_until_settled(owner_client, session)

    assert body["status"] == "idle", body
    assert body["messages"][-1]["content"] == "Finished on the other host."
    assert len(llm.message_requests()) == 2
    assert held is not None  # the Continue came while the dead worker's lease was set


def test_the_lease_watch_keeps_its_database_connection_between_sweeps(workers, tmp_path):
    """With persistent connections (``CONN_MAX_AGE``), each worker process's lease watch sweeps
    on one connection instead of opening one per sweep (a reconnect per sweep was the watch's
    cost in an idle cluster); the sweeps go on (every half second at a 2 s lease)."""
    connections_log = tmp_path / "connections.log"
    workers.env["AHENTIC_TEST_RUN_LEASE_S"] = "2"
    workers.env["AHENTIC_TEST_CONN_MAX_AGE"] = "60"
    workers.env["AHENTIC_TEST_CONNECTIONS_LOG"] = str(connections_log)
    workers.start()
    wait_for_log(workers.processes[-1][1], "ready for work")
    time.sleep(3)  # about six sweeps of the watch: let them happen

    opened = connections_log.read_text().splitlines()
    assert opened.count("ahentic-lease-watch") == 1, opened
