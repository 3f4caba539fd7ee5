"""Recovery after a SIGKILL: how long a run waits, with nobody acting, before it resumes.

Starts one ``manage.py qcluster`` (one django-q2 worker, the ORM broker, SQLite) and the local
Messages API server, then, 5 times each, SIGKILLs the worker process in the middle of a model
call (a reply streamed slowly) and in the middle of a tool (``sleeps``). The cluster spawns a
new worker; nobody calls continue. The clock runs from the kill to the moment a new step claims
the run (a new lease token), and each run must then finish with its events intact. Prints the
median per case beside ``RUN_LEASE_S`` (target: under 2 x RUN_LEASE_S) and the load average.

``--baseline`` also measures the same kills without the lease watch (only the once-a-minute
``ahentic_recover`` schedule, as before), in the same run: slow (about a minute per kill).

Usage: .venv/bin/python bench/recovery.py [--kills 5] [--lease 5] [--baseline]
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _setup import loadavg

ROOT = Path(__file__).resolve().parent.parent
LIMIT_S = 180


class Cluster:
    """One qcluster process with one worker; ``kill_worker`` SIGKILLs that worker process."""

    def __init__(self, env: dict[str, str]):
        self.log = Path(tempfile.mkstemp(prefix="ahentic-bench-recovery-", suffix=".log")[1])
        with open(self.log, "w") as out:
            self.process = subprocess.Popen(
                [sys.executable, "manage.py", "qcluster"],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def workers(self) -> list[int]:
        return [int(p) for p in re.findall(r"ready for work at (\d+)", self.log.read_text())]

    def wait_for_workers(self, count: int) -> None:
        deadline = time.monotonic() + 120
        while len(self.workers()) < count:
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise SystemExit(f"FAIL: the qcluster has no worker: {self.log.read_text()}")
            time.sleep(0.1)

    def kill_worker(self) -> None:
        os.kill(self.workers()[-1], signal.SIGKILL)

    def stop(self) -> None:
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)


def trial(case: str, cluster: Cluster, server, user) -> float:
    """One kill; seconds from the kill to a new step's claim."""
    from orchestrator_app.control import runs
    from orchestrator_app.testing.localapi import text_reply, tool_call, tool_reply
    from sessions_app import services
    from sessions_app.models import Event, Session

    server.reset()
    if case == "model call":
        slow = text_reply("a slowly streamed reply " * 60)
        slow.chunk_delay_s = 0.1  # about 6 s of deltas: the worker refreshes its lease meanwhile
        server.enqueue(slow, text_reply("Resumed."))
    else:
        server.enqueue(
            tool_reply(tool_call("sleeps", {"seconds": 30}, id="toolu_sleeps")),
            text_reply("Resumed."),
        )
    session = services.session_create(owner=user)
    workers_before = len(cluster.workers())
    runs.message_post(session=session, content=f"Kill the worker mid-{case}.")
    deadline = time.monotonic() + LIMIT_S
    if case == "model call":
        if not server.wait_for_requests(1, timeout=LIMIT_S):
            raise SystemExit("FAIL: the model was never called")
        time.sleep(1.0)  # into the stream
    else:
        started = Event.objects.filter(
            session=session, tool_use_id="toolu_sleeps", payload__has_key="started"
        )
        while not started.exists():
            if time.monotonic() > deadline:
                raise SystemExit("FAIL: the tool never started")
            time.sleep(0.02)
        time.sleep(0.5)
    token = Session.objects.values_list("lease_token", flat=True).get(pk=session.pk)
    cluster.kill_worker()
    killed = time.monotonic()
    while True:
        current = Session.objects.values_list("lease_token", flat=True).get(pk=session.pk)
        if current and current != token:
            resumed = time.monotonic() - killed
            break
        if time.monotonic() - killed > LIMIT_S:
            raise SystemExit(f"FAIL: the run did not resume within {LIMIT_S} s")
        time.sleep(0.02)
    while Session.objects.values_list("status", flat=True).get(pk=session.pk) == "running":
        if time.monotonic() - killed > LIMIT_S:
            raise SystemExit("FAIL: the resumed run did not finish")
        time.sleep(0.05)
    kinds = list(
        Event.objects.filter(session=session).order_by("seq").values_list("kind", flat=True)
    )
    expected = (
        ["user_message", "agent_message"]
        if case == "model call"
        else ["user_message", "tool_call", "tool_response", "agent_message"]
    )
    if kinds != expected:
        raise SystemExit(f"FAIL: events after the recovery: {kinds}")
    cluster.wait_for_workers(workers_before + 1)
    return resumed


def measure(label: str, env: dict[str, str], kills: int, server, user) -> dict[str, float]:
    cluster = Cluster(env)
    try:
        cluster.wait_for_workers(1)
        medians = {}
        for case in ("model call", "tool"):
            times = []
            for k in range(kills):
                times.append(trial(case, cluster, server, user))
                print(f"  {label}, mid-{case}: kill {k + 1}: {times[-1]:.2f} s", flush=True)
            medians[case] = statistics.median(times)
        return medians
    finally:
        cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--lease", type=int, default=5, help="RUN_LEASE_S")
    parser.add_argument("--baseline", action="store_true")
    args = parser.parse_args()

    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "bench.settings_recovery",
        "PYTHONPATH": str(ROOT),
        "BENCH_DB": os.path.join(tempfile.mkdtemp(prefix="ahentic-bench-"), "bench.sqlite3"),
        "BENCH_RUN_LEASE_S": str(args.lease),
    }
    os.environ.update(env)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from orchestrator_app.testing.localapi import LocalMessagesServer

    server = LocalMessagesServer().start()
    try:
        call_command("migrate", verbosity=0)
        env["BENCH_LLM_URL"] = os.environ["BENCH_LLM_URL"] = server.url
        settings.AHENTIC = {**settings.AHENTIC, "BASE_URL": server.url}
        user = get_user_model().objects.create_user("bench")
        print(
            f"SIGKILL of the worker, {args.kills} kills per case, RUN_LEASE_S = {args.lease} s, "
            "1 qcluster (1 worker), ORM broker, SQLite; load average before: " + loadavg()
        )
        results = {"lease watch": measure("lease watch", env, args.kills, server, user)}
        if args.baseline:
            baseline_env = {**env, "BENCH_NO_LEASE_WATCH": "1"}
            results["schedule only"] = measure(
                "schedule only", baseline_env, args.kills, server, user
            )
        print(f"load average after: {loadavg()}")
        for label, medians in results.items():
            for case, median in medians.items():
                print(
                    f"{label:>13}, mid-{case:<10}: median {median:5.2f} s from kill to resume "
                    f"= {median / args.lease:.2f} x RUN_LEASE_S ({args.lease} s)"
                )
        if "schedule only" in results:
            for case, median in results["lease watch"].items():
                ratio = median / results["schedule only"][case]
                print(f"lease watch / schedule only, mid-{case}: {ratio:.2f}")
    finally:
        server.stop()
        from django.db import connections

        connections.close_all()


if __name__ == "__main__":
    main()
