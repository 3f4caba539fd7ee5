"""What a worker process keeps of the windows it read, so a step reads only what changed.

A step builds its request from the session's events from the window's start on. Reading them
all every step costs most of a long session's step, while between two steps only a few rows
are new. So each process keeps, per session, the rows it read (immutable ``EventRow``s) with
two numbers the session row carries:

- ``last_seq``: the newest event's seq (seqs are reserved under the session's row lock in the
  transaction that inserts them, so once a reader sees seq n, every seq below it is committed);
  a step reads only the rows past the newest it holds, and nothing when there are none;
- ``edit_version``: moved by every write that changes or deletes an event already written (an
  admin edit, retention pruning, the step context stored with an earlier turn). When it
  differs from the version the kept rows were read at, the window is read again whole.

One kind of change does not move ``edit_version``: the ``started`` note on a tool call while
it runs (``services.event_payload_merge``). A call is open until its answer is written, and
every read of new rows reads the open calls again in the same statement, so a kept call is as
current as the answer that closes it.

A worker also keeps the rows it appends itself when they directly follow the ones it holds, so
neither the rest of its step nor its next step reads them back.

The keeping is bounded (``MAX_SESSIONS`` windows and ``MAX_TOKENS`` of rows, by the rows'
token estimates; the least recently used go first) and per process: several workers each keep
their own, and each checks the two numbers it loaded with the session before it uses them.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from django.db.models import Q

from .models import Event, EventRow, Session, event_rows

# How many sessions' windows a process keeps, and how many of their rows in all, in stored
# token estimates (about 4 bytes of text each: 2,000,000 is about 8 MB of text, ten full
# windows at the default context budget).
MAX_SESSIONS = 64
MAX_TOKENS = 2_000_000


@dataclass(frozen=True)
class Kept:
    """A session's rows from ``from_id`` on (all of them when None), as of ``edit_version``,
    through the event of seq ``last_seq``."""

    edit_version: int
    from_id: int | None
    last_seq: int
    rows: tuple[EventRow, ...]
    tokens: int
    open_calls: tuple[int, ...]  # the pks of its tool calls without an answer among them


def open_calls(rows: list[EventRow] | tuple[EventRow, ...]) -> list[EventRow]:
    """The tool calls of ``rows`` (a session's events from some event on, by seq) without a
    tool_response among them: ``models.open_tool_call_rows`` over rows already read."""
    answered = {row.tool_use_id for row in rows if row.kind == Event.Kind.TOOL_RESPONSE}
    return [
        row for row in rows if row.kind == Event.Kind.TOOL_CALL and row.tool_use_id not in answered
    ]


def _kept(edit_version: int, from_id: int | None, rows: tuple[EventRow, ...], last_seq=0) -> Kept:
    calls = tuple(row.pk for row in open_calls(rows))
    last_seq = max(last_seq, rows[-1].seq if rows else 0)
    return Kept(edit_version, from_id, last_seq, rows, sum(r.token_count for r in rows), calls)


def _grown(kept: Kept, rows: tuple[EventRow, ...]) -> Kept:
    """``kept`` with ``rows`` (the next seqs) after its own, without going over the kept ones."""
    answered = {r.tool_use_id for r in rows if r.kind == Event.Kind.TOOL_RESPONSE}
    still_open = tuple(pk for pk in kept.open_calls if _call_id(kept, pk) not in answered) + tuple(
        r.pk for r in rows if r.kind == Event.Kind.TOOL_CALL and r.tool_use_id not in answered
    )
    return Kept(
        kept.edit_version,
        kept.from_id,
        rows[-1].seq,
        kept.rows + rows,
        kept.tokens + sum(r.token_count for r in rows),
        still_open,
    )


def _call_id(kept: Kept, pk: int) -> str:
    return next(r.tool_use_id for r in reversed(kept.rows) if r.pk == pk)


def _covers(kept: Kept, from_id: int | None) -> bool:
    if kept.from_id is None:
        return True
    return from_id is not None and from_id >= kept.from_id


class WindowCache:
    """The windows one process keeps (see the module's docstring)."""

    def __init__(self, max_sessions: int = MAX_SESSIONS, max_tokens: int = MAX_TOKENS):
        self.max_sessions, self.max_tokens = max_sessions, max_tokens
        self.kept: OrderedDict[Any, Kept] = OrderedDict()
        self.tokens = 0
        self.lock = threading.Lock()

    def clear(self) -> None:
        with self.lock:
            self.kept.clear()
            self.tokens = 0

    def get(self, session_id) -> Kept | None:
        with self.lock:
            return self.kept.get(session_id)

    def put(self, session_id, kept: Kept) -> None:
        with self.lock:
            old = self.kept.pop(session_id, None)
            if old is not None:
                self.tokens -= old.tokens
            self.kept[session_id] = kept
            self.tokens += kept.tokens
            while len(self.kept) > 1 and (
                len(self.kept) > self.max_sessions or self.tokens > self.max_tokens
            ):
                _, dropped = self.kept.popitem(last=False)
                self.tokens -= dropped.tokens

    def rows(
        self, session_id, *, edit_version: int, last_seq: int | None, from_id: int | None
    ) -> list[EventRow]:
        """The session's events from ``from_id`` on, by seq, as of the session row read with
        ``edit_version`` and ``last_seq`` (None: not known, the rows past the kept ones are
        read): from what this process kept when it can, reading only the rows past it (and the
        open calls) or, after an edit, the whole window. A new list on every call (the rows
        themselves are immutable)."""
        session_id = Session._meta.pk.to_python(session_id)  # a task passes it as text
        kept = self.get(session_id)
        if kept is None or kept.edit_version != edit_version or not _covers(kept, from_id):
            kept = _kept(edit_version, from_id, tuple(event_rows(session_id, from_id=from_id)))
            self.put(session_id, kept)
            return list(kept.rows)
        if from_id is not None and kept.from_id != from_id:  # the window's start moved on
            rows = tuple(r for r in kept.rows if r.pk >= from_id)
            kept = _kept(kept.edit_version, from_id, rows, kept.last_seq)
            self.put(session_id, kept)
        if last_seq is None or kept.last_seq < last_seq or kept.open_calls:
            kept = self._extend(session_id, kept)
        return list(kept.rows)

    def _extend(self, session_id, kept: Kept) -> Kept:
        """``kept`` with the rows past its newest and its open calls read again."""
        where = Q(seq__gt=kept.last_seq)
        if kept.open_calls:
            where |= Q(pk__in=kept.open_calls)
        found = event_rows(session_id, from_id=kept.from_id, where=where)
        fresh = {r.pk: r for r in found if r.seq <= kept.last_seq}
        if fresh:  # open calls read again (a call's ``started`` note): the same calls, still open
            kept = dataclasses.replace(kept, rows=tuple(fresh.get(r.pk, r) for r in kept.rows))
        new = tuple(r for r in found if r.seq > kept.last_seq)
        extended = _grown(kept, new) if new else kept
        self.put(session_id, extended)
        return extended

    def appended(self, session_id, rows: list[EventRow]) -> None:
        """This process appended ``rows`` (consecutive seqs, called once they committed): kept
        with the window when they directly follow its newest row (nobody appended between), so
        neither this step nor the next reads them back."""
        if not rows:
            return
        session_id = Session._meta.pk.to_python(session_id)
        kept = self.get(session_id)
        if kept is not None and kept.last_seq + 1 == rows[0].seq:
            self.put(session_id, _grown(kept, tuple(rows)))

    def rewritten(self, session_id, *, after: int, rows: dict[int, EventRow]) -> None:
        """This process changed ``rows`` (by pk) of the session's events and moved the edit
        version to ``after`` (read back under the row lock, called once that committed). When
        the kept rows are of the version just before it (nothing else moved it since they were
        read), they are kept with the changed rows, as of ``after``; else they are dropped."""
        session_id = Session._meta.pk.to_python(session_id)
        with self.lock:
            kept = self.kept.get(session_id)
            if kept is None:
                return
            self.tokens -= kept.tokens
            del self.kept[session_id]
        if kept.edit_version + 1 == after:
            new_rows = tuple(rows.get(r.pk, r) for r in kept.rows)
            self.put(session_id, _kept(after, kept.from_id, new_rows, kept.last_seq))


# The process's windows.
windows = WindowCache()
