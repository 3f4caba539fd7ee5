"""sessions_app.services, the internal write API: trace cap, retention, transitions, estimates."""

import pytest
from django.conf import settings
from django.test import override_settings

from sessions_app import runstate, services
from sessions_app.models import Event, Session, TraceEvent
from tests.support.api import API
from tests.support.factories import SessionFactory
from tests.support.runs import remembered


def ahentic(**overrides):
    """``override_settings`` for a few AHENTIC keys, keeping the test settings' others."""
    return override_settings(AHENTIC={**settings.AHENTIC, **overrides})


def trace_rows(session):
    return list(TraceEvent.objects.filter(session=session).order_by("seq"))


def event_seqs(session):
    return list(Event.objects.filter(session=session).values_list("seq", flat=True))


# Trace cap


@ahentic(TRACE_CAP=10, TRACE_HEAD=3)
def test_it_keeps_every_trace_event_up_to_the_cap(session):
    for i in range(10):
        services.trace_record(session_id=session.pk, type="step", summary=f"e{i + 1}")

    rows = trace_rows(session)
    assert [r.summary for r in rows] == [f"e{i + 1}" for i in range(10)]
    assert not any(r.type == TraceEvent.GAP for r in rows)


@ahentic(TRACE_CAP=10, TRACE_HEAD=3)
def test_it_collapses_the_trace_into_head_gap_and_newest_tail(owner_client, session):
    trace_counts = []
    for n in range(1, 31):
        services.trace_record(session_id=session.pk, type="step", summary=f"e{n}")
        # traceCount is bookkeeping: the payload shows it as of the last visible change.
        trace_counts.append(Session.objects.get(pk=session.pk).trace_count)
        if n <= 10:
            continue

        rows = trace_rows(session)
        gaps = [r for r in rows if r.type == TraceEvent.GAP]
        assert len(rows) == 10
        assert [r.summary for r in rows[:3]] == ["e1", "e2", "e3"]
        assert len(gaps) == 1 and rows[3].type == TraceEvent.GAP  # sorts between head and tail
        assert gaps[0].data == {"dropped": n - 9}  # cumulative over every collapse
        assert [r.summary for r in rows[4:]] == [f"e{k}" for k in range(n - 5, n + 1)]

    assert trace_counts == list(range(1, 31))


@ahentic(TRACE_CAP=10, TRACE_HEAD=3)
def test_it_counts_every_trace_event_ever_recorded(session):
    for _ in range(25):
        services.trace_record(session_id=session.pk, type="step")

    assert Session.objects.get(pk=session.pk).trace_count == 25
    assert TraceEvent.objects.filter(session=session).count() == 10


def test_it_records_trace_rows_with_the_sessions_run_and_step(session):
    runstate.session_update(session_id=session.pk, run_seq=3, step_count=7)

    row = services.trace_record(
        session_id=session.pk, type="tool", summary="s" * 600, data={"a": 1}
    )
    explicit = services.trace_record(session_id=session.pk, type="tool", step=2, run=1)

    assert (row.run, row.step, len(row.summary), row.data) == (3, 7, 500, {"a": 1})
    assert (explicit.run, explicit.step) == (1, 2)
    assert [r.seq for r in trace_rows(session)] == [1, 2]


# Event retention and seq


@ahentic(ENTRY_RETENTION=5, MESSAGES_WINDOW=3)
def test_it_prunes_the_oldest_events_beyond_retention_once_memory_covers_them(
    owner_client, session
):
    for i in range(12):
        services.event_append(session_id=session.pk, kind="user_message", content=f"m{i + 1}")

    # No snapshot covers them yet: memory never loses history.
    assert event_seqs(session) == list(range(1, 13))

    remembered(session, through_seq=9)
    batch = services.events_append(
        session_id=session.pk,
        items=[{"kind": "agent_message", "content": f"b{i}"} for i in range(3)],
        prune=True,
    )

    assert [e.seq for e in batch] == [13, 14, 15]  # never reuses a pruned seq
    # Beyond retention are 1..10; of those, 10 is not covered by the snapshot.
    assert event_seqs(session) == [10, 11, 12, 13, 14, 15]
    payload = owner_client.get(f"{API}/sessions/{session.pk}").json()
    assert [m["seq"] for m in payload["messages"]] == [13, 14, 15]
    assert payload["hasMore"] is True
    older = owner_client.get(f"{API}/sessions/{session.pk}/messages?before=10").json()
    assert older == {"messages": [], "hasMore": False}


@ahentic(ENTRY_RETENTION=5, MESSAGES_WINDOW=5)
def test_it_reports_no_more_messages_when_the_rest_was_pruned(owner_client, session):
    for _ in range(7):
        services.event_append(session_id=session.pk, kind="user_message", content="m")
    remembered(session, through_seq=7)
    for _ in range(5):
        services.event_append(session_id=session.pk, kind="user_message", content="m", prune=True)

    payload = owner_client.get(f"{API}/sessions/{session.pk}").json()

    assert [m["seq"] for m in payload["messages"]] == [8, 9, 10, 11, 12]
    assert payload["hasMore"] is False


@ahentic(ENTRY_RETENTION=None)
def test_it_keeps_every_event_without_retention(session):
    for _ in range(12):
        services.event_append(session_id=session.pk, kind="user_message", content="m", prune=True)

    assert Event.objects.filter(session=session).count() == 12


def test_it_numbers_events_per_session(owner):
    first, second = SessionFactory(owner=owner), SessionFactory(owner=owner)

    a = services.event_append(session_id=first.pk, kind="user_message", content="a")
    b = services.event_append(session_id=second.pk, kind="user_message", content="b")
    c = services.event_append(session_id=first.pk, kind="agent_message", content="c")

    assert (a.seq, b.seq, c.seq) == (1, 1, 2)
    assert Session.objects.get(pk=first.pk).last_seq == 2


def test_it_stamps_events_with_the_current_run_unless_told(session):
    runstate.session_update(session_id=session.pk, run_seq=4)

    current = services.event_append(session_id=session.pk, kind="user_message", content="x")
    explicit = services.event_append(session_id=session.pk, kind="user_message", run=2)

    assert (current.run, explicit.run) == (4, 2)


# Transitions


def test_it_transitions_a_session_in_the_expected_status(session):
    before = Session.objects.get(pk=session.pk)

    moved = runstate.session_transition(
        session_id=session.pk, from_statuses=["idle", "error"], to_status="running", run_seq=1
    )

    after = Session.objects.get(pk=session.pk)
    assert moved is True
    assert (after.status, after.run_seq, after.version) == ("running", 1, before.version + 1)


def test_it_refuses_a_transition_from_another_status(session):
    runstate.session_transition(session_id=session.pk, from_statuses=["idle"], to_status="running")
    before = Session.objects.filter(pk=session.pk).values().get()

    moved = runstate.session_transition(
        session_id=session.pk,
        from_statuses=["error"],
        to_status="cancelled",
        last_error="should not be written",
    )

    assert moved is False
    assert Session.objects.filter(pk=session.pk).values().get() == before


def test_it_lets_only_one_of_two_racing_transitions_win(session):
    results = [
        runstate.session_transition(
            session_id=session.pk, from_statuses=["idle"], to_status="running", run_seq=run_seq
        )
        for run_seq in (1, 2)
    ]

    assert results == [True, False]
    assert Session.objects.get(pk=session.pk).run_seq == 1


def test_it_refuses_a_transition_the_status_table_does_not_list(session):
    with pytest.raises(ValueError, match="STATUS_TRANSITIONS"):
        runstate.session_transition(
            session_id=session.pk, from_statuses=["idle"], to_status="cancelled"
        )

    assert Session.objects.get(pk=session.pk).status == "idle"


def test_it_does_not_transition_a_missing_session(db):
    assert (
        runstate.session_transition(
            session_id="00000000-0000-0000-0000-000000000000",
            from_statuses=["idle"],
            to_status="running",
        )
        is False
    )


# Pending messages


def test_it_recalls_a_pending_message_only_once(session):
    pending = services.pending_message_add(session_id=session.pk, content="later")
    version = Session.objects.get(pk=session.pk).version

    first = services.pending_message_recall(session_id=session.pk, pending_id=pending.pk)
    second = services.pending_message_recall(session_id=session.pk, pending_id=pending.pk)

    assert (first, second) == (True, False)
    assert Session.objects.get(pk=session.pk).version == version + 1


def test_it_does_not_recall_another_sessions_pending_message(owner, session):
    elsewhere = SessionFactory(owner=owner)
    pending = services.pending_message_add(session_id=elsewhere.pk, content="later")

    assert services.pending_message_recall(session_id=session.pk, pending_id=pending.pk) is False
    assert elsewhere.pending_messages.count() == 1


# Token estimates


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("", 1),
        (None, 1),
        ("a", 1),
        ("abcd", 1),
        ("abcde", 2),
        ("x" * 400, 100),
        ("éééé", 2),  # 4 characters, 8 bytes
        ("日本語", 3),  # 3 characters, 9 bytes
        ("😀😀", 2),  # 2 characters, 8 bytes
    ],
)
def test_it_estimates_tokens_from_utf8_bytes(text, tokens):
    assert services.estimate_tokens(text) == tokens


def test_it_stores_the_token_estimate_on_each_event(session):
    event = services.event_append(session_id=session.pk, kind="user_message", content="日本語" * 4)

    assert Event.objects.get(pk=event.pk).token_count == 9


def test_a_tool_call_counts_the_tool_use_block_a_request_carries(session):
    from sessions_app.tokens import block_tokens

    call = services.event_append(
        session_id=session.pk,
        kind=Event.Kind.TOOL_CALL,
        content='{"text": "é" }',
        payload={"tool": "echo", "input": {"text": "é " * 40, "n": 3}},
        tool_use_id="toolu_count",
    )
    block = {
        "type": "tool_use",
        "id": "toolu_count",
        "name": "echo",
        "input": call.payload["input"],
    }

    assert Event.objects.get(pk=call.pk).token_count == block_tokens(block)


@pytest.mark.django_db(transaction=True)
def test_the_migration_recounts_tool_calls_written_before_it(owner):
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    before = [("sessions_app", "0005_live_text")]
    after = [("sessions_app", "0006_tool_call_token_count")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old_apps = executor.loader.project_state(before).apps
    OldSession = old_apps.get_model("sessions_app", "Session")
    OldEvent = old_apps.get_model("sessions_app", "Event")
    old = OldSession.objects.create(owner_id=owner.pk)
    payload = {"tool": "echo", "input": {"text": "x" * 400}}
    OldEvent.objects.create(session=old, seq=1, kind="tool_call", payload=payload, token_count=1)
    OldEvent.objects.create(session=old, seq=2, kind="user_message", content="hi", token_count=1)

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(after)

    counts = dict(Event.objects.filter(session_id=old.pk).values_list("kind", "token_count"))
    # The later migrations again, for the tests that run after this one.
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
    assert counts == {
        "tool_call": services.tool_use_tokens("echo", payload["input"]),
        "user_message": 1,
    }
