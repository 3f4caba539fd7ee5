"""Prompt-cache efficiency of a 20-step tool-using run.

Runs the real step loop (synchronous worker) against the local Messages API server, whose
cache accounting mirrors the real API's (breakpoints + 20-block look-back), and prints:

- the share of input tokens of steps 2..20 served from the cached prefix
  (``cache_read_input_tokens`` / all input tokens), target >= 0.95;
- the same run with our cache breakpoints stripped (the baseline, measured in the same run),
  and the ratio of the two runs' effective input cost (cache reads at 0.1x, writes at 1.25x).

Usage: .venv/bin/python bench/cache_ratio.py [--steps 20]
"""

from __future__ import annotations

import argparse

from _setup import django_setup


def run(steps: int, strip_breakpoints: bool) -> list[dict]:
    from django.contrib.auth import get_user_model
    from django.test import override_settings

    from orchestrator_app import llm, runs, tasks
    from orchestrator_app.testing.localapi import (
        LocalMessagesServer,
        text_reply,
        tool_call,
        tool_reply,
    )
    from orchestrator_app.tools import tool
    from sessions_app import services as session_services

    @tool(
        name="bench_lookup",
        description="Look up a fact by key.",
        input_schema={
            "type": "object",
            "properties": {"key": {"type": "string"}},
            "required": ["key"],
        },
        readonly=True,
    )
    def bench_lookup(ctx, input):
        return {"ok": True, "key": input["key"], "value": f"fact about {input['key']} " * 20}

    server = LocalMessagesServer().start()
    if strip_breakpoints:
        original = llm.call_model

        def strip(blocks):
            return [{k: v for k, v in b.items() if k != "cache_control"} for b in blocks]

        def without_cache(**kwargs):
            kwargs["system"] = strip(kwargs["system"])
            kwargs["tools"] = strip(kwargs.get("tools") or [])
            kwargs["messages"] = [{**m, "content": strip(m["content"])} for m in kwargs["messages"]]
            return original(**kwargs)

        llm.call_model = without_cache
    try:
        for i in range(steps - 1):
            server.enqueue(tool_reply(tool_call("bench_lookup", {"key": f"topic-{i}"})))
        server.enqueue(text_reply("Summary of everything I looked up."))
        user, _ = get_user_model().objects.get_or_create(username=f"bench-{strip_breakpoints}")
        with override_settings(
            AHENTIC={
                "API_KEY": "bench",
                "BASE_URL": server.url,
                "MAX_STEPS_PER_RUN": steps + 1,
                "NAME_REFRESH_INTERVAL": 0,  # measure the step loop only
            }
        ):
            session = session_services.session_create(owner=user)
            runs.message_post(session=session, content="Research twenty topics, one lookup each.")
            # django-q2 runs in sync mode under tests.settings: each step enqueues the next.
            session.refresh_from_db()
            if session.status == "running":
                tasks.run_step(str(session.pk), session.run_seq)
            session.refresh_from_db()
            assert session.status == "idle", (session.status, session.last_error)
        return [
            entry["response"]["usage"]
            for entry in server.requests
            if entry["path"] == "/v1/messages"
        ]
    finally:
        if strip_breakpoints:
            llm.call_model = original
        server.stop()


def summarize(usages: list[dict]) -> tuple[float, float]:
    later = usages[1:]
    read = sum(u["cache_read_input_tokens"] for u in later)
    total = sum(
        u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"]
        for u in later
    )
    cost = sum(
        u["input_tokens"]
        + 0.1 * u["cache_read_input_tokens"]
        + 1.25 * u["cache_creation_input_tokens"]
        for u in usages
    )
    return read / total if total else 0.0, cost


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    django_setup()
    print(f"Running a {args.steps}-step run with cache breakpoints...", flush=True)
    cached = run(args.steps, strip_breakpoints=False)
    print("Running the same run without breakpoints (baseline)...", flush=True)
    baseline = run(args.steps, strip_breakpoints=True)
    share, cost = summarize(cached)
    base_share, base_cost = summarize(baseline)
    print(f"model calls: {len(cached)} (baseline {len(baseline)})")
    print(
        f"cache-read share of input tokens, steps 2..{len(cached)}: {share:.3f} (baseline {base_share:.3f})"
    )
    print(f"effective input cost vs baseline: {cost / base_cost:.3f}x")
    print("PASS" if share >= 0.95 else "FAIL: below the 0.95 target")


if __name__ == "__main__":
    main()
