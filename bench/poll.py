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

Baseline (``--baseline-tree DIR``, a release unpacked with ``git archive``): the release's app
is seeded in its own database and served by its own gunicorn (this checkout's ``bench``
settings and bare view), next to this code's; each round drives both servers in turn, the
order alternating, and the ratios to the bare view (each server's own) are printed side by
side.

Usage: .venv/bin/python bench/poll.py [--seconds 4] [--rounds 4] [--baseline-tree DIR]
Needs wrk (Debian: apt-get install wrk) and gunicorn (pip install gunicorn).
"""

from __future__ import annotations

import argparse
import json
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

from _setup import loadavg

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


GUNICORN = Path(sys.executable).parent / "gunicorn"


def tree_env(tree: Path | None, db: str) -> tuple[dict[str, str], Path]:
    """The environment and working directory of a process serving ``tree`` (None: this
    checkout) with the bench's settings: this checkout's ``bench`` package (through a
    directory holding only a link to it) before the tree's apps."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "bench.settings", "AHENTIC_BENCH_DB": db}
    if tree is None:
        return {**env, "PYTHONPATH": str(ROOT), "AHENTIC_BENCH_TREE": ""}, ROOT
    shim = Path(tempfile.mkdtemp(prefix="ahentic-bench-shim-"))
    (shim / "bench").symlink_to(ROOT / "bench")
    return {**env, "PYTHONPATH": f"{shim}{os.pathsep}{tree}", "AHENTIC_BENCH_TREE": str(tree)}, shim


def start_gunicorn(env: dict[str, str], port: int, cwd: Path = ROOT) -> subprocess.Popen:
    server = subprocess.Popen(
        [
            str(GUNICORN),
            "ahentic_site.wsgi:application",
            "--workers",
            "2",
            "--bind",
            f"127.0.0.1:{port}",
            "--log-level",
            "warning",
        ],
        cwd=cwd,
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


def warm_up(port: int, cookie: str) -> None:
    """Wait until both workers answer (they load the app after the port is bound): a burst of
    requests to the bare view, until 20 in a row succeed."""
    import urllib.request

    request = urllib.request.Request(f"http://127.0.0.1:{port}/bench/bare")
    request.add_header("Cookie", cookie)
    ok = 0
    for _ in range(600):
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                ok = ok + 1 if response.status == 200 else 0
        except OSError:
            ok = 0
            time.sleep(0.1)
        if ok >= 20:
            return
    raise SystemExit("the server did not answer")


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


def endpoints_of(ids: dict[str, str]) -> dict[str, tuple[str, bool]]:
    return {
        "bare DRF view": ("/bench/bare", False),
        "poll 200, small session": (f"/ahentic/v1/sessions/{ids['small']}", False),
        "poll 200, 400-event session": (f"/ahentic/v1/sessions/{ids['heavy']}", False),
        "poll 304": (f"/ahentic/v1/sessions/{ids['heavy']}", True),
    }


def prepare() -> dict:
    """Migrate and seed the database ``AHENTIC_BENCH_DB`` with the app of this process's tree;
    the login, the sessions and each endpoint's queries, bytes and ETag."""
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    session_key, ids = seed()
    facts = {
        name: measure_in_process(session_key, path, etag)
        for name, (path, etag) in endpoints_of(ids).items()
    }
    return {"session_key": session_key, "ids": ids, "facts": facts}


def prepared(tree: Path | None) -> tuple[dict, dict[str, str], Path]:
    """A database seeded by ``tree``'s app (in a subprocess importing it)."""
    db = os.path.join(tempfile.mkdtemp(prefix="ahentic-poll-"), "poll.sqlite3")
    env, cwd = tree_env(tree, db)
    out = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--prepare"],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
    )
    if out.returncode:
        raise SystemExit(f"seeding {tree or 'this code'} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1]), env, cwd


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--baseline-tree", help="a release's source tree to serve alternately")
    parser.add_argument("--prepare", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.prepare:
        print(json.dumps(prepare()))
        return
    if not shutil.which("wrk"):
        raise SystemExit("wrk is missing: apt-get install wrk")
    if not GUNICORN.exists():
        raise SystemExit(f"gunicorn is missing: {sys.executable} -m pip install gunicorn")

    trees: dict[str, Path | None] = {"this": None}
    if args.baseline_tree:
        trees["baseline"] = Path(args.baseline_tree).resolve()
    print("Seeding the database(s)...", flush=True)
    seeded = {name: prepared(tree) for name, tree in trees.items()}

    # results[tree][label]: one (req/s, p50, p99) per round.
    results: dict[str, dict[str, list[tuple[float, float, float]]]] = {n: {} for n in trees}
    loads = []
    for cache in ("on", "off"):
        servers = {}
        try:
            for name in trees:
                facts, env, cwd = seeded[name]
                port = free_port()
                server_env = {**env, "AHENTIC_BENCH_NO_CACHE": "1" if cache == "off" else "0"}
                servers[name] = (start_gunicorn(server_env, port, cwd), port)
                warm_up(port, f"sessionid={facts['session_key']}")
            for round_number in range(args.rounds):
                order = list(trees)
                if round_number % 2:
                    order.reverse()
                loads.append(loadavg())
                for name in order:
                    facts = seeded[name][0]
                    cookie = f"sessionid={facts['session_key']}"
                    port = servers[name][1]
                    for endpoint, (path, with_etag) in endpoints_of(facts["ids"]).items():
                        if cache == "off" and endpoint == "poll 304":
                            continue
                        print(
                            f"  {name}, cache {cache}, round {round_number + 1}: {endpoint}...",
                            flush=True,
                        )
                        label = f"{endpoint} [cache {cache}]"
                        etag = facts["facts"][endpoint][2] if with_etag else None
                        results[name].setdefault(label, []).append(
                            wrk(f"http://127.0.0.1:{port}{path}", cookie, args.seconds, etag)
                        )
        finally:
            for server, _port in servers.values():
                server.send_signal(signal.SIGQUIT)  # gunicorn's quick shutdown
                try:
                    server.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    server.kill()
                    server.wait()

    print(f"\nload average per round: {'; '.join(loads)}; now {loadavg()}")
    ratios: dict[str, dict[str, list[float]]] = {}
    for name in trees:
        print(f"\n{name} ({trees[name] or ROOT})")
        print(
            f"{'endpoint':40} {'req/s':>8} {'ratio':>6} {'p50 ms':>7} {'p99 ms':>7} {'SQL':>4}"
            f" {'bytes':>7}"
        )
        for label, runs in results[name].items():
            cache = "off" if "[cache off]" in label else "on"
            bare = results[name][f"bare DRF view [cache {cache}]"]
            # Each round's rate against the bare view's of the same round and server.
            per_round = [r[0] / b[0] for r, b in zip(runs, bare, strict=True) if b[0]]
            ratios.setdefault(name, {})[label] = per_round
            rps = statistics.median(r[0] for r in runs)
            p50 = statistics.median(r[1] for r in runs)
            p99 = statistics.median(r[2] for r in runs)
            endpoint = label.replace(" [cache on]", "").replace(" [cache off]", "")
            queries, size, _ = seeded[name][0]["facts"][endpoint]
            shown = label.replace(" [cache on]", "").replace(" [cache off]", ", no cache")
            print(
                f"{shown:40} {rps:>8.0f} {statistics.median(per_round or [0]):>5.2f}x {p50:>7.1f}"
                f" {p99:>7.1f} {queries:>4} {size:>7}"
            )
    if "baseline" in trees:
        print("\nratio to the bare view, this code / baseline (median of the rounds)")
        for label, mine in ratios["this"].items():
            if label.startswith("bare"):
                continue
            theirs = ratios["baseline"].get(label)
            if theirs:
                print(
                    f"{label:40} {statistics.median(mine):>5.2f}x / "
                    f"{statistics.median(theirs):>5.2f}x"
                )


if __name__ == "__main__":
    main()
