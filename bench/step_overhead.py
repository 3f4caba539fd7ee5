"""Orchestrator overhead of one step, the model excluded, as a session's history grows.

Seeds sessions with 40, 400 and 4000 events (user turns, replies, tool call/result pairs of a
realistic size), then runs tool-using steps through the real step loop (synchronous worker)
against the local Messages API server, one step of each session in turn. For each size it
prints the median CPU milliseconds per step spent outside the model call, the SQL statements
per step, and the ratio to the 40-event session (the median of each round's ratio: the sizes'
steps of one round run back to back), with retention at its default and off.

The context budget is 20,000 tokens so a long history is windowed, as in production, where the
window (not the history) bounds a step's work. Targets (issue "Fast at any size"): <= 15 ms at
400 events, <= 30 statements per step, <= 1.3x growth from 40 to 4000 events with retention off.

Usage: .venv/bin/python bench/step_overhead.py [--steps 8] [--sizes 40,400,4000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from _setup import django_setup

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


def settings_for(retention, steps: int, server_url: str) -> dict:
    return {
        "API_KEY": "bench",
        "BASE_URL": server_url,
        "MAX_STEPS_PER_RUN": steps + 5,
        "NAME_REFRESH_INTERVAL": 0,
        "CONTEXT_BUDGET_TOKENS": BUDGET_TOKENS,
        "ENTRY_RETENTION": retention,
        "DAILY_TOKEN_LIMIT": 10**12,
        "SESSION_SOFT_TOKEN_BUDGET": None,
    }


def measure(retention, sizes: list[int], steps: int) -> dict[int, tuple[float, float, float]]:
    """``{events: (median ms per step, median statements per step, median ratio)}`` with
    ``retention``. The ratio is each round's step against the first size's step of the same
    round (their median), so a slow stretch of the machine cancels out.

    Every size has its own session; the steps of the sessions alternate (one step of each in
    turn, in a rotating order), so a burst of load on this noisy machine hits every size
    alike instead of one whole size. The CPU time is this thread's (``time.thread_time``:
    the local model server's thread is not counted), less the model call's own."""
    from unittest import mock

    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import override_settings

    from orchestrator_app import llm, tasks
    from orchestrator_app.control import runs
    from orchestrator_app.testing.localapi import LocalMessagesServer, tool_call, tool_reply
    from sessions_app import services as session_services
    from sessions_app.models import Session

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
                with mock.patch("orchestrator_app.control.queue.async_task"):
                    runs.message_post(session=session, content="Look up the new topics.")
                sessions[size] = session.pk
            # Every step is a tool step: one reply per step of every session.
            for i in range((steps + 1) * len(sizes)):
                server.enqueue(tool_reply(tool_call("bench_lookup", {"key": f"new-{i}"})))
            samples: dict[int, list[tuple[float, int]]] = {size: [] for size in sizes}
            # The queue is not measured: the next step's task is dropped (by a plain function:
            # a recording mock costs more than a small query).
            dropped = mock.patch("orchestrator_app.control.queue.async_task", not_enqueued)
            for round_number in range(steps + 1):
                print(f"  round {round_number + 1} of {steps + 1}...        ", end="\r", flush=True)
                shift = round_number % len(sizes)
                for size in sizes[shift:] + sizes[:shift]:
                    session = Session.objects.get(pk=sessions[size])
                    model_s[0], statements[0] = 0.0, 0
                    with dropped, connection.execute_wrapper(count):
                        started = time.thread_time()
                        tasks.run_step(str(session.pk), session.run_seq)
                        elapsed = time.thread_time() - started - model_s[0]
                    if round_number:  # a run's first step (it may move the window) is not measured
                        samples[size].append((elapsed * 1000, statements[0]))
        base = samples[sizes[0]]
        return {
            size: (
                statistics.median(ms for ms, _ in values),
                statistics.median(sql for _, sql in values),
                # Each round's step against the smallest session's step of the same round.
                statistics.median(ms / b for (ms, _), (b, _) in zip(values, base, strict=True)),
            )
            for size, values in samples.items()
        }
    finally:
        llm.call_model = original
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--sizes", default="40,400,4000")
    args = parser.parse_args()
    django_setup()
    from orchestrator_app.tools import tool

    @tool(
        name="bench_lookup",
        description="Look up a fact by key.",
        input_schema={"type": "object", "properties": {"key": {"type": "string"}}},
        readonly=True,
    )
    def bench_lookup(ctx, input):
        return {"ok": True, "key": input.get("key"), "value": "fact " * 60}

    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    results = {retention: measure(retention, sizes, args.steps) for retention in (400, None)}
    print(f"{'retention':>10} {'events':>7} {'ms/step':>8} {'SQL/step':>9} {'vs 40':>6}" + " " * 20)
    for retention, measured in results.items():
        for size in sizes:
            ms, sql, ratio = measured[size]
            label = "default" if retention else "off"
            print(f"{label:>10} {size:>7} {ms:>8.1f} {sql:>9.0f} {ratio:>5.2f}x")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
