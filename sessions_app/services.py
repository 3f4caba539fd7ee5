"""Writers of what grows with a session: events, trace, pending messages, goals, snapshots.

Every function owns its transaction and bumps ``Session.version`` (through ``runstate``, the
only writer of the session row) when the client can see the change (the version is the REST
ETag). Nothing here calls the network.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_noop

from . import agents, db, runstate, window
from .conf import ahentic_settings
from .models import (
    AgentVersion,
    Attachment,
    Event,
    EventRow,
    Goal,
    PendingMessage,
    Session,
    Snapshot,
    TraceEvent,
)
from .tokens import block_tokens, estimate_tokens, tool_use_tokens

# Stored as written; the API shows it in the reader's language (api/serializers.py ChatTitleField).
DEFAULT_TITLE = gettext_noop("New Agent")


def session_create(
    *,
    owner,
    title: str | None = None,
    mode: str | None = None,
    parent: Session | None = None,
    prompt: str = "",
    granted_tools: list[str] | None = None,
    fork_event_id: int | None = None,
    agent_version: AgentVersion | None = None,
    spend_cap_usd=None,
) -> Session:
    """Create a session. Without a title it is "New Agent" and may be renamed automatically.
    It pins ``agent_version``: by default a sub-agent its parent's, any other the site's
    default agent's latest (``agents``); ``mode`` None is the agent's default mode.
    ``spend_cap_usd``: the chat's own cap over the agent's (a schedule's, say); None: none."""
    title = (title or "").strip()
    if agent_version is None:
        agent_version = parent.agent_version if parent is not None else agents.default_version()
    if mode is None:  # the agent's default mode (``MODE``), else agent mode
        config = agent_version.config if agent_version is not None else {}
        mode = agents.AgentSettings(config).MODE or Session.Mode.AGENT
    session = Session.objects.create(
        agent_version=agent_version,
        owner=owner,
        title=title[:255] or DEFAULT_TITLE,
        title_source=Session.TitleSource.USER if title else Session.TitleSource.DEFAULT,
        mode=mode,
        parent=parent,
        prompt=prompt,
        granted_tools=granted_tools,
        fork_event_id=fork_event_id,
        spend_cap_usd=spend_cap_usd,
    )
    if parent is not None:
        runstate.parent_bump(session.pk)
    return session


def events_append(
    *,
    session_id,
    items: Sequence[dict[str, Any]],
    lease: runstate.Lease | None = None,
    prune: bool = False,
    session_fields: dict[str, Any] | None = None,
    notes: Sequence[EventRow] = (),
) -> list[Event] | None:
    """Append several events atomically (an assistant turn with its tool calls, say).

    Each item: ``kind`` and optionally ``content``, ``payload``, ``tool_use_id``, ``run``.
    ``seq`` is per session and never reused, even after retention pruned older rows.
    With a ``lease`` the events are written only while it holds (checked under the row lock
    in the same transaction as the insert); None means the lease was lost and nothing was
    written. ``prune``: apply ``ENTRY_RETENTION`` (once a run: the run's first model turn).
    ``session_fields``: more of the session row to write in the UPDATE that reserves the seqs
    (``runstate.seq_allocate``). ``notes``: earlier events of the window with a new payload
    (``EventRow.with_payload``: the step context stored with the turn it was sent with),
    written in the same transaction, the edit version moving in the same UPDATE.
    """
    if not items:
        return [] if lease is None or lease.holds() else None
    fields = dict(session_fields or {})
    if notes:
        fields.update(runstate.edit_version_bump())
    # No savepoint of its own inside a caller's transaction: an error rolls back the caller's.
    with db.atomic(savepoint=False):
        allocated = runstate.seq_allocate(
            session_id=session_id, count=len(items), lease=lease, fields=fields
        )
        if allocated is None:
            return None
        first_seq, run_seq, edit_version = allocated
        now = timezone.now()
        events = [
            Event(
                session_id=session_id,
                seq=first_seq + i,
                kind=item["kind"],
                content=item.get("content", "") or "",
                payload=item.get("payload") or {},
                tool_use_id=item.get("tool_use_id", "") or "",
                run=item.get("run", run_seq),
                token_count=event_token_count(item),
                created_at=now,
            )
            for i, item in enumerate(items)
        ]
        _insert(Event, events)
        written = [_as_row(event) for event in events]
        db.on_commit(lambda: window.windows.appended(session_id, written))
        for note in notes:
            Event.objects.filter(pk=note.pk, session_id=session_id).update(payload=note.payload)
        if notes:
            changed = {note.pk: note for note in notes}
            db.on_commit(
                lambda: window.windows.rewritten(session_id, after=edit_version, rows=changed)
            )
        retention = ahentic_settings.ENTRY_RETENTION
        last = first_seq + len(items) - 1
        if prune and retention and last > retention:
            events_prune(session_id=session_id, through_seq=last - retention)
    return events


def _as_row(event: Event) -> EventRow:
    """The ``EventRow`` of an event just written, as a read would give it (its payload as the
    database's JSON holds it)."""
    return EventRow(
        event.pk,
        Session._meta.pk.to_python(event.session_id),
        event.seq,
        event.kind,
        event.content,
        json.loads(json.dumps(event.payload)),
        event.tool_use_id,
        event.run,
        event.token_count,
    )


def _insert(model, instances: list) -> None:
    """Insert new ``instances`` of ``model`` (events or trace rows: ``(session, seq)`` is
    unique) with their keys set: ``bulk_create`` returns them where the database can (not
    MySQL/MariaDB), else they are read back from the write database by seq."""
    model.objects.bulk_create(instances)
    if instances[0].pk is not None:
        return
    keys = (
        db.primary(model)
        .filter(
            session_id=instances[0].session_id,
            seq__gte=instances[0].seq,
            seq__lte=instances[-1].seq,
        )
        .order_by("seq")
        .values_list("pk", flat=True)
    )
    for obj, key in zip(instances, keys, strict=True):
        obj.pk = key


def event_token_count(item: dict[str, Any]) -> int:
    """What an event adds to a model request, estimated once when it is written: its words,
    or for a tool call the tool_use block (name and input) the request carries."""
    if item["kind"] == Event.Kind.TOOL_CALL:
        payload = item.get("payload") or {}
        return tool_use_tokens(payload.get("tool"), payload.get("input") or {})
    payload = item.get("payload") or {}
    blocks = payload.get("blocks")
    if blocks:  # an assistant turn stored whole (thinking, server tools): all of it is sent
        return sum(block_tokens(block) for block in blocks)
    # Attached images and PDFs (``attachments.ref``) count as the model counts them.
    attached = sum(int(a.get("tokens") or 1) for a in payload.get("attachments", ()))
    return estimate_tokens(item.get("content", "") or "") + attached


def events_prune(*, session_id, through_seq: int) -> int:
    """Delete events up to ``through_seq`` that a memory snapshot covers (``ENTRY_RETENTION``).

    An event no snapshot covers yet is kept however old it is: memory never loses history.
    Snapshots cover the session's events from the first one on, without gaps, up to the
    newest ``to_event_id`` (folds keep the range), so one bound decides. ``QuerySet.delete``:
    one DELETE while nothing watches the rows (a host's ``pre_delete``/``post_delete``
    receivers for ``Event`` are sent as for any delete). The edit version moves when rows
    went, so workers keeping the window read it again.
    """
    covered = (  # the newest event a snapshot covers
        Snapshot.objects.filter(session_id=session_id)
        .order_by("-to_event_id")
        .values("to_event_id")[:1]
    )
    with db.atomic(savepoint=False):
        deleted, _ = Event.objects.filter(
            session_id=session_id, seq__lte=through_seq, pk__lte=covered
        ).delete()
        if deleted:
            runstate.history_rewritten(session_id=session_id)
    return deleted


def event_append(
    *,
    session_id,
    kind: str,
    content: str = "",
    payload: dict[str, Any] | None = None,
    tool_use_id: str = "",
    run: int | None = None,
    prune: bool = False,
) -> Event:
    item: dict[str, Any] = {
        "kind": kind,
        "content": content,
        "payload": payload,
        "tool_use_id": tool_use_id,
    }
    if run is not None:
        item["run"] = run
    events = events_append(session_id=session_id, items=[item], prune=prune)
    assert events  # without a lease an append always writes
    return events[0]


@dataclass
class TraceItem:
    """One trace record before it is written (``TraceBuffer`` keeps a step's in memory)."""

    type: str
    summary: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    step: int | None = None
    run: int | None = None
    ms: int = field(default_factory=lambda: int(time.time() * 1000))
    at: datetime = field(default_factory=timezone.now)


def trace_record(
    *,
    session_id,
    type: str,
    summary: str = "",
    data: dict[str, Any] | None = None,
    step: int | None = None,
    run: int | None = None,
) -> TraceEvent:
    """Record one trace event now (requests, admin actions, background tasks)."""
    item = TraceItem(type=type, summary=summary, data=data or {}, step=step, run=run)
    return trace_records(session_id=session_id, items=[item])[0]


def trace_records(
    *,
    session_id,
    items: Sequence[TraceItem],
    counted: tuple[int, int, int] | None = None,
) -> list[TraceEvent]:
    """Write trace events in one transaction and apply the cap rule once.

    Cap rule: keep the first ``TRACE_HEAD`` rows, the newest rows, and one ``trace_gap`` row
    between them whose ``data.dropped`` is cumulative, so a stuck run never deletes its own
    cause. ``Session.trace_count`` counts every event ever recorded and never goes down; trace
    rows are numbered 1..trace_count, so the dropped rows are always one contiguous range
    right after the head and the cap is kept with arithmetic instead of scanning the rows.
    Trace rows are bookkeeping: they do not change the session's version (ETag).

    ``counted``: what ``runstate.trace_count_next`` returns, when the caller already counted
    the items in a write of its own (a step's lease hand-over), in this transaction.
    """
    if not items:
        return []
    with db.atomic(savepoint=False):
        last, run_seq, step_count = counted or runstate.trace_count_next(
            session_id=session_id, count=len(items)
        )
        first = last - len(items) + 1
        rows = [
            TraceEvent(
                session_id=session_id,
                seq=first + i,
                run=run_seq if item.run is None else item.run,
                type=item.type,
                step=step_count if item.step is None else item.step,
                summary=(item.summary or "")[:500],
                data=item.data,
                ms=item.ms,
                at=item.at,
            )
            for i, item in enumerate(items)
        ]
        _insert(TraceEvent, rows)
        if last > ahentic_settings.TRACE_CAP:
            _trace_collapse(session_id, last)
    return rows


def _trace_collapse(session_id, last_seq: int) -> None:
    """Apply the cap after rows up to ``last_seq`` were written (once the cap is reached, every
    step of a long session runs it)."""
    cap, head = ahentic_settings.TRACE_CAP, ahentic_settings.TRACE_HEAD
    keep_tail = cap - head - 1  # the gap row takes one slot
    drop_to = last_seq - keep_tail  # drop ordinary rows head < seq <= drop_to
    if drop_to <= head:
        return
    trace = db.primary(TraceEvent).filter(session_id=session_id)
    gap = trace.filter(type=TraceEvent.GAP).order_by("seq").values_list("pk", "seq", "data").first()
    if gap is not None and gap[1] >= drop_to:
        return
    dropped = trace.filter(seq__gt=head, seq__lte=drop_to).exclude(type=TraceEvent.GAP)
    deleted = dropped.delete()[0]
    total = (int((gap[2] or {}).get("dropped", 0)) if gap else 0) + deleted
    summary = f"{total} events dropped (trace cap)"
    if gap is not None:
        # The gap moves to the newest dropped position so it always sorts between head and tail.
        trace.filter(pk=gap[0]).update(seq=drop_to, summary=summary, data={"dropped": total})
    else:
        TraceEvent.objects.create(
            session_id=session_id,
            seq=drop_to,
            run=0,
            type=TraceEvent.GAP,
            step=0,
            summary=summary,
            data={"dropped": total},
            ms=int(time.time() * 1000),
            at=timezone.now(),
        )


class TraceBuffer:
    """The trace records of one worker step, kept in memory and written together by ``flush``
    (one transaction instead of one per record). A step flushes before it hands the session to
    anything else that traces, and when it ends; a worker killed mid-step loses its buffer."""

    def __init__(self, session_id, run: int):
        self.session_id = session_id
        self.run = run
        self.items: list[TraceItem] = []

    def add(self, type: str, summary: str = "", **data: Any) -> None:
        self.items.append(TraceItem(type=type, summary=summary, data=data, run=self.run))

    def flush(self, counted: tuple[int, int, int] | None = None) -> None:
        """Write the records; ``counted`` as for ``trace_records``."""
        items, self.items = self.items, []
        trace_records(session_id=self.session_id, items=items, counted=counted)


def pending_message_add(
    *,
    session_id,
    content: str,
    source_type: str = PendingMessage.SourceType.USER,
    source_name="",
    attachments: list[dict[str, Any]] | None = None,
) -> PendingMessage:
    with db.atomic():
        pending = PendingMessage.objects.create(
            session_id=session_id,
            content=content,
            source_type=source_type,
            source_name=source_name,
            attachments=attachments or [],
        )
        runstate.session_update(session_id=session_id)
    return pending


def pending_message_recall(*, session_id, pending_id: int) -> bool:
    """Withdraw a pending message; False once it was promoted (or never existed). Its
    attachments are unsent again: a later message may take them."""
    with db.atomic():
        pending = PendingMessage.objects.filter(session_id=session_id, pk=pending_id)
        refs = [r["id"] for row in pending.values_list("attachments", flat=True) for r in row or []]
        deleted, _ = pending.delete()
        if deleted:
            if refs:
                Attachment.objects.filter(session_id=session_id, pk__in=refs).update(sent=False)
            runstate.session_update(session_id=session_id)
    return bool(deleted)


def session_delete(*, session_id) -> None:
    """Delete a session with its children, events, trace and artifacts (database cascade)."""
    runstate.parent_bump(session_id)
    runstate.session_rows_delete(session_id)


def session_trash(*, session_id, at: datetime) -> bool:
    """The owner deleted the chat: hidden at once with its sub-agents' chats, its rows kept
    until ``session_purge`` (an undo restores it). False when it is gone or deleted already."""
    return runstate.session_trash(session_id, at=at)


def session_restore(*, session_id, deleted_since: datetime) -> bool:
    """Undo ``session_trash`` for a chat deleted at or after ``deleted_since`` (with the
    sub-agent chats that delete took; never a sub-agent chat whose parent is deleted)."""
    return runstate.session_untrash(session_id, deleted_since=deleted_since)


def sessions_purge(*, deleted_before: datetime) -> int:
    """Delete, with all they hold, the chats their owners deleted before ``deleted_before``.
    Each is deleted under its row lock only if it is still deleted then (a restore may win).
    A sub-agent chat whose parent is deleted too goes with its parent (the cascade). Returns
    how many went."""
    due = Session.objects.filter(deleted_at__lt=deleted_before).filter(
        Q(parent__isnull=True) | Q(parent__deleted_at__isnull=True)
    )
    ids = list(due.values_list("pk", flat=True))
    return sum(runstate.session_rows_delete(pk, deleted_before=deleted_before) for pk in ids)


def event_edit(*, event_id, content: str) -> bool:
    """A staff repair of what an event says (the admin's Event change form): its text and
    token estimate, and a visible change of its session (clients and the payload cache see a
    new version) that also moves its edit version, so every worker keeping the window reads it
    again: the next request to the model carries the edit. False when the event is gone."""
    with db.atomic():
        event = Event.objects.select_for_update().filter(pk=event_id).first()
        if event is None:
            return False
        item = {"kind": event.kind, "content": content, "payload": event.payload}
        Event.objects.filter(pk=event_id).update(
            content=content, token_count=event_token_count(item)
        )
        runstate.session_update(session_id=event.session_id, **runstate.edit_version_bump())
    return True


def events_supersede(*, session_id, from_seq: int, by_run: int) -> int:
    """Set the session's current events from ``from_seq`` on aside as an earlier attempt of
    run ``by_run`` (a retry or an edit, ``control.runs.attempt_start``): they stay in the
    transcript, marked, and are never sent to the model again. The caller holds the session's
    row lock in its transaction and has checked that no tool call among them is open (so no
    answer can arrive for a call set aside). The edit version moves, so every worker keeping
    the window reads it again; the events before ``from_seq`` are untouched, so the cached
    prefix of the next request is too. Returns how many events were set aside."""
    with db.atomic(savepoint=False):
        count = Event.objects.filter(
            session_id=session_id, seq__gte=from_seq, superseded_by__isnull=True
        ).update(superseded_by=by_run)
        runstate.session_update(session_id=session_id, **runstate.edit_version_bump())
    return count


def event_payload_merge(*, event: Event | EventRow, **values: Any) -> dict[str, Any]:
    """Merge bookkeeping keys into a tool call's payload (its ``started`` marker). What the
    event says is never rewritten. The caller is the event's only writer (the worker holding
    the session's lease), so the payload in hand is current and one UPDATE suffices. An
    ``EventRow`` is left as it is (rows are immutable: a worker keeping the window reads an
    open call again with the rows past it, see ``sessions_app.window``); an ``Event`` takes
    the new payload. Returns the new payload."""
    payload = {**(event.payload or {}), **values}
    if isinstance(event, Event):
        event.payload = payload
    Event.objects.filter(pk=event.pk).update(payload=payload)
    return payload


def goal_create(*, session_id, description: str, parent_id: int | None = None) -> Goal:
    """A goal, or a sub-goal of one of the session's root goals (two levels at most)."""
    with db.atomic():
        if parent_id is not None:
            parent = Goal.objects.filter(session_id=session_id, pk=parent_id).first()
            if parent is None:
                raise ValueError("goal_missing")
            if parent.parent_id is not None:
                raise ValueError("goal_too_deep")
        goal = Goal.objects.create(
            session_id=session_id, parent_id=parent_id, description=description
        )
        runstate.session_update(session_id=session_id)
    return goal


def goal_complete(*, session_id, goal_id: int) -> bool:
    """Complete an active goal (and its active sub-goals). False if there is no such goal."""
    now = timezone.now()
    with db.atomic():
        rows = Goal.objects.filter(
            session_id=session_id, pk=goal_id, status=Goal.Status.ACTIVE
        ).update(status=Goal.Status.COMPLETED, completed_at=now)
        if rows:
            Goal.objects.filter(
                session_id=session_id, parent_id=goal_id, status=Goal.Status.ACTIVE
            ).update(status=Goal.Status.COMPLETED, completed_at=now)
            runstate.session_update(session_id=session_id)
    return bool(rows)


def snapshot_add(
    *, session_id, level: int, from_event_id: int, to_event_id: int, text: str
) -> Snapshot | None:
    """Add a memory snapshot unless one already covers that range (a duplicate task)."""
    with db.atomic():
        Session.objects.select_for_update().filter(pk=session_id).exists()
        if Snapshot.objects.filter(session_id=session_id, to_event_id__gte=from_event_id).exists():
            return None
        snapshot = Snapshot.objects.create(
            session_id=session_id,
            level=level,
            from_event_id=from_event_id,
            to_event_id=to_event_id,
            text=text,
            token_count=estimate_tokens(text),
        )
        runstate.session_update(session_id=session_id)
    return snapshot


def snapshots_fold(*, session_id, snapshot_ids: list[int], text: str) -> Snapshot | None:
    """Replace snapshots by one level-2 snapshot covering the same range."""
    with db.atomic():
        Session.objects.select_for_update().filter(pk=session_id).exists()
        folded = list(
            Snapshot.objects.filter(session_id=session_id, pk__in=snapshot_ids).order_by(
                "from_event_id"
            )
        )
        if len(folded) != len(snapshot_ids):
            return None  # another task folded them already
        snapshot = Snapshot.objects.create(
            session_id=session_id,
            level=2,
            from_event_id=folded[0].from_event_id,
            to_event_id=folded[-1].to_event_id,
            text=text,
            token_count=estimate_tokens(text),
        )
        Snapshot.objects.filter(pk__in=snapshot_ids).delete()
        runstate.session_update(session_id=session_id)
    return snapshot
