"""Two real ``qcluster`` processes tick for the same due time: the schedule fires once.

Both clusters share the test database and its ORM broker. The test enqueues the tick task
(``orchestrator_app.schedules.tasks.schedule_tick`` with one "now") many times; the clusters take them
as they come, each tick claims the due time by inserting its log row, and only one insert can
succeed (the unique schedule and due time). The run the winner starts is a step on one of the
clusters, answered by the test's local Messages API server.
"""

import re
import time
from datetime import UTC, datetime, timedelta

import pytest
from django_q.models import Task
from django_q.tasks import async_task

from orchestrator_app.models import ScheduleRun
from orchestrator_app.testing.localapi import text_reply
from sessions_app.models import Session
from tests.support.factories import agent_create, schedule_create

# ``workers``: the fixture that starts qcluster processes (used by name, hence the noqa).
from tests.support.workers import POLL_LIMIT_S, wait_for_log

pytestmark = [
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("llm_strict"),
]

TICKS = 12
# A due time far from the real clock: the clusters' own every-minute tick never fires it.
DUE = datetime(2027, 1, 5, 9, 0, tzinfo=UTC)


def test_two_clusters_ticking_for_one_due_time_fire_it_once(owner, llm, workers):  # noqa: F811
    schedule = schedule_create(
        owner, agent_create("digest"), cron="0 9 5 1 *", now=DUE - timedelta(hours=1)
    )
    llm.enqueue(text_reply("Digest: all quiet."))

    for _ in range(2):
        workers.start()
    for _, log_path in workers.processes:
        wait_for_log(log_path, "ready for work")
    now = (DUE + timedelta(seconds=30)).isoformat()
    for _ in range(TICKS):
        async_task("orchestrator_app.schedules.tasks.schedule_tick", now, sync=False)

    deadline = time.monotonic() + POLL_LIMIT_S
    ticks = Task.objects.filter(func="orchestrator_app.schedules.tasks.schedule_tick")
    while ticks.count() < TICKS or Session.objects.filter(status="running").exists():
        assert time.monotonic() < deadline, "the clusters did not run every tick and the step"
        time.sleep(0.2)

    for process, _ in workers.processes:
        assert process.poll() is None, "a cluster died"
    assert ticks.filter(success=True).count() == TICKS
    # Every tick ran; one of them fired (it returns how many firings it made).
    assert sorted(task.result for task in ticks) == [0] * (TICKS - 1) + [1]
    [row] = ScheduleRun.objects.filter(schedule=schedule)
    assert row.due_at == DUE and row.session is not None
    [chat] = Session.objects.filter(owner=owner)
    assert chat.status == "idle"
    assert len(llm.message_requests()) == 1
    # Both clusters took part: each logged ticks it processed.
    per_cluster = [
        len(
            re.findall(
                r"processing \S+ 'orchestrator_app.schedules.tasks.schedule_tick'", path.read_text()
            )
        )
        for _, path in workers.processes
    ]
    assert sum(per_cluster) == TICKS and min(per_cluster) >= 1, per_cluster
