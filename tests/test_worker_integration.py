"""A real ``qcluster`` worker runs the agent loop end to end.

The test process enqueues the first step to the ORM broker for real (it runs django-q2 in sync
mode itself), a worker started with ``tests.settings_worker`` picks it up from the same test
database and calls the test's local Messages API server; the test polls the API like the
sidebar does. The test tools reach the worker through tool discovery (tests/ahentic_tools.py).
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from unittest import mock

import pytest
from django.db import connection
from django_q.tasks import async_task

from orchestrator_app.testing.localapi import text_reply, tool_call, tool_reply

from .conftest import payload_of, session_url, transcript_of

ROOT = Path(__file__).resolve().parent.parent
POLL_LIMIT_S = 30

pytestmark = [
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("llm_strict"),
]


@pytest.fixture
def qcluster(transactional_db, llm, tmp_path):
    """A ``manage.py qcluster`` process on the committed test database; always stopped."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings_worker",
        "AHENTIC_TEST_DB_NAME": str(connection.settings_dict["NAME"]),
        "AHENTIC_TEST_LLM_URL": llm.url,
    }
    log_path = tmp_path / "qcluster.log"
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "qcluster"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so its children can be stopped too
        )
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        sys.stderr.write(f"qcluster log:\n{log_path.read_text()}\n")


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

    with mock.patch("orchestrator_app.queue.async_task", enqueue_to_the_broker):
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
    assert result["meta"] == {"tool": "echo", "callId": "toolu_worker", "ok": True}
    assert '"echo": "from the worker"' in result["content"]
    assert transcript[3]["content"] == "The worker echoed it."
    assert len(llm.message_requests()) == 2
    assert body["stepCount"] == 2
    assert body["tokensIn"] > 0
