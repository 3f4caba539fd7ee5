"""A sidebar chat is many short runs: its requests are served from the prompt cache, a chat
longer than its budget stays under it, and memory never loses what it evicted.

Through the HTTP API with the synchronous worker; the model is the local Messages API server,
whose prompt-cache accounting mirrors the real API's. The main model and the brain (memory
snapshots) are answered apart (``model_script``).
"""

import pytest

from orchestrator_app import tasks
from orchestrator_app.testing.localapi import (
    count_request_tokens,
    text_reply,
    tool_call,
    tool_reply,
)
from sessions_app.conf import ahentic_settings
from sessions_app.models import Event, Session, Snapshot
from tests.support.api import post_message, session_url
from tests.support.model import model_requests
from tests.support.window import assert_tool_pairs_intact, read_share, starts_with

pytestmark = pytest.mark.usefixtures("llm_strict")


def main_requests(llm) -> list[dict]:
    return [entry["json"] for entry in model_requests(llm, ahentic_settings.MODEL)]


def main_usages(llm) -> list[dict]:
    return [entry["response"]["usage"] for entry in model_requests(llm, ahentic_settings.MODEL)]


def brain_texts(llm) -> str:
    return "\n".join(
        entry["json"]["messages"][0]["content"][0]["text"]
        for entry in model_requests(llm, ahentic_settings.BRAIN_MODEL)
    )


def memory_of(body: dict) -> str:
    last = body["system"][-1]["text"]
    return last if last.startswith("## Memory") else ""


def question(n: int) -> str:
    return f"Question {n:02d}: what should the page say about topic {n}?" + " Details." * 40


class BrainNotes:
    def __init__(self):
        self.count = 0

    def __call__(self, body):
        self.count += 1
        return text_reply(f"Memory note {self.count}.")


def test_a_twelve_turn_chat_reads_its_earlier_turns_from_the_prompt_cache(
    owner_client, session, llm, run_tasks
):
    for n in range(12):
        llm.enqueue(text_reply(f"Answer {n:02d}: " + "the page should say this. " * 6))
        post_message(owner_client, session, run_tasks, question(n))

    requests, usages = main_requests(llm), main_usages(llm)
    assert len(requests) == 12
    for previous, current in zip(requests, requests[1:], strict=False):
        # The system blocks and tools are byte-identical from turn to turn; the messages
        # extend the previous turn's (the reply and the new question).
        assert current["system"] == previous["system"]
        assert current["tools"] == previous["tools"]
        assert starts_with(current["messages"], previous["messages"])
    for n in range(1, 12):
        assert usages[n]["cache_read_input_tokens"] == count_request_tokens(requests[n - 1])
    assert read_share(usages[1:]) >= 0.90


def test_a_chat_that_switches_mode_keeps_its_system_prompt(owner_client, session, llm, run_tasks):
    llm.enqueue(text_reply("In agent mode."), text_reply("In ask mode."))

    post_message(owner_client, session, run_tasks, "First", mode="agent")
    post_message(owner_client, session, run_tasks, "Second", mode="ask")

    first, second = main_requests(llm)
    assert second["system"] == first["system"]
    assert "Mode: Ask" in second["messages"][-1]["content"][-1]["text"]


def test_a_fifty_turn_chat_stays_in_budget_and_memory_covers_every_pruned_event(
    owner_client, session, llm, model_script, run_tasks, settings
):
    budget = 20000
    settings.AHENTIC = {
        **settings.AHENTIC,
        "CONTEXT_BUDGET_TOKENS": budget,
        "CONTEXT_EVICT_TO": 0.66,
        "ENTRY_RETENTION": 60,
        "TRACE_CAP": 10000,
        "SESSION_SOFT_TOKEN_BUDGET": None,
        "DAILY_TOKEN_LIMIT": None,
    }
    model_script.brain = BrainNotes()
    seen: set[int] = set()
    for n in range(50):
        model_script.main.extend(
            [
                tool_reply(tool_call("echo", {"text": f"Lookup {n:02d}. " + "fact " * 150})),
                text_reply(f"Answer {n:02d}: " + "the page should say this. " * 12),
            ]
        )
        body = post_message(owner_client, session, run_tasks, question(n))
        assert body["status"] == "idle", body["lastError"]
        seen |= set(Event.objects.filter(session=session).values_list("pk", flat=True))

    requests = main_requests(llm)
    assert len(requests) == 100
    stable = [b for b in requests[0]["system"] if not b["text"].startswith("## Memory")]
    for previous, current in zip(requests, requests[1:], strict=False):
        assert count_request_tokens(current) <= budget
        assert_tool_pairs_intact(current)
        # The system prompt changes only when memory changed.
        assert current["system"][: len(stable) - 1] == stable[:-1]
        if current["system"] != previous["system"]:
            assert memory_of(current) != memory_of(previous)
    assert len({memory_of(body) for body in requests}) >= 3  # memory grew several times
    # Retention pruned old events, but only those a snapshot covered; the brain read each of
    # them (every pruned question is in a summary request).
    present = set(Event.objects.filter(session=session).values_list("pk", flat=True))
    pruned = seen - present
    assert pruned
    covered = max(Snapshot.objects.filter(session=session).values_list("to_event_id", flat=True))
    assert max(pruned) <= covered
    kept = set(Event.objects.filter(session=session).values_list("content", flat=True))
    pruned_questions = [question(n) for n in range(50) if question(n) not in kept]
    assert pruned_questions
    summarized = brain_texts(llm)
    for text in pruned_questions:
        assert text[:60] in summarized
    # Between evictions each turn extends the previous one, so most input is cached.
    assert read_share(main_usages(llm)[1:]) >= 0.70


def test_a_run_past_the_retention_limit_keeps_every_event_until_memory_covers_it(
    owner_client, session, llm, model_script, settings
):
    """Steps run one by one, so the memory task each eviction enqueues (on commit) never runs:
    hundreds of events beyond retention, none summarized, none pruned."""
    settings.AHENTIC = {
        **settings.AHENTIC,
        "CONTEXT_BUDGET_TOKENS": 6000,
        "ENTRY_RETENTION": 10,
        "MAX_STEPS_PER_RUN": 200,
        "BRAIN_MODEL": "",  # memory falls back to an extractive summary
        "SESSION_SOFT_TOKEN_BUDGET": None,
        "DAILY_TOKEN_LIMIT": None,
    }
    lookups = 60
    for n in range(lookups):
        model_script.main.append(tool_reply(tool_call("echo", {"text": f"Item {n} " * 60})))
    model_script.main.append(text_reply("All items looked up."))
    response = owner_client.post(
        session_url(session, "messages"), {"content": "Look up sixty items"}, format="json"
    )
    assert response.status_code == 202
    run_seq = response.json()["runSeq"]
    for _ in range(lookups + 1):
        tasks.run_step(str(session.pk), run_seq)

    stored = Session.objects.get(pk=session.pk)
    assert stored.status == "idle"
    assert stored.viewport_start_event_id is not None  # the window moved
    assert Snapshot.objects.filter(session=session).count() == 0
    seqs = list(Event.objects.filter(session=session).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, stored.last_seq + 1))
    assert len(seqs) > 10 * 10

    # The memory task runs: the evicted events become a snapshot, then the next run's first
    # turn prunes only what it covers.
    tasks.remember(str(session.pk))
    [snapshot] = Snapshot.objects.filter(session=session)
    assert "- User: Look up sixty items" in snapshot.text
    newer = Event.objects.filter(session=session, pk__gt=snapshot.to_event_id).count()
    model_script.main.append(text_reply("Noted."))
    response = owner_client.post(
        session_url(session, "messages"), {"content": "Thanks"}, format="json"
    )
    assert response.status_code == 202
    tasks.run_step(str(session.pk), response.json()["runSeq"])
    remaining = Event.objects.filter(session=session)
    assert remaining.filter(pk__lte=snapshot.to_event_id).count() < snapshot.to_event_id
    # + "Thanks" and "Noted."
    assert remaining.filter(pk__gt=snapshot.to_event_id).count() == newer + 2
    assert remaining.order_by("seq").first().seq == stored.last_seq + 2 - 10 + 1 or (
        remaining.order_by("seq").first().pk == snapshot.to_event_id + 1
    )
