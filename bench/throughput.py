"""Steps per second through real qcluster workers: 50 sessions x 5 steps, with integrity checks.

Starts N ``manage.py qcluster`` processes (stand-ins for N hosts; one django-q2 worker each)
on SQLite with the ORM broker, or on PostgreSQL (``--postgres``: a private server started here,
as the CI's PostgreSQL leg does) with the ORM or the Redis broker (``--redis``: a private
redis-server). The model is the local Messages API server: each run makes four tool calls then
replies, so every session takes five steps. Prints steps/s with the load average, then checks
that no event was lost or written twice and no tool call was left unanswered. A warm-up of
two runs per worker comes first, untimed (imports, the SDK client, the first queries).

Target (issue "Fast at any size"): >= 40 steps/s with 2 workers on PostgreSQL.

Usage: .venv/bin/python bench/throughput.py [--sessions 50] [--workers 2] [--postgres] [--redis]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOOL_CALLS_PER_RUN = 4


def responder(body):
    """Four echo calls, then a reply: counted from the assistant turns since the user's message."""
    from orchestrator_app.testing.localapi import text_reply, tool_call, tool_reply

    turns = 0
    for message in reversed(body["messages"]):
        if message["role"] == "assistant":
            turns += 1
        elif any(block.get("type") == "text" for block in message["content"]):
            break
    if turns < TOOL_CALLS_PER_RUN:
        return tool_reply(tool_call("echo", {"text": f"lookup {turns}"}))
    return text_reply("All lookups done.")


def free_port() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return str(probe.getsockname()[1])


def run_all(runs, Session, sessions, label: str) -> None:
    """Post the message of every session and wait until each run took its five steps."""
    started = time.perf_counter()
    for session in sessions:
        runs.message_post(session=session, content="Look up four things.")
    ids = [session.pk for session in sessions]
    while True:
        done = Session.objects.filter(
            pk__in=ids, status="idle", step_count=TOOL_CALLS_PER_RUN + 1
        ).count()
        print(f"  {done}/{len(ids)} {label} finished", end="\r", flush=True)
        if done == len(ids):
            print()
            return
        if time.perf_counter() - started > 600:
            raise SystemExit(f"\nFAIL: the {label} did not finish within 10 minutes")
        time.sleep(0.1)


def wait_until_ready(logs: list[Path], limit_s: float = 120) -> None:
    """Until every qcluster's worker process logged that it is ready for work, so the clock
    starts with all workers up (a cluster takes a few seconds to start Django)."""
    deadline = time.monotonic() + limit_s
    while not all("ready for work" in log.read_text(errors="replace") for log in logs):
        if time.monotonic() > deadline:
            raise SystemExit(f"FAIL: a qcluster did not start within {limit_s:.0f} s: {logs}")
        print("  waiting for the qclusters to start...", end="\r", flush=True)
        time.sleep(0.2)


def start_postgres() -> tuple[str, callable]:
    pgbin = sorted(Path("/usr/lib/postgresql").glob("*/bin"))[-1]
    data = tempfile.mkdtemp(prefix="ahentic-bench-pg-")
    port = free_port()
    shutil.chown(data, "postgres")
    as_postgres = ["su", "postgres", "-c"]
    subprocess.run(
        [*as_postgres, f"{pgbin}/initdb -D {data} -U postgres --auth=trust -E UTF8"],
        check=True,
        capture_output=True,
    )
    options = f"-p {port} -k /tmp -c listen_addresses=127.0.0.1"
    subprocess.run(
        [*as_postgres, f"{pgbin}/pg_ctl -D {data} -o '{options}' -l {data}/log -w start"],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [
            "psql",
            "-h",
            "127.0.0.1",
            "-p",
            port,
            "-U",
            "postgres",
            "-c",
            "CREATE DATABASE ahentic_bench",
        ],
        check=True,
        capture_output=True,
    )

    def stop():
        subprocess.run(
            [*as_postgres, f"{pgbin}/pg_ctl -D {data} -m fast stop"], capture_output=True
        )

    return port, stop


def start_redis() -> tuple[str, callable]:
    directory = tempfile.mkdtemp(prefix="ahentic-bench-redis-")
    port = free_port()
    subprocess.run(
        [
            "redis-server",
            "--port",
            port,
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--dir",
            directory,
            "--daemonize",
            "yes",
            "--pidfile",
            f"{directory}/redis.pid",
        ],
        check=True,
        capture_output=True,
    )
    time.sleep(0.5)

    def stop():
        os.kill(int(Path(f"{directory}/redis.pid").read_text()), signal.SIGTERM)

    return f"redis://127.0.0.1:{port}/0", stop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--postgres", action="store_true")
    parser.add_argument("--redis", action="store_true")
    args = parser.parse_args()

    cleanups = []
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "bench.settings_throughput",
        "PYTHONPATH": str(ROOT),
    }
    env["BENCH_DB"] = os.path.join(tempfile.mkdtemp(prefix="ahentic-bench-"), "bench.sqlite3")
    if args.postgres:
        port, stop = start_postgres()
        env["BENCH_PGPORT"] = port
        cleanups.append(stop)
    if args.redis:
        url, stop = start_redis()
        env["BENCH_REDIS_URL"] = url
        cleanups.append(stop)
    os.environ.update(env)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from orchestrator_app.control import runs
    from orchestrator_app.testing.localapi import LocalMessagesServer
    from sessions_app import services
    from sessions_app.models import Event, Session

    workers = []
    server = LocalMessagesServer().start()
    server.responder = responder
    try:
        call_command("migrate", verbosity=0)
        env["BENCH_LLM_URL"] = server.url
        os.environ["BENCH_LLM_URL"] = server.url
        from django.conf import settings

        settings.AHENTIC = {**settings.AHENTIC, "BASE_URL": server.url}
        user = get_user_model().objects.create_user("bench")
        sessions = [services.session_create(owner=user) for _ in range(args.sessions)]
        backend = ("PostgreSQL" if args.postgres else "SQLite") + (
            ", Redis broker" if args.redis else ", ORM broker"
        )
        print(
            f"{args.sessions} sessions x {TOOL_CALLS_PER_RUN + 1} steps, {args.workers} qcluster(s), {backend}"
        )
        logs = []
        for _ in range(args.workers):
            log = tempfile.NamedTemporaryFile(prefix="ahentic-bench-qcluster-", delete=False)
            logs.append(Path(log.name))
            workers.append(
                subprocess.Popen(
                    [sys.executable, "manage.py", "qcluster"],
                    cwd=ROOT,
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
        wait_until_ready(logs)
        # Warm-up (not timed): every worker imports the tools and creates its SDK client once.
        warmup = [services.session_create(owner=user) for _ in range(2 * args.workers)]
        run_all(runs, Session, warmup, "warm-up sessions")
        warmup_requests = len(server.message_requests())
        started = time.perf_counter()
        run_all(runs, Session, sessions, "sessions")
        elapsed = time.perf_counter() - started
        expected_steps = args.sessions * (TOOL_CALLS_PER_RUN + 1)
        print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(
            f"steps/s: {expected_steps / elapsed:.1f} ({expected_steps} steps in {elapsed:.1f} s)"
        )

        problems = []
        for session in sessions:
            kinds = list(
                Event.objects.filter(session=session).order_by("seq").values_list("kind", flat=True)
            )
            expected = [
                "user_message",
                *["tool_call", "tool_response"] * TOOL_CALLS_PER_RUN,
                "agent_message",
            ]
            if kinds != expected:
                problems.append(f"{session.pk}: {kinds}")
        requests = len(server.message_requests()) - warmup_requests
        if requests != expected_steps:
            problems.append(f"{requests} model calls for {expected_steps} steps")
        print(
            "integrity: "
            + (
                "OK (no lost or duplicated event, every tool call answered)"
                if not problems
                else "FAIL"
            )
        )
        for problem in problems[:10]:
            print("  " + problem)
    finally:
        for worker in workers:
            os.killpg(worker.pid, signal.SIGTERM)
        for worker in workers:
            try:
                worker.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
        server.stop()
        from django.db import connections

        connections.close_all()
        for cleanup in cleanups:
            cleanup()


if __name__ == "__main__":
    main()
