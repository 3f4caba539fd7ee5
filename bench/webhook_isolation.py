"""Webhook isolation: a receiver that never answers must not slow the chats.

Runs 6 chats in parallel through real qcluster workers (a site cluster of two workers; the
model is the local Messages API server; each run makes four tool calls then replies, so every
chat takes five steps and sends six webhook events: run.started, four tool.executed and
run.finished) with the webhook deliveries on their own cluster (``WEBHOOK_CLUSTER``, one
worker), in rounds that alternate on the same running processes:

- baseline: no webhook endpoint (the one endpoint is disabled);
- isolated: the endpoint, for every event, enabled: its receiver accepts the connection and
  never answers, so each attempt waits ``WEBHOOK_TIMEOUT_S`` in the deliveries' worker.

Alternating rounds meet the same load from the rest of the machine. Each round takes 6 new
chats; the median of ``--rounds`` rounds counts. Prints each round with the load average beside
it and the ratio isolated / baseline. Target (issue "Where features meet"): within 1.2x.

``--shared`` then restarts the site's cluster with the deliveries on it (``WEBHOOK_CLUSTER``
"", as before the setting) and runs one round with the silent receiver, for comparison: each
attempt holds a chat worker for ``WEBHOOK_TIMEOUT_S``.

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


def round_of(label: str, *, chats: int, user) -> float:
    """Seconds ``chats`` new chats take to finish their runs, in parallel."""
    from orchestrator_app.control import runs
    from sessions_app import services
    from sessions_app.models import Session

    sessions = [services.session_create(owner=user) for _ in range(chats)]
    started = time.perf_counter()
    run_all(runs, Session, sessions, f"{label} chats")
    elapsed = time.perf_counter() - started
    print(f"  {label}: {elapsed:.2f} s   load average: {load()}")
    return elapsed


def set_cluster(webhook_cluster: str) -> None:
    """This process enqueues first steps (and sends run.started) with the workers' setting."""
    from django.conf import settings

    settings.AHENTIC = {**settings.AHENTIC, "WEBHOOK_CLUSTER": webhook_cluster}


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

    from orchestrator_app.control import runs
    from orchestrator_app.models import WebhookDelivery
    from orchestrator_app.testing.localapi import LocalMessagesServer
    from orchestrator_app.webhooks import delivery
    from orchestrator_app.webhooks.delivery import endpoint_create
    from orchestrator_app.webhooks.events import SUBSCRIBABLE
    from sessions_app import services
    from sessions_app.models import Session

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
        endpoint, _ = endpoint_create(
            name="Silent", url=receiver.url, events=[value for value, _ in SUBSCRIBABLE]
        )
        set_cluster(WEBHOOK_CLUSTER)
        workers = start_clusters(env, WEBHOOK_CLUSTER)
        times: dict[str, list[float]] = {"baseline": [], "isolated": []}
        try:
            run_all(
                runs, Session, [services.session_create(owner=user) for _ in range(4)], "warm-up"
            )
            for n in range(args.rounds):
                delivery.endpoint_disable(endpoint_id=endpoint.pk, reason="baseline round")
                times["baseline"].append(
                    round_of(f"round {n + 1} baseline (no endpoint)", chats=args.chats, user=user)
                )
                delivery.endpoint_enable(endpoint_id=endpoint.pk)
                times["isolated"].append(
                    round_of(
                        f"round {n + 1} isolated (silent receiver, own cluster)",
                        chats=args.chats,
                        user=user,
                    )
                )
        finally:
            stop_clusters(workers)
        attempted = receiver.accepted
        baseline = statistics.median(times["baseline"])
        isolated = statistics.median(times["isolated"])
        shared = None
        if args.shared:
            WebhookDelivery.objects.all().delete()
            set_cluster("")
            workers = start_clusters(env, "")
            try:
                shared = round_of(
                    "shared (silent receiver, site cluster)", chats=args.chats, user=user
                )
            finally:
                stop_clusters(workers)

        print(f"load average: {load()}")
        print(f"baseline: {baseline:.2f} s (median of {args.rounds})")
        print(f"isolated: {isolated:.2f} s (median of {args.rounds})")
        if shared is not None:
            print(f"shared: {shared:.2f} s, {shared / baseline:.2f}x the baseline")
        print(f"connections the silent receiver accepted during the rounds: {attempted}")
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
