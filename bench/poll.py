"""Throughput of the sidebar's poll (GET sessions/{id}) against a bare authenticated DRF view.

Starts gunicorn (2 sync workers, DEBUG off) on the demo site with a fixed SQLite file, seeds a
heavy session (400 events, 300 trace rows, artifacts, goals, pending messages) and a small one,
and drives each endpoint with wrk (16 connections) in interleaved rounds; the baseline is
``bench/bare`` (same server, same session authentication) measured in the same rounds. Prints
requests/s, the ratio to the baseline, p50/p99 latency, and (measured in-process) the SQL
queries and bytes of each response, with the load average.

Endpoints: the 200 path with the payload cache (what every poll after the first of a version
gets), the 200 path with the payload cache missing every time ("no cache": every poll builds
the payload, as the first poll after a change does; the rest of the cache, the permission
answers included, works as usual: ``bench/caches.py``), and the 304 path (If-None-Match).

Targets (issue "Plain Django"), on the 400-event session: 304 >= 0.85x, cached 200 >= 0.8x,
first 200 after a change (no cache) >= 0.5x.

Usage: .venv/bin/python bench/poll.py [--seconds 4] [--rounds 4]
Needs wrk (Debian: apt-get install wrk) and gunicorn (pip install gunicorn).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def seed() -> tuple[str, dict[str, str]]:
    """Create the user, a logged-in Django session, and the sessions to poll."""
    from django.contrib.auth import (
        BACKEND_SESSION_KEY,
        HASH_SESSION_KEY,
        SESSION_KEY,
        get_user_model,
    )
    from django.contrib.auth.models import Permission
    from django.contrib.sessions.backends.db import SessionStore

    from artifacts_app import store
    from sessions_app import services

    user = get_user_model().objects.create_user("bench", password="bench")
    user.user_permissions.add(Permission.objects.get(codename="use_agent"))
    login = SessionStore()
    login[SESSION_KEY] = str(user.pk)
    login[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    login[HASH_SESSION_KEY] = user.get_session_auth_hash()
    login.save()

    small = services.session_create(owner=user, title="Small chat")
    services.events_append(
        session_id=small.pk,
        items=[
            {"kind": "user_message", "content": "Hello"},
            {"kind": "agent_message", "content": "Hi, how can I help?"},
        ],
    )
    heavy = services.session_create(owner=user, title="Heavy chat")
    items = []
    for i in range(100):
        call = f"toolu_{i}"
        items += [
            {"kind": "user_message", "content": f"Question {i} " * 10},
            {
                "kind": "tool_call",
                "content": "{}",
                "payload": {"tool": "echo", "input": {"text": str(i)}},
                "tool_use_id": call,
            },
            {
                "kind": "tool_response",
                "content": "result " * 40,
                "payload": {"tool": "echo", "ok": True},
                "tool_use_id": call,
            },
            {"kind": "agent_message", "content": f"Answer {i} " * 30},
        ]
    services.events_append(session_id=heavy.pk, items=items)
    for i in range(300):
        services.trace_record(session_id=heavy.pk, type="step", summary=f"trace {i}")
    for i in range(5):
        store.stage(
            session_id=heavy.pk,
            key=f"draft-{i}",
            kind="markdown",
            payload={"content": f"# Draft {i}\n\n" + "text " * 200},
            title=f"Draft {i}",
        )
    for i in range(10):
        services.goal_create(session_id=heavy.pk, description=f"Goal {i}")
    for i in range(10):
        services.pending_message_add(session_id=heavy.pk, content=f"Later {i}")
    return login.session_key, {"small": str(small.pk), "heavy": str(heavy.pk)}


def measure_in_process(session_key: str, path: str, etag: bool) -> tuple[int, int, str]:
    """Queries and bytes of one request, and the ETag (Django's test client, same settings)."""
    from django.conf import settings
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client()
    client.cookies[settings.SESSION_COOKIE_NAME] = session_key
    tag = client.get(path)["ETag"] if etag else None
    headers = {"HTTP_IF_NONE_MATCH": tag} if tag else {}
    with CaptureQueriesContext(connection) as queries:
        response = client.get(path, **headers)
    return len(queries), len(response.content), response.get("ETag", "")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_gunicorn(env: dict[str, str], port: int) -> subprocess.Popen:
    server = subprocess.Popen(
        [
            str(ROOT / ".venv/bin/gunicorn"),
            "ahentic_site.wsgi:application",
            "--workers",
            "2",
            "--bind",
            f"127.0.0.1:{port}",
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
    )
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return server
        except OSError:
            time.sleep(0.1)
    server.kill()
    raise SystemExit("gunicorn did not start")


def wrk(url: str, cookie: str, seconds: int, etag: str | None) -> tuple[float, float, float]:
    """Requests/s, p50 and p99 latency (ms) from one wrk run with 16 connections."""
    command = ["wrk", "-t2", "-c16", f"-d{seconds}s", "--latency", "-H", f"Cookie: {cookie}"]
    if etag:
        command += ["-H", f"If-None-Match: {etag}"]
    out = subprocess.run([*command, url], capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))

    def latency(percent: str) -> float:
        value, unit = re.search(rf"\s{percent}%\s+([\d.]+)(us|ms|s)", out).groups()
        return float(value) * {"us": 0.001, "ms": 1, "s": 1000}[unit]

    return rps, latency("50"), latency("99")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    if not shutil.which("wrk"):
        raise SystemExit("wrk is missing: apt-get install wrk")
    if not (ROOT / ".venv/bin/gunicorn").exists():
        raise SystemExit("gunicorn is missing: .venv/bin/pip install gunicorn")

    db = os.path.join(tempfile.mkdtemp(prefix="ahentic-poll-"), "poll.sqlite3")
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "bench.settings",
        "AHENTIC_BENCH_DB": db,
        "PYTHONPATH": str(ROOT),
    }
    os.environ.update(env)
    sys.path.insert(0, str(ROOT))
    import django
    from django.core.management import call_command

    django.setup()
    print("Seeding the database...", flush=True)
    call_command("migrate", verbosity=0)
    session_key, ids = seed()
    cookie = f"sessionid={session_key}"

    endpoints = {
        "bare DRF view": ("/bench/bare", False),
        "poll 200, small session": (f"/ahentic/v1/sessions/{ids['small']}", False),
        "poll 200, 400-event session": (f"/ahentic/v1/sessions/{ids['heavy']}", False),
        "poll 304": (f"/ahentic/v1/sessions/{ids['heavy']}", True),
    }
    facts = {name: measure_in_process(session_key, p, e) for name, (p, e) in endpoints.items()}

    results: dict[str, list[tuple[float, float, float]]] = {}
    for cache in ("on", "off"):
        port = free_port()
        server_env = {**env, "AHENTIC_BENCH_NO_CACHE": "1" if cache == "off" else "0"}
        server = start_gunicorn(server_env, port)
        try:
            for round_number in range(args.rounds):
                for name, (path, with_etag) in endpoints.items():
                    if cache == "off" and name == "poll 304":
                        continue
                    print(f"  cache {cache}, round {round_number + 1}: {name}...", flush=True)
                    label = (
                        name if cache == "on" or name == "bare DRF view" else f"{name}, no cache"
                    )
                    label = f"{label} [cache {cache}]" if name == "bare DRF view" else label
                    etag = facts[name][2] if with_etag else None
                    results.setdefault(label, []).append(
                        wrk(f"http://127.0.0.1:{port}{path}", cookie, args.seconds, etag)
                    )
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=10)

    print(f"\nload average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(
        f"{'endpoint':40} {'req/s':>8} {'ratio':>6} {'p50 ms':>7} {'p99 ms':>7} {'SQL':>4} {'bytes':>7}"
    )
    for label, runs in results.items():
        cache = "off" if "no cache" in label or "[cache off]" in label else "on"
        base = statistics.median(r[0] for r in results[f"bare DRF view [cache {cache}]"])
        rps = statistics.median(r[0] for r in runs)
        p50 = statistics.median(r[1] for r in runs)
        p99 = statistics.median(r[2] for r in runs)
        name = (
            label.replace(", no cache", "").replace(" [cache on]", "").replace(" [cache off]", "")
        )
        queries, size, _ = facts[name]
        print(
            f"{label:40} {rps:>8.0f} {rps / base:>5.2f}x {p50:>7.1f} {p99:>7.1f} {queries:>4} {size:>7}"
        )


if __name__ == "__main__":
    main()
