"""Orchestrator overhead of one step, the model excluded, as a session's history grows.

Seeds sessions with 40, 400 and 4000 events (user turns, replies, tool call/result pairs of a
realistic size), then runs tool-using steps through the real step loop (synchronous worker)
against the local Messages API server, one step of each session in turn. For each size it
prints the median CPU milliseconds per step spent outside the model call, the SQL statements
per step, the ratio to the 40-event session (the median of each round's ratio: the sizes'
steps of one round run back to back), and the whole step's CPU ("whole": the model call's own
work in the worker thread included, i.e. the SDK encoding and copying the request and parsing
the streamed reply, as the floor below counts it), with retention at its default and off.
The whole step is the figure to compare between trees: a tree that does a piece of work inside
the model call (or whose garbage collections happen to fall there) would otherwise look
cheaper than one doing it before the call.

The context budget is 20,000 tokens so a long history is windowed, as in production, where the
window (not the history) bounds a step's work.

Then, at 4,000 events with the default context budget (the window itself is large), it measures
in the same run the floor of a step: JSON-encoding the exact request body the step sent (as the
local server received it), and prints the step's own CPU (everything the worker thread does,
the SDK's work on the request included, the wait for the model not) as a ratio to that floor.

Targets (issue 38, with ``--baseline-tree`` at f75ed4b): CPU per tool step at 400 events
within 1.2x of f75ed4b's, <= 24 statements per tool step, the step at 4,000 events within 4x
of encoding its request. Earlier (issue "Plain Django: public ORM only"): CPU per tool step at
400 events on SQLite <= 25 ms, <= 30 statements per tool step; at 4,000 events with the default context budget, the
step's own CPU <= 2x the floor. The load average is printed before and after: the machine is
shared, so the ratios of one run matter, the absolute times less.

OpenTelemetry (``--otel``): ``noop`` (the default) runs with the API alone, as a site without
an SDK does: the no-op tracer and meter. ``sdk`` installs an SDK ``TracerProvider`` (every span
recorded into an in-memory exporter) and ``MeterProvider`` (an in-memory reader), as a site
that exports its traces does, without the export's network cost. The code before telemetry
existed is measured by running this script from a checkout of that commit.

Baseline (``--baseline-tree DIR``): a release unpacked beside this checkout, e.g.
``git archive f75ed4b | tar -x -C /tmp/f75``. Each round then runs the whole measurement twice,
each in a subprocess that imports the app from one tree (``AHENTIC_BENCH_TREE``), the order of
the two alternating from round to round, and prints each figure of both trees with the median of
the rounds' ratios (this code / baseline), and the load average of every round.

Usage: .venv/bin/python bench/step_overhead.py [--steps 8] [--sizes 40,400,4000]
    [--otel noop|sdk] [--baseline-tree DIR --rounds 3]
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import subprocess
import sys
import time

from _setup import alternate, django_setup, loadavg, spread
from _setup import in_tree as _in_tree

# The release the baseline is measured from filed the run control and the queue at the top of
# the app; this code files them under ``control``.
_MODULES = {"runs": ("orchestrator_app.control.runs", "orchestrator_app.runs")}
_QUEUES = ("orchestrator_app.control.queue", "orchestrator_app.queue")

BUDGET_TOKENS = 20_000


def seed(session_id, events: int) -> None:
    from sessions_app import services as session_services

    items = []
    for i in range(events // 4):
        call_id = f"toolu_seed_{i}"
        items += [
            {"kind": "user_message", "content": f"Question {i}: what about topic {i}? " * 3},
            {
                "kind": "tool_call",
                "content": '{"key": "topic"}',
                "payload": {"tool": "bench_lookup", "input": {"key": f"topic-{i}"}},
                "tool_use_id": call_id,
            },
            {
                "kind": "tool_response",
                "content": f'{{"ok": true, "value": "{"fact " * 60}"}}',
                "payload": {"tool": "bench_lookup", "ok": True},
                "tool_use_id": call_id,
            },
            {"kind": "agent_message", "content": f"Here is what I found about topic {i}. " * 4},
        ]
    for start in range(0, len(items), 500):
        session_services.events_append(session_id=session_id, items=items[start : start + 500])


def runs_module():
    """The tree's run control module (``message_post``)."""
    return importlib.import_module(_in_tree(_MODULES["runs"]))


def queue_target() -> str:
    """The dotted name of ``async_task`` as the tree's queue module imports it."""
    return f"{_in_tree(_QUEUES)}.async_task"


def settings_for(
    retention, steps: int, server_url: str, budget: int | None = BUDGET_TOKENS
) -> dict:
    """The bench's ``AHENTIC``; ``budget`` None: the default context budget."""
    values = {
        "API_KEY": "bench",
        "BASE_URL": server_url,
        "MAX_STEPS_PER_RUN": steps + 5,
        "NAME_REFRESH_INTERVAL": 0,
        "ENTRY_RETENTION": retention,
        "DAILY_TOKEN_LIMIT": 10**12,
        "SESSION_SOFT_TOKEN_BUDGET": None,
    }
    if budget is not None:
        values["CONTEXT_BUDGET_TOKENS"] = budget
    return values


def encode_floor(body: dict, repeat: int = 5) -> float:
    """CPU milliseconds to JSON-encode ``body`` once (the best of ``repeat``), as an HTTP
    client encodes a request body (compact, UTF-8)."""
    best = float("inf")
    for _ in range(repeat):
        started = time.thread_time()
        json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        best = min(best, time.thread_time() - started)
    return best * 1000


def measure_floor(size: int, steps: int) -> tuple[float, float, float, int]:
    """At ``size`` events with the default context budget: the median of the step's own CPU
    ms (the worker thread's, the model server's thread excluded), of the floor (encoding the
    request body that step sent), of their ratio per step, and the request's bytes."""
    from unittest import mock

    from django.contrib.auth import get_user_model
    from django.test import override_settings

    from orchestrator_app import tasks
    from orchestrator_app.testing.localapi import LocalMessagesServer, tool_call, tool_reply
    from sessions_app import services as session_services
    from sessions_app.models import Session

    runs, queued = runs_module(), queue_target()
    server = LocalMessagesServer().start()
    try:
        user, _ = get_user_model().objects.get_or_create(username="bench-floor")
        with override_settings(AHENTIC=settings_for(400, steps, server.url, budget=None)):
            session = session_services.session_create(owner=user)
            print(f"  seeding {size} events, default budget...", end="\r", flush=True)
            seed(session.pk, size)
            with mock.patch(queued):
                runs.message_post(session=session, content="Look up the new topics.")
            for i in range(steps + 1):
                server.enqueue(tool_reply(tool_call("bench_lookup", {"key": f"floor-{i}"})))
            step_ms, floor_ms, ratios, sizes = [], [], [], []
            dropped = mock.patch(queued, lambda *a, **k: None)
            for round_number in range(steps + 1):
                run_seq = Session.objects.values_list("run_seq", flat=True).get(pk=session.pk)
                with dropped:
                    started = time.thread_time()
                    tasks.run_step(str(session.pk), run_seq)
                    elapsed = (time.thread_time() - started) * 1000
                body = server.message_requests()[-1]
                floor = encode_floor(body)
                if round_number:  # the run's first step is not measured (as above)
                    step_ms.append(elapsed)
                    floor_ms.append(floor)
                    ratios.append(elapsed / floor)
                    sizes.append(len(json.dumps(body, ensure_ascii=False).encode("utf-8")))
        return (
            statistics.median(step_ms),
            statistics.median(floor_ms),
            statistics.median(ratios),
            int(statistics.median(sizes)),
        )
    finally:
        server.stop()


def measure(
    retention, sizes: list[int], steps: int
) -> dict[int, tuple[float, float, float, float]]:
    """``{events: (median ms per step, median statements per step, median ratio, median ms per
    step with the model call's own CPU)}`` with ``retention``. The ratio is each round's step against the first size's step of the same
    round (their median), so a slow stretch of the machine cancels out.

    Every size has its own session; the steps of the sessions alternate (one step of each in
    turn, in a rotating order), so a burst of load on this noisy machine hits every size
    alike instead of one whole size. The CPU time is this thread's (``time.thread_time``:
    the local model server's thread is not counted), less the model call's own; the whole
    step's CPU is kept beside it."""
    from unittest import mock

    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import override_settings

    from orchestrator_app import llm, tasks
    from orchestrator_app.testing.localapi import LocalMessagesServer, tool_call, tool_reply
    from sessions_app import services as session_services
    from sessions_app.models import Session

    runs, queued = runs_module(), queue_target()
    server = LocalMessagesServer().start()
    model_s = [0.0]
    original = llm.call_model

    def timed_call(**kwargs):
        started = time.thread_time()
        try:
            return original(**kwargs)
        finally:
            model_s[0] += time.thread_time() - started

    statements = [0]

    def not_enqueued(*args, **kwargs):
        return None

    def count(execute, sql, params, many, context):
        statements[0] += 1
        return execute(sql, params, many, context)

    llm.call_model = timed_call
    try:
        user, _ = get_user_model().objects.get_or_create(username="bench")
        with override_settings(AHENTIC=settings_for(retention, steps, server.url)):
            sessions = {}
            for size in sizes:
                print(f"  seeding {size} events, retention {retention}...", end="\r", flush=True)
                session = session_services.session_create(owner=user)
                seed(session.pk, size)
                with mock.patch(queued):
                    runs.message_post(session=session, content="Look up the new topics.")
                sessions[size] = session.pk
            # Every step is a tool step: one reply per step of every session.
            for i in range((steps + 1) * len(sizes)):
                server.enqueue(tool_reply(tool_call("bench_lookup", {"key": f"new-{i}"})))
            samples: dict[int, list[tuple[float, int]]] = {size: [] for size in sizes}
            # The queue is not measured: the next step's task is dropped (by a plain function:
            # a recording mock costs more than a small query).
            dropped = mock.patch(queued, not_enqueued)
            for round_number in range(steps + 1):
                print(f"  round {round_number + 1} of {steps + 1}...        ", end="\r", flush=True)
                shift = round_number % len(sizes)
                for size in sizes[shift:] + sizes[:shift]:
                    session = Session.objects.get(pk=sessions[size])
                    model_s[0], statements[0] = 0.0, 0
                    with dropped, connection.execute_wrapper(count):
                        started = time.thread_time()
                        tasks.run_step(str(session.pk), session.run_seq)
                        whole = time.thread_time() - started
                    if round_number:  # a run's first step (it may move the window) is not measured
                        samples[size].append(
                            ((whole - model_s[0]) * 1000, statements[0], whole * 1000)
                        )
        base = samples[sizes[0]]
        return {
            size: (
                statistics.median(ms for ms, _, _ in values),
                statistics.median(sql for _, sql, _ in values),
                # Each round's step against the smallest session's step of the same round.
                statistics.median(ms / b[0] for (ms, _, _), b in zip(values, base, strict=True)),
                statistics.median(whole for _, _, whole in values),
            )
            for size, values in samples.items()
        }
    finally:
        llm.call_model = original
        server.stop()


def install_otel_sdk() -> None:
    """The global OpenTelemetry SDK providers, recording everything in memory."""
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))


def run_all(sizes: list[int], steps: int) -> dict:
    """Every figure of one tree, as plain data (the worker's answer to ``--baseline-tree``)."""
    from orchestrator_app.tools import tool

    @tool(
        name="bench_lookup",
        description="Look up a fact by key.",
        input_schema={"type": "object", "properties": {"key": {"type": "string"}}},
        readonly=True,
    )
    def bench_lookup(ctx, input):
        return {"ok": True, "key": input.get("key"), "value": "fact " * 60}

    load_before = loadavg()
    steps_by_retention = {
        ("default" if retention else "off"): {
            str(size): figures for size, figures in measure(retention, sizes, steps).items()
        }
        for retention in (400, None)
    }
    step_ms, floor_ms, ratio, body_bytes = measure_floor(max(sizes), steps)
    return {
        "steps": steps_by_retention,
        "floor": {"step_ms": step_ms, "floor_ms": floor_ms, "ratio": ratio, "bytes": body_bytes},
        "load": [load_before, loadavg()],
    }


def print_tree(result: dict, sizes: list[int]) -> None:
    print(
        f"{'retention':>10} {'events':>7} {'ms/step':>8} {'SQL/step':>9} {'vs 40':>6}"
        f" {'whole':>6}" + " " * 14
    )
    for label, measured in result["steps"].items():
        for size in sizes:
            ms, sql, ratio, whole = measured[str(size)]
            print(f"{label:>10} {size:>7} {ms:>8.1f} {sql:>9.0f} {ratio:>5.2f}x {whole:>6.1f}")
    floor = result["floor"]
    print(
        f"{max(sizes)} events, default budget: step {floor['step_ms']:.1f} ms CPU, floor (encoding"
        f" its {floor['bytes'] / 1000:.0f} kB request) {floor['floor_ms']:.1f} ms, step/floor"
        f" {floor['ratio']:.2f}x" + " " * 10
    )


def run_tree(tree: str | None, args) -> dict:
    """One measurement in a subprocess importing the app from ``tree`` (None: this checkout)."""
    env = {**os.environ, "AHENTIC_BENCH_TREE": tree or ""}
    command = [sys.executable, os.path.abspath(__file__), "--worker"]
    command += ["--steps", str(args.steps), "--sizes", args.sizes, "--otel", args.otel]
    out = subprocess.run(command, env=env, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"the measurement of {tree or 'this code'} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def compare(args, sizes: list[int]) -> None:
    """Alternating rounds of this code and the baseline tree, then both and their ratios."""
    baseline = os.path.abspath(args.baseline_tree)

    def shown(number: int, name: str, result: dict) -> None:
        print(f"-- round {number}, {name}, load {' -> '.join(result['load'])}")
        print_tree(result, sizes)

    rounds = alternate(args.rounds, baseline, lambda source: run_tree(source, args), shown)

    print(f"\nthis code vs {baseline}, {args.rounds} alternating rounds (median (min-max))")
    print(f"{'figure':34} {'this':>22} {'baseline':>22} {'this/baseline':>24}")

    def row(name: str, this: list[float], base: list[float], ratio: bool = True) -> None:
        ratios = spread([a / b for a, b in zip(this, base, strict=True)], "x") if ratio else ""
        print(f"{name:34} {spread(this):>22} {spread(base):>22} {ratios:>24}".rstrip())

    # The figures of ``measure``'s tuples: (its index, the row's name, whether it has a ratio).
    step_figures = ((0, "ms/step", True), (3, "whole ms/step", True), (1, "SQL/step", False))
    for label in ("default", "off"):
        for index, figure, ratio in step_figures:
            for size in sizes:
                this = [r["this"]["steps"][label][str(size)][index] for r in rounds]
                base = [r["baseline"]["steps"][label][str(size)][index] for r in rounds]
                row(f"{figure}, retention {label}, {size}", this, base, ratio)
    for key, name in (("step_ms", "step ms, default budget"), ("ratio", "step/floor")):
        this = [r["this"]["floor"][key] for r in rounds]
        base = [r["baseline"]["floor"][key] for r in rounds]
        row(f"{name}, {max(sizes)}", this, base)
    print(
        "load average per round: "
        + "; ".join(f"{r['this']['load'][0]} / {r['baseline']['load'][0]}" for r in rounds)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--sizes", default="40,400,4000")
    parser.add_argument("--otel", choices=("noop", "sdk"), default="noop")
    parser.add_argument("--baseline-tree", help="a release's source tree to measure alternately")
    parser.add_argument("--rounds", type=int, default=3, help="rounds with --baseline-tree")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.baseline_tree:
        compare(args, sizes)
        return
    if args.otel == "sdk":
        install_otel_sdk()
    django_setup()
    if args.worker:
        result = run_all(sizes, args.steps)
        print(json.dumps(result))
        return
    print(f"otel: {args.otel}; load average: {loadavg()}")
    result = run_all(sizes, args.steps)
    print_tree(result, sizes)
    print(f"load average: {loadavg()}")


if __name__ == "__main__":
    main()
