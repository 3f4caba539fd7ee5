"""Prompt-cache efficiency: a 20-step tool-using run, a 12-turn chat, a 50-turn chat and a chat
that opens with attachments.

Runs the real step loop (synchronous worker) against the local Messages API server, whose
cache accounting mirrors the real API's (breakpoints + 20-block look-back), and prints the
share of input tokens served from the cached prefix (``cache_read_input_tokens`` / all input
tokens, every request but the first) for:

- a 20-step run (19 lookups and an answer), target >= 0.95, and the same run with our cache
  breakpoints stripped (the baseline) with the ratio of their effective input cost (cache
  reads at 0.1x, writes at 1.25x);
- a 12-turn chat (a user message and a text reply per turn), target >= 0.90;
- a 50-turn chat in a 20,000-token budget (a lookup and a reply per turn, so the window moves
  in batches and memory snapshots arrive), target >= 0.70;
- an 8-turn chat whose first message attaches a 1280x800 screenshot and a 3-page PDF (image
  and document blocks, sent byte-identical every turn), target >= 0.90.
- a 12-turn chat with memory in use (an agent whose version sets ``MEMORY``: the memory tool
  views ``/memories`` on the first turn and writes in four later ones), target >= 0.90, beside
  the plain 12-turn chat above as its baseline;
- a thinking run (``THINKING`` on: every reply opens with a signed thinking block that later
  requests send back unchanged; eight lookups and a save that waits for an approval), then a
  follow-up message, target >= 0.90.

It prints the load average beside the figures: they are token counts, not timings, so load
does not change them, but it tells a reader what the machine was doing.

Usage: .venv/bin/python bench/cache_ratio.py [--steps 20] [--thinking-only] [--memory-only]
"""

from __future__ import annotations

import argparse
import os
from collections import deque

from _setup import django_setup


def register_lookup() -> None:
    """The read-only ``bench_lookup`` tool the runs call."""
    from orchestrator_app.tools import tool

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


def chat_settings(url: str, **more) -> dict:
    """AHENTIC for a measured chat against the local server at ``url``: no naming calls, no
    token budgets in the way, plus ``more``."""
    return {
        "API_KEY": "bench",
        "BASE_URL": url,
        "NAME_REFRESH_INTERVAL": 0,
        "SESSION_SOFT_TOKEN_BUDGET": None,
        "DAILY_TOKEN_LIMIT": None,
        **more,
    }


def run(steps: int, strip_breakpoints: bool) -> list[dict]:
    from django.contrib.auth import get_user_model
    from django.test import override_settings

    from orchestrator_app import llm, tasks
    from orchestrator_app.control import runs
    from orchestrator_app.testing.localapi import (
        LocalMessagesServer,
        text_reply,
        tool_call,
        tool_reply,
    )
    from sessions_app import services as session_services

    register_lookup()
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


def chat(turns: int, budget: int | None) -> list[dict]:
    """``turns`` chat turns: with a ``budget``, each turn is a lookup and a longer reply (the
    window outgrows the budget); without, a question and a short reply."""
    from django.contrib.auth import get_user_model
    from django.test import override_settings

    from orchestrator_app import tasks
    from orchestrator_app.control import runs
    from orchestrator_app.testing.localapi import (
        LocalMessagesServer,
        text_reply,
        tool_call,
        tool_reply,
    )
    from sessions_app import services as session_services

    server = LocalMessagesServer().start()
    main: deque = deque()
    brain_model = "bench-brain"

    def respond(body):
        if body["model"] == brain_model:
            return text_reply("Memory: the user asked about topics; the agent answered each.")
        return main.popleft() if main else text_reply("Done.")

    server.responder = respond
    settings = chat_settings(
        server.url,
        BRAIN_MODEL=brain_model,
        TRACE_CAP=100000,  # keep every context_compact row to count the window moves
    )
    if budget:
        settings["CONTEXT_BUDGET_TOKENS"] = budget
    try:
        user, _ = get_user_model().objects.get_or_create(username=f"bench-chat-{turns}")
        with override_settings(AHENTIC=settings):
            session = session_services.session_create(owner=user)
            for n in range(turns):
                if budget:
                    main.append(tool_reply(tool_call("bench_lookup", {"key": f"topic-{n}"})))
                    main.append(text_reply(f"Answer {n}: " + "what the page should say. " * 50))
                else:
                    main.append(text_reply(f"Answer {n}: " + "what the page should say. " * 6))
                details = " Details." * (100 if budget else 40)
                question = f"Question {n}: what about topic {n}?" + details
                runs.message_post(session=session, content=question)
                session.refresh_from_db()
                if session.status == "running":
                    tasks.run_step(str(session.pk), session.run_seq)
                session.refresh_from_db()
                assert session.status == "idle", (session.status, session.last_error)
        from sessions_app.models import Snapshot, TraceEvent

        moves = TraceEvent.objects.filter(session_id=session.pk, type="context_compact").count()
        snapshots = Snapshot.objects.filter(session_id=session.pk).count()
        print(f"  window moves: {moves}, memory snapshots now: {snapshots}", flush=True)
        return [
            entry["response"]["usage"]
            for entry in server.requests
            if entry["path"] == "/v1/messages" and entry["json"]["model"] != brain_model
        ]
    finally:
        server.stop()


def memory_chat(turns: int) -> list[dict]:
    """``turns`` chat turns with an agent that keeps memory: the first views ``/memories``,
    turns 2, 4, 7 and 10 write to it (create, then str_replace, insert, create), each turn
    ends with a short reply."""
    from django.contrib.auth import get_user_model
    from django.test import override_settings

    from orchestrator_app import tasks
    from orchestrator_app.control import runs
    from orchestrator_app.testing.localapi import (
        LocalMessagesServer,
        text_reply,
        tool_call,
        tool_reply,
    )
    from sessions_app import agents
    from sessions_app import services as session_services
    from sessions_app.models import Agent, MemoryChange

    writes = {
        2: {"command": "create", "path": "/memories/prefs.md", "file_text": "Tone: brief\n"},
        4: {
            "command": "str_replace",
            "path": "/memories/prefs.md",
            "old_str": "brief",
            "new_str": "brief, friendly",
        },
        7: {
            "command": "insert",
            "path": "/memories/prefs.md",
            "insert_line": 1,
            "insert_text": "Tea",
        },
        10: {"command": "create", "path": "/memories/projects.md", "file_text": "Site relaunch\n"},
    }
    server = LocalMessagesServer().start()
    settings = chat_settings(server.url)
    try:
        user, _ = get_user_model().objects.get_or_create(username=f"bench-memory-{turns}")
        agent, _ = Agent.objects.get_or_create(slug="bench-memory", defaults={"name": "Memory"})
        version = agents.version_save(agent, config={"MEMORY": "user"})
        with override_settings(AHENTIC=settings):
            session = session_services.session_create(owner=user, agent_version=version)
            for n in range(turns):
                command = {"command": "view", "path": "/memories"} if n == 0 else writes.get(n)
                if command:
                    server.enqueue(tool_reply(tool_call("memory", command)))
                server.enqueue(text_reply(f"Answer {n}: " + "what the page should say. " * 6))
                question = f"Question {n}: what about topic {n}?" + " Details." * 40
                runs.message_post(session=session, content=question)
                session.refresh_from_db()
                if session.status == "running":
                    tasks.run_step(str(session.pk), session.run_seq)
                session.refresh_from_db()
                assert session.status == "idle", (session.status, session.last_error)
        changes = MemoryChange.objects.filter(session_id=session.pk).count()
        print(f"  memory changes written: {changes}", flush=True)
        requests = [e for e in server.requests if e["path"] == "/v1/messages"]
        assert all(e["accepted"] for e in requests)
        assert all(
            {"type": "memory_20250818", "name": "memory"}
            in [{k: v for k, v in t.items() if k != "cache_control"} for t in e["json"]["tools"]]
            for e in requests
        )
        return [entry["response"]["usage"] for entry in requests]
    finally:
        server.stop()


def attachment_chat(turns: int) -> list[dict]:
    """``turns`` chat turns, the first with a screenshot and a PDF attached (uploaded to the
    session first, as the sidebar does), each answered with a short reply."""
    from django.contrib.auth import get_user_model
    from django.test import override_settings

    from orchestrator_app import tasks
    from orchestrator_app.control import runs
    from orchestrator_app.testing.localapi import LocalMessagesServer, text_reply
    from sessions_app import attachments
    from sessions_app import services as session_services
    from tests.support.attachment_files import pdf, png

    server = LocalMessagesServer().start()
    server.responder = lambda body: text_reply("It shows the settings page. " * 6)
    settings = chat_settings(server.url)
    try:
        user, _ = get_user_model().objects.get_or_create(username=f"bench-attach-{turns}")
        with override_settings(AHENTIC=settings):
            session = session_services.session_create(owner=user)
            files = [("screen.png", png(1280, 800)), ("spec.pdf", pdf(3))]
            ids = [str(a.pk) for a in attachments.store_uploads(session_id=session.pk, files=files)]
            for n in range(turns):
                question = f"Question {n}: what does the screenshot show about part {n}?"
                runs.message_post(
                    session=session, content=question, attachments=ids if n == 0 else []
                )
                session.refresh_from_db()
                if session.status == "running":
                    tasks.run_step(str(session.pk), session.run_seq)
                session.refresh_from_db()
                assert session.status == "idle", (session.status, session.last_error)
        return [
            entry["response"]["usage"]
            for entry in server.requests
            if entry["path"] == "/v1/messages" and entry["accepted"]
        ]
    finally:
        server.stop()


def thinking_run(lookups: int = 8) -> list[dict]:
    """A run with thinking on: lookups, a save paused for approval, approved, a reply, and
    one more message (history then holds every turn's thinking)."""
    from django.contrib.auth import get_user_model
    from django.test import override_settings

    from orchestrator_app import tasks
    from orchestrator_app.control import runs
    from orchestrator_app.loop import decisions
    from orchestrator_app.testing.localapi import (
        LocalMessagesServer,
        text_reply,
        tool_call,
        tool_reply,
        with_thinking,
    )
    from orchestrator_app.tools import tool
    from sessions_app import services as session_services

    @tool(
        name="bench_save",
        description="Save a summary (asks for approval).",
        input_schema={
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        },
        readonly=False,
    )
    def bench_save(ctx, input):
        return {"ok": True, "saved": len(input["text"])}

    register_lookup()
    server = LocalMessagesServer().start()
    reasoning = "Weigh what the last lookup said against the plan before the next step. " * 6
    for i in range(lookups):
        call = tool_call("bench_lookup", {"key": f"topic-{i}"})
        server.enqueue(with_thinking(tool_reply(call), f"Step {i}: {reasoning}"))
    save = tool_call("bench_save", {"text": "Summary of the lookups."})
    server.enqueue(with_thinking(tool_reply(save), f"Save now: {reasoning}"))
    server.enqueue(with_thinking(text_reply("Saved the summary."), "Report the save."))
    server.enqueue(with_thinking(text_reply("It holds eight topics."), "Answer from history."))

    def step_until_idle(session):
        session.refresh_from_db()
        if session.status == "running":
            tasks.run_step(str(session.pk), session.run_seq)
        session.refresh_from_db()

    try:
        user, _ = get_user_model().objects.get_or_create(username="bench-thinking")
        settings = chat_settings(server.url, THINKING=2048, MAX_STEPS_PER_RUN=lookups + 4)
        with override_settings(AHENTIC=settings):
            session = session_services.session_create(owner=user)
            runs.message_post(session=session, content="Look up eight topics, then save.")
            step_until_idle(session)
            assert session.status == "awaiting_human", (session.status, session.last_error)
            decisions.approval_decide(session=session, decision="allow_once")
            step_until_idle(session)
            assert session.status == "idle", (session.status, session.last_error)
            runs.message_post(session=session, content="How many topics were there?")
            step_until_idle(session)
            assert session.status == "idle", (session.status, session.last_error)
        requests = [e for e in server.requests if e["path"] == "/v1/messages"]
        assert all(e["accepted"] and "thinking" in e["json"] for e in requests)
        return [entry["response"]["usage"] for entry in requests]
    finally:
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
    parser.add_argument("--thinking-only", action="store_true", help="Only the thinking run.")
    parser.add_argument(
        "--memory-only",
        action="store_true",
        help="Only the 12-turn chats, with and without memory.",
    )
    args = parser.parse_args()
    django_setup()
    if args.memory_only:
        print("Running a 12-turn chat (baseline) and a 12-turn chat with memory...", flush=True)
        plain_share, _ = summarize(chat(12, budget=None))
        memory_share, _ = summarize(memory_chat(12))
        print(f"12-turn chat: {plain_share:.3f}")
        print(
            f"12-turn chat with memory: {memory_share:.3f} "
            f"({memory_share / plain_share:.3f}x the chat without)"
        )
        print("load average: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
        print("PASS" if memory_share >= 0.90 else f"FAIL: memory chat {memory_share:.3f} < 0.9")
        return
    if args.thinking_only:
        share, _ = summarize(thinking_run())
        print(f"thinking run with an approval: {share:.3f}")
        print("PASS" if share >= 0.90 else f"FAIL: thinking run {share:.3f} < 0.9")
        return
    print(f"Running a {args.steps}-step run with cache breakpoints...", flush=True)
    cached = run(args.steps, strip_breakpoints=False)
    print("Running the same run without breakpoints (baseline)...", flush=True)
    baseline = run(args.steps, strip_breakpoints=True)
    print("Running a 12-turn chat...", flush=True)
    short_chat = chat(12, budget=None)
    print("Running a 50-turn chat in a 20,000-token budget...", flush=True)
    long_chat = chat(50, budget=20000)
    print("Running a 12-turn chat with memory in use...", flush=True)
    remembering = memory_chat(12)
    print("Running an 8-turn chat that opens with a screenshot and a PDF...", flush=True)
    attached_chat = attachment_chat(8)
    print("Running a thinking run with an approval...", flush=True)
    thinking = thinking_run()
    share, cost = summarize(cached)
    base_share, base_cost = summarize(baseline)
    chat_share, _ = summarize(short_chat)
    long_share, _ = summarize(long_chat)
    memory_share, _ = summarize(remembering)
    attached_share, _ = summarize(attached_chat)
    thinking_share, _ = summarize(thinking)
    print(f"model calls: {len(cached)} (baseline {len(baseline)})")
    print(
        f"cache-read share of input tokens, steps 2..{len(cached)}: {share:.3f} "
        f"(baseline {base_share:.3f})"
    )
    print(f"effective input cost vs baseline: {cost / base_cost:.3f}x")
    print(f"12-turn chat, turns 2..12 ({len(short_chat)} calls): {chat_share:.3f}")
    print(
        f"12-turn chat with memory ({len(remembering)} calls): {memory_share:.3f} "
        f"({memory_share / chat_share:.3f}x the chat without)"
    )
    print(f"50-turn chat, 20,000-token budget ({len(long_chat)} calls): {long_share:.3f}")
    print(f"8-turn attachment chat, turns 2..8 ({len(attached_chat)} calls): {attached_share:.3f}")
    print(f"thinking run with an approval ({len(thinking)} calls): {thinking_share:.3f}")
    print("load average: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    results = [(share, 0.95, "20-step run"), (chat_share, 0.90, "12-turn chat")]
    results.append((long_share, 0.70, "50-turn chat"))
    results.append((memory_share, 0.90, "memory chat"))
    results.append((attached_share, 0.90, "attachment chat"))
    results.append((thinking_share, 0.90, "thinking run"))
    failed = [f"{name} {value:.3f} < {target}" for value, target, name in results if value < target]
    print("PASS" if not failed else "FAIL: " + "; ".join(failed))


if __name__ == "__main__":
    main()
