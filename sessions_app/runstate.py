"""Run state: the only module that writes the session table.

Every writer here is one conditional UPDATE (or a short block holding the row lock). A write of
what the user sees (status, progress, pending tool, plan, messages, title...) bumps ``version``
(the REST ETag) and ``updated_at``; when it changes what a parent's payload shows of its
sub-agents (title, status, tokens), the parent's version is bumped too, so a parent's ETag moves
when a child pauses or finishes. Bookkeeping (the lease and heartbeat, step and trace counters,
token sums, contextUsage, the window start) is written without a bump: it reaches a watching
client with the next visible change, so a sidebar polling a live run gets 304s between them.

Writers called by a worker take a ``Lease``. Their UPDATE also requires the session to be
running in the lease's run with the lease's token, so a worker that lost its lease (a cancel, a
takeover after it stalled) writes nothing and learns it from the return value. Nothing here
calls the network or holds a lock beyond the statement or the caller's short transaction.

A test (``tests/architecture/test_architecture.py``) fails when any other module of the apps issues an
UPDATE on the session table.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Any

from django.db.models import Exists, F, OuterRef, Q, QuerySet, Value
from django.db.models.expressions import Combinable
from django.db.models.functions import Coalesce
from django.utils import timezone

from . import db
from .conf import ahentic_settings
from .models import STATUS_TRANSITIONS, LiveText, PendingMessage, Session

# What a parent's payload shows of each sub-agent (``children``). A write that changes one of
# these on a child bumps the parent's version (its ETag) too.
CHILD_SUMMARY_FIELDS = frozenset({"title", "status", "tokens_in", "tokens_out"})


@dataclass(frozen=True)
class Lease:
    """A worker's claim on one run of a session: "am I still the owner?" in every write."""

    session_id: Any
    run_seq: int
    token: str
    # Columns of the row as this worker last loaded or wrote them under the lease
    # (``lease_seen``): a write that returns them takes them as conditions of its UPDATE and
    # computes them, instead of reading them back (``_write_returning``).
    seen: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def guard(self) -> dict[str, Any]:
        """The conditions under which this lease still owns the row (running, same run, same
        token), as the run-state writers take them."""
        return {
            "pk": self.session_id,
            "status": Session.Status.RUNNING,
            "run_seq": self.run_seq,
            "lease_token": self.token,
        }

    def holding(self) -> QuerySet[Session]:
        """The session row, if this lease still owns it (``guard()`` as a queryset)."""
        return Session.objects.filter(**self.guard())

    def holds(self) -> bool:
        return self.holding().exists()


@dataclass
class PendingTool:
    """The tool call a paused run waits on (``Session.pending_tool``).

    Written when a run pauses for approval or the browser, or when the user picks an action;
    read by the decision endpoints, the step that resumes, the payload and the admin. The input
    keeps ``from_memory`` as a key: storage never holds an artifact's body.
    """

    name: str
    call_id: str
    input: dict[str, Any] = field(default_factory=dict)
    summary: str = ""
    # The tool as people read it (``Tool.human_label``); empty in rows paused before it existed.
    label: str = ""
    runtime: str = "server"
    # None until decided: allow_once | allow_session | always_allow | preallowed | user_action
    approved: str | None = None
    non_preallowable: bool = False
    paused_at: str | None = None
    artifact_key: str | None = None
    # Pointer fields of the staged artifact (never its body).
    memory: dict[str, Any] | None = None
    # The user's edit of the input in the approval card, used instead of ``input``.
    edited_input: dict[str, Any] | None = None
    # The fields the call changes, before -> after, for the card's diff (a preview's
    # ``Summary.changes``); None when the tool has no such preview.
    changes: list[dict[str, Any]] | None = None
    # The run's first step as a W3C ``traceparent`` (``telemetry.run_origin``): the step the
    # decision resumes links to it.
    trace: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> PendingTool | None:
        if not data:
            return None
        known = cls.__dataclass_fields__
        return cls(**{k: v for k, v in data.items() if k in known})

    def effective_input(self) -> dict[str, Any]:
        return self.edited_input if self.edited_input is not None else self.input


# --- the one write path ----------------------------------------------------------------------


@dataclass(frozen=True)
class Add:
    """A field value meaning ``column = column + amount`` (a NULL column counts as 0)."""

    amount: Any


def _write_returning(
    rows: QuerySet[Session] | dict[str, Any],
    session_id,
    fields: dict[str, Any],
    columns: tuple[str, ...] = (),
    *,
    visible: bool = True,
    summary_fields: frozenset[str] = CHILD_SUMMARY_FIELDS,
    seen: dict[str, Any] | None = None,
) -> tuple[Any, ...] | None:
    """UPDATE the (at most one) row ``rows`` selects with ``fields``; a ``visible`` write also
    bumps the version and the modification time (and the parent's version, see above).
    Returns ``columns`` of the row as written (read back from the write database: the caller
    holds the row lock when it needs them consistent), or None when no row matched.

    ``rows`` is the row's equality conditions (``Lease.guard()``, ``{"pk": ...}``) or a
    queryset (writers with other conditions). ``summary_fields``: the fields whose change a
    parent shows (its version moves with them).

    ``seen``: columns as the writer last knew them (``Lease.seen``). When they give the
    current value of every column asked for and of every column the write adds to, the UPDATE
    is conditional on those values and writes the sums as plain values: no read-back, and no
    expression to build. If another writer moved one meanwhile, that UPDATE matches nothing
    and the write is made as without ``seen`` (a column it added to without reading it back
    leaves ``seen``). Updated with what was written."""
    if visible:
        fields = {"version": Add(1), "updated_at": timezone.now(), **fields}
    written: tuple[Any, ...] | None = None
    if seen is not None and isinstance(rows, dict):
        known = _known_write(rows, seen, fields, columns)
        if known is not None:
            conditions, values, predicted = known
            if Session.objects.filter(**conditions).update(**values) == 1:
                written = predicted
    if written is None:
        values = {
            name: _orm_add(name, value.amount) if isinstance(value, Add) else value
            for name, value in fields.items()
        }
        if isinstance(rows, dict):
            rows = Session.objects.filter(**rows)
        if rows.update(**values) != 1:
            return None
        written = _read_back(session_id, columns) if columns else ()
        if seen is not None:
            for name, value in fields.items():
                if isinstance(value, Add) and name not in columns:
                    seen.pop(name, None)  # added to without reading the sum back
    if seen is not None:
        _seen_after(seen, fields, dict(zip(columns, written or (), strict=False)))
    if visible and summary_fields.intersection(fields):
        parent_bump(session_id)
    return written


def _written_value(base: Any, value: Any) -> Any:
    """A column's value after ``value`` (a plain value or an ``Add`` of a number) was written
    over ``base``; None when it cannot be told without reading (an expression)."""
    if isinstance(value, Add):
        if base is None or not isinstance(value.amount, int | float):
            return None
        return base + value.amount
    if hasattr(value, "resolve_expression"):
        return None
    return value


def _known_write(
    rows: dict[str, Any], seen: dict[str, Any], fields: dict[str, Any], columns: tuple[str, ...]
) -> tuple[dict[str, Any], dict[str, Any], tuple[Any, ...]] | None:
    """The write of ``fields`` where ``rows`` (the conditions) and ``seen`` tell the current
    value of every column returned: (the UPDATE's conditions, its values, ``columns`` as
    written); else None. An ``Add`` to a column whose value they tell is written as the sum
    (and that value joins the conditions); any other stays an expression."""
    conditions = dict(rows)
    values: dict[str, Any] = {}
    for name, value in fields.items():
        if isinstance(value, Add):
            base = rows[name] if name in rows else seen.get(name)
            summed = _written_value(base, value)
            if summed is None:
                value = _orm_add(name, value.amount)
            else:
                conditions.setdefault(name, base)
                value = summed
        values[name] = value
    predicted = []
    for name in columns:
        base = rows[name] if name in rows else seen.get(name)
        if base is None:
            return None
        conditions.setdefault(name, base)
        value = _written_value(base, fields[name]) if name in fields else base
        if value is None:
            return None
        predicted.append(value)
    return conditions, values, tuple(predicted)


def _seen_after(seen: dict[str, Any], fields: dict[str, Any], written: dict[str, Any]) -> None:
    """Bring ``seen`` up to date with a write of ``fields`` that returned ``written``."""
    for name in list(seen):
        if name in written:
            seen[name] = written[name]
        elif name in fields:
            value = _written_value(seen[name], fields[name])
            if value is None:
                del seen[name]
            else:
                seen[name] = value


def lease_seen(lease: Lease, session: Session) -> None:
    """Note the columns a step's writes return (its seqs, its trace count) as it loaded the
    session under ``lease``, so those writes compute them (``_write_returning``), and its
    version: while only the lease's own writes moved it, ``lease.seen["version"]`` is the
    row's (``only_lease_wrote``)."""
    lease.seen.update(
        version=session.version,
        last_seq=session.last_seq,
        edit_version=session.edit_version,
        trace_count=session.trace_count,
        step_count=session.step_count,
    )


def _read_back(session_id, columns: tuple[str, ...]) -> tuple[Any, ...] | None:
    """``columns`` of the row, from the write database (a write's read-back: Django has no
    ``UPDATE ... RETURNING``; the prediction's refresh); None when there is no such row."""
    return db.primary(Session).filter(pk=session_id).values_list(*columns).first()


def _orm_add(name: str, amount: Any) -> Combinable:
    """``name + amount`` (a value or an expression), a NULL column counting as 0."""
    field = Session._meta.get_field(name)
    if not hasattr(amount, "resolve_expression"):
        amount = Value(amount, output_field=field)
    return Coalesce(F(name), Value(0), output_field=field) + amount


def _write(
    rows: QuerySet[Session] | dict[str, Any],
    session_id,
    fields: dict[str, Any],
    *,
    visible: bool = True,
    seen: dict[str, Any] | None = None,
) -> bool:
    """``_write_returning`` without columns: whether the row was written."""
    return _write_returning(rows, session_id, fields, visible=visible, seen=seen) is not None


def parent_bump(session_id) -> None:
    """Bump the version of ``session_id``'s parent, if it has one (one UPDATE either way).

    Lock order: the child's row, then its parent's. A transaction must never lock a parent
    and then one of its children, or it can deadlock against this.
    """
    Session.objects.filter(children__pk=session_id).update(version=F("version") + 1)


def descendant_ids(session_id) -> list:
    """The ids of the chat's sub-agents, theirs, and so on (one query per level; the depth is
    bounded by ``SUBAGENT_MAX_DEPTH``)."""
    found: list = []
    level = [session_id]
    while level:
        level = list(Session.objects.filter(parent_id__in=level).values_list("pk", flat=True))
        found += level
    return found


def session_trash(session_id, *, at) -> bool:
    """Mark the chat and every sub-agent chat under it deleted at ``at`` (hidden from their
    owner's routes, restorable until the purge): the same ``deleted_at`` on the whole tree, so
    every check of ``deleted_at`` (``Session.objects.for_user``, the poll, an upload) refuses
    a sub-agent's chat of a deleted chat too, and the undo knows what this delete took. Not a
    visible change: the payload does not show it, and a restore puts the chat back in its
    place in the list (a sub-agent's chat leaves its parent's list: the parent's version
    moves). False when it is gone or deleted already.

    The chat's row and its sub-agents' rows are written by separate statements, not in one
    transaction: holding a parent's row while writing its children breaks the lock order of
    ``parent_bump`` (child, then parent). A sub-agent spawned between the two is caught by
    ``spawn_subagent``, which re-reads its parent after creating the child."""
    rows = Session.objects.filter(pk=session_id, deleted_at__isnull=True)
    if not _write(rows, session_id, {"deleted_at": at}, visible=False):
        return False
    parent_bump(session_id)  # a sub-agent's chat leaves its parent's list of them
    below = descendant_ids(session_id)
    if below:
        Session.objects.filter(pk__in=below, deleted_at__isnull=True).update(deleted_at=at)
    return True


def session_untrash(session_id, *, deleted_since) -> bool:
    """Undo ``session_trash`` if the chat was deleted at or after ``deleted_since`` (inside the
    undo window), with the sub-agent chats that delete took (those marked at the same time; one
    deleted on its own before stays deleted). Never a sub-agent chat whose parent is deleted:
    the parent's undo brings it back. False when it is not deleted, gone, deleted before that,
    or its parent is deleted."""
    at = (
        Session.objects.filter(pk=session_id, deleted_at__gte=deleted_since)
        .filter(Q(parent__isnull=True) | Q(parent__deleted_at__isnull=True))
        .values_list("deleted_at", flat=True)
        .first()
    )
    if at is None:
        return False
    rows = Session.objects.filter(pk=session_id, deleted_at=at)
    if not _write(rows, session_id, {"deleted_at": None}, visible=False):
        return False
    parent_bump(session_id)
    below = descendant_ids(session_id)
    if below:
        Session.objects.filter(pk__in=below, deleted_at=at).update(deleted_at=None)
    return True


def session_rows_delete(session_id, *, deleted_before=None) -> bool:
    """Delete the session's row with its sub-agents and all that grows with them (cascade).
    Here because it writes the session table: on MySQL, Django's collector first clears the
    sub-agents' ``parent`` (an UPDATE) before it deletes them.

    The rows are locked first, in the same transaction: a write that adds a row pointing at
    the session under its lock (an upload's attachments) waits for the delete and then finds
    no session, instead of inserting a row the collector did not see (a foreign-key error).

    ``deleted_before``: only a chat its owner deleted before then (the purge; a restore that
    won the lock keeps it). Returns whether the row was deleted."""
    with db.atomic():
        locked = list(
            Session.objects.select_for_update()
            .filter(Q(pk=session_id) | Q(parent_id=session_id))
            .values_list("pk", flat=True)
        )
        rows = Session.objects.filter(pk=session_id)
        if deleted_before is not None:
            rows = rows.filter(deleted_at__lt=deleted_before)
        return bool(locked) and rows.delete()[0] > 0


def session_update(*, session_id, **fields: Any) -> bool:
    """Write plain fields (no status change) and bump the version."""
    return _write({"pk": session_id}, session_id, fields)


def agent_version_set(session_id, version_id, from_version_id=None) -> bool:
    """Pin the session to agent version ``version_id`` ("move this chat to the latest
    version"): never while a run is live (a run keeps the version it started with), and with
    ``from_version_id`` only from the version the caller saw. False when a condition failed or
    the session is gone."""
    rows = Session.objects.filter(pk=session_id).exclude(status__in=Session.LIVE)
    if from_version_id is not None:
        rows = rows.filter(agent_version_id=from_version_id)
    return _write(rows, session_id, {"agent_version_id": version_id})


def spend_cap_set(*, session_id, cap, from_cap) -> bool:
    """Set the chat's own spend cap (``Session.spend_cap_usd``; None: its agent's), only if it
    is still ``from_cap``, the value the writer read (a staff edit, a "continue past the cap"):
    False when someone changed it meanwhile or the session is gone. A live run reads it at its
    next step."""
    rows = Session.objects.filter(pk=session_id)
    if from_cap is None:
        rows = rows.filter(spend_cap_usd__isnull=True)
    else:
        rows = rows.filter(spend_cap_usd=from_cap)
    return _write(rows, session_id, {"spend_cap_usd": cap})


def session_modify(*, session_id, compute: Callable[[Session], dict[str, Any] | None]) -> Any:
    """Read-modify-write under the row lock: ``compute(session)`` returns the fields to write
    (or None for no change). Returns the locked session as it was read."""
    with db.atomic():
        session = Session.objects.select_for_update().get(pk=session_id)
        fields = compute(session)
        if fields:
            _write({"pk": session_id}, session_id, fields)
    return session


def _check_transitions(from_statuses: Iterable[str], to_status: str) -> list[str]:
    sources = list(from_statuses)
    illegal = [s for s in sources if to_status not in STATUS_TRANSITIONS[s]]
    if illegal:
        raise ValueError(f"No transition {illegal} -> {to_status} in STATUS_TRANSITIONS")
    return sources


def session_transition(
    *, session_id, from_statuses: Iterable[str], to_status: str, **fields: Any
) -> bool:
    """Move a session between statuses in one conditional UPDATE.

    Returns False when the session was not in ``from_statuses`` (someone else won the race);
    the caller then does nothing.
    """
    sources = _check_transitions(from_statuses, to_status)
    rows = Session.objects.filter(pk=session_id, status__in=sources)
    return _write(rows, session_id, {"status": to_status, **fields})


def session_rename_auto(*, session_id, title: str, named_at_messages: int) -> bool:
    """An automatic title; never replaces one the user set (conditional UPDATE)."""
    rows = Session.objects.filter(pk=session_id).exclude(title_source=Session.TitleSource.USER)
    fields = {
        "title": title[:255],
        "title_source": Session.TitleSource.AUTO,
        "named_at_messages": named_at_messages,
    }
    return _write(rows, session_id, fields)


# --- the worker's reads of the row -------------------------------------------------------------


def session_load(
    session_id, *, queued: bool = False, annotations: dict[str, Any] | None = None
) -> Session:
    """The session with its owner (one query, on the write database: a worker acts on it);
    with ``queued``, also whether messages wait in the queue (``has_queued``), and with
    ``annotations`` (expressions by name), those too, in the same query. Raises
    ``Session.DoesNotExist``."""
    sessions = db.primary(Session).select_related("owner")
    if annotations:
        sessions = sessions.annotate(**annotations)
    if queued:
        waiting = PendingMessage.objects.filter(session_id=OuterRef("pk"))
        sessions = sessions.annotate(has_queued=Exists(waiting))
    return sessions.get(pk=session_id)


def session_refresh(session: Session, names: Sequence[str]) -> None:
    """Read ``names`` of the session's row again into ``session`` (as ``refresh_from_db``)."""
    names = tuple(names)
    values = _read_back(session.pk, names)
    if values is None:
        raise Session.DoesNotExist(f"Session {session.pk} does not exist.")
    for name, value in zip(names, values, strict=True):
        setattr(session, Session._meta.get_field(name).attname, value)


# --- counters ----------------------------------------------------------------------------------


def only_lease_wrote(lease: Lease, version: int, loaded: int) -> bool:
    """Whether the row's ``version`` (read under or after ``lease``) moved from ``loaded`` only
    by the lease's own writes: every visible write adds one to the version, and the lease
    counts its own in ``seen`` (a write by anyone else makes the row's version the greater)."""
    return lease.seen.get("version") == version and version >= loaded


def seq_allocate(
    *, session_id, count: int, lease: Lease | None = None, fields: dict[str, Any] | None = None
) -> tuple[int, int, int] | None:
    """Reserve ``count`` event seqs; returns (first seq, run_seq, edit_version as written).
    Caller is inside a transaction: the UPDATE locks the row until it commits. With a lease,
    nothing is reserved (None) once the lease is lost, so a turn is never saved after a cancel
    committed. ``fields``: more of the row to write in the same UPDATE (``usage_sums``,
    ``answered_fields``, ``edit_version_bump``: what goes with these events)."""
    rows = lease.guard() if lease is not None else {"pk": session_id}
    written = _write_returning(
        rows,
        session_id,
        {**(fields or {}), "last_seq": Add(count)},
        ("last_seq", "run_seq", "edit_version"),
        # What rides along is bookkeeping for a parent (a turn's usage sums, as ``usage_add``
        # writes them): it sees them with the child's next change of title or status.
        summary_fields=CHILD_SUMMARY_FIELDS - frozenset(fields or ()),
        seen=lease.seen if lease is not None else None,
    )
    if written is None:
        return None
    last_seq, run_seq, edit_version = written
    return last_seq - count + 1, run_seq, edit_version


def edit_version_bump() -> dict[str, Any]:
    """The field that tells workers keeping a window's rows to read them again
    (``sessions_app.window``): for the write that changes or deletes events already written."""
    return {"edit_version": Add(1)}


def history_rewritten(*, session_id) -> None:
    """Move the edit version alone (bookkeeping: what the user sees did not change), after
    events were deleted or changed outside a write of the row that could carry it."""
    _write({"pk": session_id}, session_id, edit_version_bump(), visible=False)


def trace_count_next(*, session_id, count: int = 1) -> tuple[int, int, int]:
    """Count ``count`` more trace records; returns (the last one's seq, run_seq, step_count).
    Caller is inside a transaction (the row stays locked until the trace rows are written)."""
    fields = {"trace_count": Add(count)}
    columns = ("trace_count", "run_seq", "step_count")
    written = _write_returning({"pk": session_id}, session_id, fields, columns, visible=False)
    if written is None:
        raise Session.DoesNotExist(f"Session {session_id} does not exist.")
    return written


def usage_sums(
    *,
    input_tokens: int,
    output_tokens: int,
    cache_read_tokens: int,
    cache_write_tokens: int,
    cost,
    step_count: int | None = None,
) -> dict[str, Any]:
    """The session's running sums one model call adds to (the UsageRecord ledger is the
    truth), with the step's number when given: fields for ``usage_add`` or, written with the
    turn they paid for, ``seq_allocate``."""
    fields: dict[str, Any] = {
        "tokens_in": Add(input_tokens + cache_read_tokens + cache_write_tokens),
        "tokens_out": Add(output_tokens),
        "cache_read_tokens": Add(cache_read_tokens),
        "cache_write_tokens": Add(cache_write_tokens),
    }
    if step_count is not None:
        fields["step_count"] = step_count
    if cost is not None:
        fields["cost_usd"] = Add(cost)  # the first priced call starts the sum (NULL) at 0
    return fields


def usage_add(*, session_id, **usage: Any) -> None:
    """Add one model call to the session's running sums (``usage_sums``)."""
    _write({"pk": session_id}, session_id, usage_sums(**usage), visible=False)


def capability_request_add(*, session_id, ability: str, reason: str = "") -> None:
    """Note a missing tool or permission once per ability (the payload lists them)."""

    def compute(session: Session) -> dict[str, Any] | None:
        requests = list(session.capability_requests or [])
        if any(r.get("ability") == ability for r in requests):
            return None
        requests.append({"ability": ability, "reason": reason, "at": timezone.now().isoformat()})
        return {"capability_requests": requests}

    session_modify(session_id=session_id, compute=compute)


def _progress(label: str, now=None) -> dict[str, str]:
    # One timestamp format in the API: UTC with "Z".
    return {"label": label, "updatedAt": (now or timezone.now()).isoformat().replace("+00:00", "Z")}


# --- runs: begin, pause, resume ----------------------------------------------------------------


def run_begin(*, session_id, from_statuses, label: str = "Thinking…", **fields: Any) -> int | None:
    """The new-run transition (a message, queued messages, an action): run_seq + 1, counters
    and error state reset, no lease yet. Returns the new run_seq, or None when the session was
    not in ``from_statuses``. Caller holds a transaction and enqueues the step."""
    now = timezone.now()
    if not session_transition(
        session_id=session_id,
        from_statuses=from_statuses,
        to_status=Session.Status.RUNNING,
        run_seq=Add(1),
        step_count=0,
        last_error="",
        last_error_code="",
        job_resumable=False,
        heartbeat_at=now,
        lease_token="",
        lease_expires_at=None,
        progress=_progress(label, now),
        content_work=False,
        **fields,
    ):
        return None
    return db.primary(Session).filter(pk=session_id).values_list("run_seq", flat=True).get()


def run_resume(
    *, session_id, from_statuses: Iterable[str], label: str = "Thinking…", **fields: Any
) -> bool:
    """Back to ``running`` in the same run with no lease, so the enqueued step can claim it:
    a pause ends (a decision, a browser result, a browser timeout) or a resumable job goes on.
    False when another answer got there first. Caller holds a transaction and enqueues."""
    now = timezone.now()
    return session_transition(
        session_id=session_id,
        from_statuses=from_statuses,
        to_status=Session.Status.RUNNING,
        heartbeat_at=now,
        lease_token="",
        lease_expires_at=None,
        progress=_progress(label, now),
        **fields,
    )


def run_stop(*, session_id, from_statuses: Iterable[str], to_status: str, **fields: Any) -> bool:
    """Leave a live status without a worker's lease (cancel, a redirect while awaiting
    approval): the lease, progress and pending tool are dropped."""
    return session_transition(
        session_id=session_id,
        from_statuses=from_statuses,
        to_status=to_status,
        pending_tool=None,
        progress=None,
        lease_token="",
        lease_expires_at=None,
        **fields,
    )


# --- the worker's lease ------------------------------------------------------------------------


def lease_is_stale(session: Session, now=None) -> bool:
    """A running session nobody works on: its lease expired, or no worker claimed it in time."""
    now = now or timezone.now()
    if session.lease_token:
        return session.lease_expires_at is None or session.lease_expires_at < now
    last = session.heartbeat_at or session.updated_at
    return last is None or last < now - timedelta(seconds=int(ahentic_settings.RUN_LEASE_S))


def _lease_deadline(now):
    return now + timedelta(seconds=int(ahentic_settings.RUN_LEASE_S))


def run_claim(*, session_id, run_seq: int) -> Lease | None:
    """Take the session's lease with one conditional UPDATE; None if someone else has it."""
    token = uuid.uuid4().hex
    now = timezone.now()
    free = Q(lease_token="") | Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=now)
    rows = Session.objects.filter(
        free, pk=session_id, status=Session.Status.RUNNING, run_seq=run_seq
    )
    fields = {"lease_token": token, "lease_expires_at": _lease_deadline(now), "heartbeat_at": now}
    if rows.update(**fields) != 1:
        return None
    return Lease(session_id=session_id, run_seq=run_seq, token=token)


def lease_refresh(lease: Lease) -> bool:
    """Extend the lease and the heartbeat. False once the run was cancelled or taken over.

    A running tool is covered by ``orchestrator_app.loop.pipeline.LeaseHeartbeat`` (a thread
    calling this).
    """
    now = timezone.now()
    fields = {"lease_expires_at": _lease_deadline(now), "heartbeat_at": now}
    return _write(lease.guard(), lease.session_id, fields, visible=False, seen=lease.seen)


def lease_release(
    lease: Lease, *, context_usage: dict[str, Any] | None = None, trace_records: int = 0
) -> tuple[int, int, int] | None:
    """Hand the run to a fresh step: the run stays ``running`` with no lease (and the step's
    predicted ``context_usage``, when given). Counts the step's ``trace_records`` in the same
    UPDATE and returns what ``trace_count_next`` would (None once the lease is lost: nothing
    was written). Caller holds a transaction, writes the trace rows and enqueues the next
    step."""
    fields: dict[str, Any] = {
        "lease_token": "",
        "lease_expires_at": None,
        "heartbeat_at": timezone.now(),
        "trace_count": Add(trace_records),
    }
    if context_usage is not None:
        fields["context_usage"] = context_usage
    columns = ("trace_count", "run_seq", "step_count")
    return _write_returning(
        lease.guard(), lease.session_id, fields, columns, visible=False, seen=lease.seen
    )


def viewport_move(lease: Lease, start_event_id: int) -> bool:
    """Move the context window's start (batch eviction)."""
    fields = {"viewport_start_event_id": start_event_id}
    return _write(lease.guard(), lease.session_id, fields, visible=False, seen=lease.seen)


def progress_set(lease: Lease, label: str) -> bool:
    """The worker's progress label; also a heartbeat that extends the lease."""
    now = timezone.now()
    fields = {
        "progress": _progress(label, now),
        "heartbeat_at": now,
        "lease_expires_at": _lease_deadline(now),
    }
    return _write(lease.guard(), lease.session_id, fields, seen=lease.seen)


def answered_fields(*, clear_pending: bool, plan: dict[str, Any] | None = None) -> dict[str, Any]:
    """What a tool call's answer changes on the row: its approval card is done when it was the
    pending call (``clear_pending``: while running only the lease holder changes the pending
    tool), the plan advances when given, and the model thinks next."""
    now = timezone.now()
    fields: dict[str, Any] = {"progress": _progress("Thinking…", now), "heartbeat_at": now}
    if clear_pending:
        fields["pending_tool"] = None
    if plan is not None:
        fields["plan"] = plan
    return fields


def call_answered(lease: Lease, *, clear_pending: bool, plan: dict[str, Any] | None = None) -> bool:
    """A tool call of the run is answered (``answered_fields``). Caller holds a transaction
    (with the tool_result), so a watching client sees one change."""
    fields = answered_fields(clear_pending=clear_pending, plan=plan)
    return _write(lease.guard(), lease.session_id, fields, seen=lease.seen)


def context_usage_predict(
    *, session_id, run_seq: int, step_count: int, context_usage: dict[str, Any], visible: bool
) -> bool:
    """``contextUsage`` as a step leaves it (the step may have ended the run and dropped its
    lease). Skipped once a later step of the run began or another run started, so an older
    prediction never replaces a newer one. Bookkeeping while the run goes on (it rides with
    the next visible change); ``visible`` once the run waits for the user, so the context ring
    is current then."""
    rows = {"pk": session_id, "run_seq": run_seq, "step_count": step_count}
    return _write(rows, session_id, {"context_usage": context_usage}, visible=visible)


def content_work_set(lease: Lease) -> bool:
    """Mark the lease's run as content work (raised step cap and output budget); once per run.
    ``run_begin`` clears it for the next run."""
    rows = {**lease.guard(), "content_work": False}
    return _write(rows, lease.session_id, {"content_work": True}, seen=lease.seen)


def pending_tool_clear(lease: Lease, call_id: str | None = None) -> bool:
    """Drop the pending tool (only if it is ``call_id``'s, when given): its card is done."""
    rows = lease.holding()
    if call_id is not None:
        rows = rows.filter(pending_tool__call_id=call_id)
    return _write(rows, lease.session_id, {"pending_tool": None}, seen=lease.seen)


def run_pause(lease: Lease, *, status: str, pending: PendingTool, label: str) -> bool:
    """Pause for the user (approval) or the browser; the lease is dropped."""
    now = timezone.now()
    fields: dict[str, Any] = {
        "status": status,
        "pending_tool": pending.to_json(),
        "lease_token": "",
        "lease_expires_at": None,
        "progress": _progress(label, now),
    }
    if status == Session.Status.AWAITING_BROWSER:
        fields["browser_paused_at"] = now
    _check_transitions([Session.Status.RUNNING], status)
    return _write(lease.guard(), lease.session_id, fields, seen=lease.seen)


def run_end(lease: Lease, *, to_status: str, **fields: Any) -> bool:
    """Leave ``running`` (idle, error) and drop the lease; progress is cleared."""
    _check_transitions([Session.Status.RUNNING], to_status)
    fields = {
        "status": to_status,
        "lease_token": "",
        "lease_expires_at": None,
        "progress": None,
        **fields,
    }
    return _write(lease.guard(), lease.session_id, fields, seen=lease.seen)


# --- live text: the reply being streamed ------------------------------------------------------


def live_text_set(lease: Lease, text: str) -> None:
    """The streamed text of the lease's current model call so far (not the session row: no
    version bump, no row lock). Readers show it only while the run is the lease's and running,
    so a write racing a cancel is never shown."""
    now = timezone.now()
    fields = {"run": lease.run_seq, "text": text, "updated_at": now}
    if not LiveText.objects.filter(session_id=lease.session_id).update(**fields):
        LiveText.objects.get_or_create(session_id=lease.session_id, defaults=fields)


def live_text_clear(session_id) -> None:
    """The call ended (its reply is an event now), failed or was cancelled."""
    LiveText.objects.filter(session_id=session_id).delete()
