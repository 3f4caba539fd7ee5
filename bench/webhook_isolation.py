"""Webhook isolation: a receiver that never answers must not slow the chats.

Runs 6 chats in parallel through real qcluster workers (a site cluster of two workers; the
model is the local Messages API server; each run makes four tool calls then replies, so every
chat takes five steps and sends six webhook events: run.started, four tool.executed and
run.finished), in three set-ups, each with fresh qclusters and a warm-up first:

- baseline: no webhook endpoint (the same processes as the isolated set-up: the site's
  cluster and the webhook deliveries' own);
- isolated: an endpoint for every event whose receiver accepts the connection and never
  answers, with the deliveries on their own cluster (``WEBHOOK_CLUSTER``, one worker);
- shared (``--shared``, for comparison): the same receiver, the deliveries on the site's
  cluster (the behaviour before ``WEBHOOK_CLUSTER``): each attempt holds a chat worker for
  ``WEBHOOK_TIMEOUT_S``.

Each set-up runs ``--rounds`` rounds (6 new chats each); the median wall time counts. Prints
the times with the load average beside them and the ratio isolated / baseline measured in the
same run. Target (issue "Where features meet"): within 1.2x.

On SQLite by default; ``--pgport PORT`` uses a running PostgreSQL server on 127.0.0.1 (user
postgres, no password) and a database of its own, ``--pgdatabase`` (dropped and made again).

Usage: .venv/bin/python bench/webhook_isolation.py [--chats 6] [--rounds 5] [--shared]
       [--pgport 5432 --pgdatabase ahentic_bench_webhooks]
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.throughput import (  # noqa: E402
    TOOL_CALLS_PER_RUN,
    responder,
    run_all,
    wait_until_ready,
)

TARGET = 1.2
WEBHOOK_CLUSTER = "bench_webhooks"  # its ALT_CLUSTERS entry: bench/settings_webhook_isolation.py


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


class SilentReceiver:
    """Accepts every connection and never reads or answers: each attempt waits for its
    timeout."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(512)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/hooks"
        self.held: list[socket.socket] = []
        self.accepted = 0
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)
            self.accepted += 1

    def stop(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


def start_clusters(env: dict, webhook_cluster: str) -> list[subprocess.Popen]:
    """The site's qcluster, and the webhook deliveries' own when ``webhook_cluster`` is set."""
    env = {**env, "BENCH_WEBHOOK_CLUSTER": webhook_cluster}
    envs = [env]
    if webhook_cluster:
        envs.append({**env, "Q_CLUSTER_NAME": webhook_cluster})
    workers, logs = [], []
    for worker_env in envs:
        log = tempfile.NamedTemporaryFile(prefix="ahentic-bench-qcluster-", delete=False)
        logs.append(Path(log.name))
        workers.append(
            subprocess.Popen(
                [sys.executable, "manage.py", "qcluster"],
                cwd=ROOT,
                env=worker_env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )
    wait_until_ready(logs)
    return workers


def stop_clusters(workers: list[subprocess.Popen]) -> None:
    for worker in workers:
        os.killpg(worker.pid, signal.SIGTERM)
    for worker in workers:
        try:
            worker.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()


def measure(label: str, *, env, chats: int, rounds: int, webhook_cluster: str, user) -> float:
    """The median seconds ``chats`` parallel chats take, over ``rounds`` rounds."""
    from django.conf import settings

    from orchestrator_app.control import runs
    from sessions_app import services
    from sessions_app.models import Session

    # This process enqueues the first step (and sends run.started) with the same setting.
    settings.AHENTIC = {**settings.AHENTIC, "WEBHOOK_CLUSTER": webhook_cluster}
    workers = start_clusters(env, webhook_cluster)
    try:
        run_all(runs, Session, [services.session_create(owner=user) for _ in range(4)], "warm-up")
        times = []
        for n in range(rounds):
            sessions = [services.session_create(owner=user) for _ in range(chats)]
            started = time.perf_counter()
            run_all(runs, Session, sessions, f"{label} chats (round {n + 1})")
            times.append(time.perf_counter() - started)
            print(f"  {label}: {times[-1]:.2f} s   load average: {load()}")
    finally:
        stop_clusters(workers)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--shared", action="store_true", help="also measure the shared cluster")
    parser.add_argument("--pgport", help="a PostgreSQL server's port on 127.0.0.1")
    parser.add_argument("--pgdatabase", default="ahentic_bench_webhooks")
    args = parser.parse_args()

    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "bench.settings_webhook_isolation",
        "PYTHONPATH": str(ROOT),
        "BENCH_DB": os.path.join(tempfile.mkdtemp(prefix="ahentic-bench-"), "bench.sqlite3"),
    }
    if args.pgport:
        env.update(BENCH_PGPORT=args.pgport, BENCH_PGDATABASE=args.pgdatabase)
        psql = ["psql", "-h", "127.0.0.1", "-p", args.pgport, "-U", "postgres", "-c"]
        subprocess.run([*psql, f"DROP DATABASE IF EXISTS {args.pgdatabase}"], check=True)
        subprocess.run([*psql, f"CREATE DATABASE {args.pgdatabase}"], check=True)
    os.environ.update(env)
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from orchestrator_app.models import WebhookDelivery
    from orchestrator_app.testing.localapi import LocalMessagesServer
    from orchestrator_app.webhooks.delivery import endpoint_create
    from orchestrator_app.webhooks.events import SUBSCRIBABLE

    server = LocalMessagesServer().start()
    server.responder = responder
    receiver = SilentReceiver()
    try:
        call_command("migrate", verbosity=0)
        env["BENCH_LLM_URL"] = os.environ["BENCH_LLM_URL"] = server.url
        settings.AHENTIC = {**settings.AHENTIC, "BASE_URL": server.url}
        user = get_user_model().objects.create_user("bench")
        timeout = settings.AHENTIC["WEBHOOK_TIMEOUT_S"]
        backend = "PostgreSQL" if args.pgport else "SQLite"
        print(
            f"{args.chats} parallel chats x {TOOL_CALLS_PER_RUN + 1} steps, a site cluster of "
            f"2 workers, {backend}, ORM broker; WEBHOOK_TIMEOUT_S {timeout}"
        )
        common = {"env": env, "chats": args.chats, "rounds": args.rounds, "user": user}
        baseline = measure("baseline (no endpoint)", webhook_cluster=WEBHOOK_CLUSTER, **common)

        endpoint_create(
            name="Silent", url=receiver.url, events=[value for value, _ in SUBSCRIBABLE]
        )
        isolated = measure(
            "isolated (silent receiver, own cluster)", webhook_cluster=WEBHOOK_CLUSTER, **common
        )
        attempted = receiver.accepted
        results = [("isolated", isolated)]
        if args.shared:
            WebhookDelivery.objects.all().delete()
            shared = measure(
                "shared (silent receiver, site cluster)",
                webhook_cluster="",
                **{**common, "rounds": 1},
            )
            results.append(("shared", shared))

        print(f"load average: {load()}")
        print(f"baseline: {baseline:.2f} s (median of {args.rounds})")
        for label, seconds in results:
            print(f"{label}: {seconds:.2f} s, {seconds / baseline:.2f}x the baseline")
        print(f"connections the silent receiver accepted while the isolated chats ran: {attempted}")
        ratio = isolated / baseline
        print(
            f"{'PASS' if ratio <= TARGET else 'FAIL'}: isolated / baseline = {ratio:.2f}x "
            f"(target <= {TARGET}x)"
        )
    finally:
        receiver.stop()
        server.stop()
        from django.db import connections

        connections.close_all()


if __name__ == "__main__":
    main()
