"""Memory: events that leave the context window live on as snapshots in the system prompt.

A small ``CONTEXT_BUDGET_TOKENS`` makes a run of sizeable tool results evict in batches; each
eviction enqueues ``orchestrator_app.tasks.remember`` on commit, which the synchronous worker
runs before the next step. The brain model (``BRAIN_MODEL``) writes the summaries; the main
model and the brain are answered apart (``model_script``).
"""

import pytest

from orchestrator_app.loop import context, prompt
from orchestrator_app.models import UsageRecord
from orchestrator_app.testing.localapi import error_reply, text_reply, tool_call, tool_reply
from orchestrator_app.tools import tools_for
from sessions_app import runstate
from sessions_app.conf import ahentic_settings
from sessions_app.models import Event, Session, Snapshot
from tests.support.api import payload_of, session_url
from tests.support.model import model_requests

pytestmark = pytest.mark.usefixtures("llm_strict")

GOAL = "Research the topics one by one"


class BrainNotes:
    """The brain's answers: a numbered note per level-1 summary, a long-term note per fold."""

    def __init__(self):
        self.count = 0

    def __call__(self, body):
        text = body["messages"][0]["content"][0]["text"]
        if "Memory note" in text:
            return text_reply("Long-term memory: twenty topics were looked up.")
        self.count += 1
        return text_reply(f"Memory note {self.count}: topics were looked up.")


def run_long_session(client, run_tasks, session, model_script, settings, lookups: int) -> None:
    """One run of ``lookups`` sizeable echo results with about 2,500 tokens of window. The
    session is granted ``echo`` alone, so the eviction arithmetic does not depend on how many
    tools other test modules registered."""
    runstate.session_update(session_id=session.pk, granted_tools=["echo"])
    session.refresh_from_db()
    system, _ = prompt.system_blocks(session)
    tools = prompt.tool_definitions(tools_for(session, session.owner))
    budget = (context.estimate({"system": system, "tools": tools}) + 2500) // 100 * 100
    settings.AHENTIC = {
        **settings.AHENTIC,
        "CONTEXT_BUDGET_TOKENS": budget,
        "CONTEXT_EVICT_TO": 0.66,
        "MAX_STEPS_PER_RUN": lookups + 5,
        "TRACE_CAP": 5000,
    }
    for i in range(lookups):
        model_script.main.append(
            tool_reply(tool_call("echo", {"text": f"Topic {i:02d} finding. " * 50}))
        )
    model_script.main.append(text_reply("All topics researched."))
    response = run_tasks(
        client.post, session_url(session, "messages"), {"content": GOAL}, format="json"
    )
    assert response.status_code == 202, response.content
    body = payload_of(client, session)
    assert body["status"] == "idle", body["lastError"]


def main_requests(llm) -> list[dict]:
    return [entry["json"] for entry in model_requests(llm, ahentic_settings.MODEL)]


def brain_requests(llm) -> list[dict]:
    return [entry["json"] for entry in model_requests(llm, ahentic_settings.BRAIN_MODEL)]


def memory_section(body) -> str | None:
    sections = [b["text"] for b in body["system"] if b["text"].startswith("## Memory")]
    return sections[0] if sections else None


def test_a_run_that_fits_its_window_takes_no_snapshot(
    owner_client, session, llm, model_script, run_tasks, settings
):
    run_long_session(owner_client, run_tasks, session, model_script, settings, lookups=3)

    assert Snapshot.objects.filter(session=session).count() == 0
    assert brain_requests(llm) == []
    assert all(memory_section(body) is None for body in main_requests(llm))


def test_events_that_leave_the_window_become_a_level_one_snapshot_in_the_system_prompt(
    owner_client, session, llm, model_script, run_tasks, settings
):
    model_script.brain = BrainNotes()

    run_long_session(owner_client, run_tasks, session, model_script, settings, lookups=6)

    [snapshot] = Snapshot.objects.filter(session=session)
    assert snapshot.level == 1
    assert snapshot.text == "Memory note 1: topics were looked up."
    # It covers exactly the events before the window start, from the very first one.
    start = Session.objects.get(pk=session.pk).viewport_start_event_id
    events = list(Event.objects.filter(session=session).order_by("seq"))
    before = [e.pk for e in events if e.pk < start]
    assert (snapshot.from_event_id, snapshot.to_event_id) == (before[0], before[-1])
    # The brain read the evicted events (the user's request among them), and was paid for.
    [summary_request] = brain_requests(llm)
    assert GOAL in summary_request["messages"][0]["content"][0]["text"]
    memory_calls = UsageRecord.objects.filter(session=session, purpose="memory")
    assert [r.model for r in memory_calls] == [ahentic_settings.BRAIN_MODEL]
    # Requests after the snapshot show it last in the system prompt, after the environment.
    requests = main_requests(llm)
    with_memory = [body for body in requests if memory_section(body)]
    assert with_memory and with_memory[-1] is requests[-1]
    for body in with_memory:
        assert body["system"][-1]["text"].startswith("## Memory")
        assert "Memory note 1: topics were looked up." in body["system"][-1]["text"]
        assert body["system"][1]["text"].startswith("## Environment")
    assert payload_of(owner_client, session)["contextUsage"]["buckets"]["memory"] > 0


def test_five_level_one_snapshots_fold_into_a_level_two(
    owner_client, session, llm, model_script, run_tasks, settings
):
    model_script.brain = BrainNotes()

    run_long_session(owner_client, run_tasks, session, model_script, settings, lookups=14)

    snapshots = list(Snapshot.objects.filter(session=session).order_by("from_event_id"))
    level_two = [s for s in snapshots if s.level == 2]
    assert len(level_two) == 1, snapshots
    assert level_two[0].text == "Long-term memory: twenty topics were looked up."
    first_event = Event.objects.filter(session=session).order_by("seq").first()
    assert level_two[0].from_event_id == first_event.pk
    # The fold read the five level-1 notes; they are not shown beside the level-2 any more.
    folds = [
        b for b in brain_requests(llm) if "Memory note" in b["messages"][0]["content"][0]["text"]
    ]
    assert len(folds) == 1
    fold_input = folds[0]["messages"][0]["content"][0]["text"]
    for n in range(1, 6):
        assert f"Memory note {n}: topics were looked up." in fold_input
    assert [s.level for s in snapshots if s.to_event_id <= level_two[0].to_event_id] == [2]
    last = memory_section(main_requests(llm)[-1])
    assert "Long-term memory: twenty topics were looked up." in last
    for n in range(1, 6):
        assert f"Memory note {n}:" not in last


def test_without_the_brain_memory_falls_back_to_extractive_summaries(
    owner_client, session, llm, model_script, run_tasks, settings
):
    model_script.brain = lambda body: error_reply(
        500, "api_error", "The brain model is down.", retry_after_ms=10
    )

    run_long_session(owner_client, run_tasks, session, model_script, settings, lookups=14)

    assert brain_requests(llm)  # it was asked, and failed every time
    assert not UsageRecord.objects.filter(session=session, purpose="memory").exists()
    # The first level-1 snapshot was an extractive summary of the evicted events...
    requests = main_requests(llm)
    first_memory = next(memory_section(body) for body in requests if memory_section(body))
    assert f"- User: {GOAL}" in first_memory
    assert "- Agent used echo" in first_memory
    # ...and five of them folded into a level-2 made of their texts.
    [level_two] = Snapshot.objects.filter(session=session, level=2)
    assert level_two.text.startswith(f"- User: {GOAL}")
    assert level_two.text in memory_section(requests[-1])
    body = payload_of(owner_client, session)
    assert body["lastErrorCode"] == ""
    assert body["messages"][-1]["content"] == "All topics researched."


def test_five_level_two_snapshots_fold_again_so_memory_stays_bounded(session, llm, settings):
    from orchestrator_app import tasks
    from sessions_app import runstate
    from sessions_app import services as session_services

    settings.AHENTIC = {**settings.AHENTIC, "BRAIN_MODEL": ""}  # extractive: no model call
    events = session_services.events_append(
        session_id=session.pk,
        items=[{"kind": Event.Kind.USER_MESSAGE, "content": f"message {i}"} for i in range(12)],
    )
    for i in range(5):
        session_services.snapshot_add(
            session_id=session.pk,
            level=1,
            from_event_id=events[2 * i].pk,
            to_event_id=events[2 * i + 1].pk,
            text=f"note {i}",
        )
    Snapshot.objects.filter(session=session).update(level=2)  # five level-2 summaries
    runstate.session_update(session_id=session.pk, viewport_start_event_id=events[11].pk)

    tasks.remember(str(session.pk))

    snapshots = list(Snapshot.objects.filter(session=session).order_by("from_event_id"))
    # The event after the last note became a level-1; the five level-2s became one.
    assert [(s.level, s.from_event_id, s.to_event_id) for s in snapshots] == [
        (2, events[0].pk, events[9].pk),
        (1, events[10].pk, events[10].pk),
    ]
    assert all(f"note {i}" in snapshots[0].text for i in range(5))
