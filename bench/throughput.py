"""Steps per second through real qcluster workers: 50 sessions x 5 steps, with integrity checks.

Starts N ``qcluster`` processes (``python -m django qcluster``; stand-ins for N hosts; one django-q2 worker each)
on SQLite with the ORM broker, or on PostgreSQL (``--postgres``: a private server started here,
as the CI's PostgreSQL leg does) with the ORM or the Redis broker (``--redis``: a private
redis-server). The model is the local Messages API server: each run makes four tool calls then
replies, so every session takes five steps. Prints steps/s with the load average, then checks
that no event was lost or written twice and no tool call was left unanswered. A warm-up of
two runs per worker comes first, untimed (imports, the SDK client, the first queries).

CPU per step: the user and system CPU seconds of every process of the qclusters (each one's
process group: the qcluster command, its sentinel, the workers, the monitor and the pusher, from
``/proc/<pid>/stat``, a reaped child's time counted in its parent's) over the timed steps,
divided by the steps. That is the whole cost of a step to the hosts running the workers: the
step itself, the broker polling the ORM queue, task pickling and signing, result saving, the
heartbeat and the sentinel's guard loop. Also printed: each role's share, the tasks' own
(the worker thread from django-q2's ``pre_execute`` to ``post_execute_in_worker``, written by
``bench.apps.TaskTimesConfig``), and the clusters' CPU per second of wall clock once the queue
is empty (``--idle`` seconds: their polling). ``BENCH_PROFILE_DIR=DIR`` profiles the tasks in
the workers (cProfile on the worker thread's CPU time, ``DIR/<pid>.prof`` for ``pstats``).

Targets: >= 40 steps/s with 2 workers on PostgreSQL (issue "Fast at any size"); qcluster CPU
per step within 1.2x of f75ed4b's (issue 38, with ``--baseline-tree``).

Baseline (``--baseline-tree DIR``): a release unpacked beside this checkout, e.g.
``git archive f75ed4b | tar -x -C /tmp/f75``. Each round then runs the whole measurement twice,
each in a subprocess whose driver and qclusters import the app from one tree (this checkout's
``bench`` settings on top of the tree's demo settings, as ``bench/poll.py`` does), the order
alternating from round to round, and prints both trees' figures with the median of the rounds'
ratios (this code / baseline) and the load average of every round.

Usage: .venv/bin/python bench/throughput.py [--sessions 50] [--workers 2] [--postgres] [--redis]
    [--baseline-tree DIR --rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _setup import alternate, in_tree, loadavg, spread, tree

ROOT = Path(__file__).resolve().parent.parent
TOOL_CALLS_PER_RUN = 4
# The release the baseline is measured from filed the run control at the top of the app.
_RUNS = ("orchestrator_app.control.runs", "orchestrator_app.runs")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


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


def process_times(groups: list[int]) -> dict[int, tuple[int, int, int, float]]:
    """``{pid: (process group, parent pid, start tick, CPU s)}`` of every live process in the
    process ``groups`` (one per qcluster, ``start_new_session``); the CPU of a process is its
    user and system time plus that of its reaped children (``/proc/<pid>/stat``)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # gone meanwhile
            continue
        # Fields after "pid (comm)": state ppid pgrp ... utime(14) stime cutime cstime ...
        fields = stat[stat.rindex(")") + 2 :].split()
        group = int(fields[2])
        if group in groups:
            ticks = sum(int(value) for value in fields[11:15])
            found[int(entry.name)] = (group, int(fields[1]), int(fields[19]), ticks / CLOCK_TICKS)
    return found


def roles(times: dict[int, tuple[int, int, int, float]]) -> dict[int, str]:
    """The django-q2 role of each process: the ``qcluster`` command (its group's leader), its
    ``sentinel`` (the guard loop: status saves, the schedule tick), and the sentinel's
    children in the order it starts them (``Sentinel.spawn_cluster``: the workers, then the
    monitor, then the pusher); anything else (a replacement worker, a helper) is ``other``."""
    named = {}
    workers = {}
    for pid, (group, parent, _, _) in times.items():
        if pid == group:
            named[pid] = "qcluster"
        elif parent == group:
            named[pid] = "sentinel"
    for sentinel in [pid for pid, role in named.items() if role == "sentinel"]:
        children = sorted(
            (start, pid) for pid, (_, parent, start, _) in times.items() if parent == sentinel
        )
        count = workers.setdefault(sentinel, len(children) - 2)
        for index, (_, pid) in enumerate(children):
            if index < count:
                named[pid] = "worker"
            elif index == count:
                named[pid] = "monitor"
            elif index == count + 1:
                named[pid] = "pusher"
    return {pid: named.get(pid, "other") for pid in times}


def cpu_between(before: dict, after: dict) -> dict[str, float]:
    """CPU seconds spent between two ``process_times`` snapshots, by role and ``total``. A
    process that ended meanwhile was reaped by its parent, whose children's time now holds
    all of it: its earlier part is taken off."""
    spent: dict[str, float] = {}
    for pid, role in roles(after).items():
        earlier = before.get(pid)
        started_later = earlier is None or earlier[2] != after[pid][2]
        spent[role] = spent.get(role, 0.0) + after[pid][3] - (0 if started_later else earlier[3])
    for pid, earlier in before.items():
        if pid not in after or after[pid][2] != earlier[2]:
            spent["total_ended"] = spent.get("total_ended", 0.0) - earlier[3]
    spent["total"] = sum(spent.values())
    spent.pop("total_ended", None)
    return spent


def task_seconds(directory: str) -> float:
    """The CPU seconds the worker processes spent in their tasks so far (the worker thread's,
    written by ``bench.apps.TaskTimesConfig``)."""
    return sum(
        float(path.read_text().split()[0])
        for path in Path(directory).iterdir()
        if path.suffix != ".new"
    )


def tree_env(source: Path | None) -> tuple[dict[str, str], Path]:
    """The environment and working directory of the processes importing ``source`` (None:
    this checkout), with this checkout's ``bench`` package (through a directory holding only a
    link to it) before the tree's apps."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "bench.settings_throughput"}
    if source is None:
        return {**env, "PYTHONPATH": str(ROOT), "AHENTIC_BENCH_TREE": ""}, ROOT
    shim = Path(tempfile.mkdtemp(prefix="ahentic-bench-shim-"))
    (shim / "bench").symlink_to(ROOT / "bench")
    env["PYTHONPATH"] = f"{shim}{os.pathsep}{source}"
    return {**env, "AHENTIC_BENCH_TREE": str(source)}, shim


def measure(args, say=print) -> dict:
    """One measurement with the app of this process's tree (``AHENTIC_BENCH_TREE``); the
    figures as plain data. ``say``: where the progress goes."""
    cleanups = []
    env, cwd = tree_env(None if tree() == ROOT else tree())
    env["BENCH_DB"] = os.path.join(tempfile.mkdtemp(prefix="ahentic-bench-"), "bench.sqlite3")
    env["BENCH_TASK_TIMES_DIR"] = task_times = tempfile.mkdtemp(prefix="ahentic-bench-tasks-")
    if args.postgres:
        port, stop = start_postgres()
        env["BENCH_PGPORT"] = port
        cleanups.append(stop)
    if args.redis:
        url, stop = start_redis()
        env["BENCH_REDIS_URL"] = url
        cleanups.append(stop)
    os.environ.update(env)
    for entry in reversed(env["PYTHONPATH"].split(os.pathsep)):
        sys.path.insert(0, entry)
    import importlib

    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from orchestrator_app.testing.localapi import LocalMessagesServer
    from sessions_app import services
    from sessions_app.models import Event, Session

    runs = importlib.import_module(in_tree(_RUNS))
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
        say(
            f"{args.sessions} sessions x {TOOL_CALLS_PER_RUN + 1} steps, {args.workers}"
            f" qcluster(s), {backend}, app from {tree()}"
        )
        logs = []
        for _ in range(args.workers):
            log = tempfile.NamedTemporaryFile(prefix="ahentic-bench-qcluster-", delete=False)
            logs.append(Path(log.name))
            workers.append(
                subprocess.Popen(
                    # ``-m django``: the working directory (not a tree's manage.py folder)
                    # comes first on the path, so both trees read this checkout's settings.
                    [sys.executable, "-m", "django", "qcluster"],
                    cwd=cwd,
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
        groups = [worker.pid for worker in workers]
        load = loadavg()
        cpu_before, tasks_before = process_times(groups), task_seconds(task_times)
        started = time.perf_counter()
        run_all(runs, Session, sessions, "sessions")
        elapsed = time.perf_counter() - started
        cpu = cpu_between(cpu_before, process_times(groups))
        in_tasks = task_seconds(task_times) - tasks_before
        # The clusters with nothing to do: what polling the queue costs per second.
        idle_before = process_times(groups)
        idle_started = time.perf_counter()
        time.sleep(args.idle)
        idle = cpu_between(idle_before, process_times(groups))
        idle_s = time.perf_counter() - idle_started
        expected_steps = args.sessions * (TOOL_CALLS_PER_RUN + 1)

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
        return {
            "steps": expected_steps,
            "elapsed": elapsed,
            "steps_per_s": expected_steps / elapsed,
            "cpu_ms_per_step": cpu["total"] * 1000 / expected_steps,
            "task_cpu_ms_per_step": in_tasks * 1000 / expected_steps,
            "cpu_ms_by_role": {
                role: spent * 1000 / expected_steps
                for role, spent in sorted(cpu.items())
                if role != "total"
            },
            "idle_cpu_ms_per_s": idle["total"] * 1000 / idle_s,
            "idle_cpu_ms_per_s_by_role": {
                role: spent * 1000 / idle_s
                for role, spent in sorted(idle.items())
                if role != "total"
            },
            "load": [load, loadavg()],
            "problems": problems,
        }
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


def print_result(result: dict) -> None:
    print(f"load average: {' -> '.join(result['load'])}")
    print(
        f"steps/s: {result['steps_per_s']:.1f} ({result['steps']} steps in"
        f" {result['elapsed']:.1f} s)"
    )
    by_role = ", ".join(f"{role} {ms:.1f}" for role, ms in result["cpu_ms_by_role"].items())
    print(f"qcluster CPU ms per step: {result['cpu_ms_per_step']:.1f} ({by_role})")
    print(
        f"  in the tasks (the worker thread from pre_execute to post_execute_in_worker):"
        f" {result['task_cpu_ms_per_step']:.1f}; the workers' time around them:"
        f" {result['cpu_ms_by_role'].get('worker', 0.0) - result['task_cpu_ms_per_step']:.1f}"
    )
    idle_by_role = ", ".join(
        f"{role} {ms:.1f}" for role, ms in result["idle_cpu_ms_per_s_by_role"].items()
    )
    print(
        f"qcluster CPU ms per second, queue empty: {result['idle_cpu_ms_per_s']:.1f}"
        f" ({idle_by_role})"
    )
    print(
        "integrity: "
        + (
            "OK (no lost or duplicated event, every tool call answered)"
            if not result["problems"]
            else "FAIL"
        )
    )
    for problem in result["problems"][:10]:
        print("  " + problem)


def run_tree(source: str | None, args) -> dict:
    """One measurement in a subprocess importing the app from ``source`` (None: this
    checkout)."""
    env = {**os.environ, "AHENTIC_BENCH_TREE": source or ""}
    command = [sys.executable, os.path.abspath(__file__), "--worker"]
    command += ["--sessions", str(args.sessions), "--workers", str(args.workers)]
    command += ["--idle", str(args.idle)]
    command += ["--postgres"] * args.postgres + ["--redis"] * args.redis
    out = subprocess.run(command, env=env, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"the measurement of {source or 'this code'} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def compare(args) -> None:
    """Alternating rounds of this code and the baseline tree, then both and their ratios."""
    baseline = os.path.abspath(args.baseline_tree)

    def shown(number: int, name: str, result: dict) -> None:
        print(f"-- round {number}, {name}")
        print_result(result)

    rounds = alternate(args.rounds, baseline, lambda source: run_tree(source, args), shown)
    print(f"\nthis code vs {baseline}, {args.rounds} alternating rounds (median (min-max))")
    print(f"{'figure':34} {'this':>20} {'baseline':>20} {'this/baseline':>22}")
    figures = [
        ("qcluster CPU ms per step", lambda r: r["cpu_ms_per_step"]),
        ("  in the tasks", lambda r: r["task_cpu_ms_per_step"]),
        (
            "  workers around the tasks",
            lambda r: r["cpu_ms_by_role"].get("worker", 0.0) - r["task_cpu_ms_per_step"],
        ),
        ("steps/s", lambda r: r["steps_per_s"]),
        ("idle qcluster CPU ms per s", lambda r: r["idle_cpu_ms_per_s"]),
    ]
    for role in rounds[0]["this"]["cpu_ms_by_role"]:
        figures.append(
            (f"  of which {role}", lambda r, role=role: r["cpu_ms_by_role"].get(role, 0.0))
        )
    for role in rounds[0]["this"]["idle_cpu_ms_per_s_by_role"]:
        figures.append(
            (
                f"  idle, of which {role}",
                lambda r, role=role: r["idle_cpu_ms_per_s_by_role"].get(role, 0.0),
            )
        )
    for name, figure in figures:
        this = [figure(r["this"]) for r in rounds]
        base = [figure(r["baseline"]) for r in rounds]
        ratio = "-"  # a figure under one clock tick in some round has no ratio
        if all(base):
            ratio = spread([a / b for a, b in zip(this, base, strict=True)], "x")
        print(f"{name:34} {spread(this):>20} {spread(base):>20} {ratio:>22}")
    print(
        "load average per round (this / baseline, at their start): "
        + "; ".join(f"{r['this']['load'][0]} / {r['baseline']['load'][0]}" for r in rounds)
    )
    failed = [
        f"round {number + 1}, {name}"
        for number, r in enumerate(rounds)
        for name in ("this", "baseline")
        if r[name]["problems"]
    ]
    print("integrity: " + ("OK in every round" if not failed else "FAIL in " + ", ".join(failed)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--postgres", action="store_true")
    parser.add_argument("--redis", action="store_true")
    parser.add_argument("--idle", type=float, default=3.0, help="seconds of empty queue to measure")
    parser.add_argument("--baseline-tree", help="a release's source tree to measure alternately")
    parser.add_argument("--rounds", type=int, default=3, help="rounds with --baseline-tree")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.baseline_tree:
        compare(args)
        return
    if args.worker:
        result = measure(args, say=lambda text: print(text, file=sys.stderr))
        print(json.dumps(result))
        return
    print_result(measure(args))


if __name__ == "__main__":
    main()
