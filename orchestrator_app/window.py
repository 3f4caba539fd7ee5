"""The rows of a step's window, kept by each worker process between steps.

Every step reads its whole window (up to the context budget: hundreds of events), and reading
and decoding them was the largest part of a step at 400 events. Most of those rows cannot
change any more, so a worker keeps them and reads only the rest:

- events are only appended (their ``seq`` and key grow together: appends to a session are
  serialized by its row lock), and retention deletes only events that left the window (a
  memory snapshot covers them);
- after it is written, an event changes in one way only: bookkeeping keys merged into its
  payload by the step holding the lease. That is the ``started`` marker of a tool call that
  has no answer yet (``pipeline.mark_started``), and the step context stored with the newest
  sent turn (``prompt.attach_context``).

So the rows before the newest sent event and before the first unanswered tool call are
stable. A worker keeps those of the sessions it served last (at most ``KEEP_TOKENS``) and reads
the events from the first row it does not keep in one query, the same count as reading the
whole window. Rows kept by a worker that did not serve the session's last steps stay valid for
the same reasons. Nothing here is shared between processes.

An event edited outside the app (by hand in the database, a data migration) reaches the
requests of a worker that kept it only once the worker restarts: restart the workers after
such an edit.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from sessions_app.models import EventRow, event_rows

from .prompt import SYSTEM_MESSAGE, TOOL_CALL, TOOL_RESPONSE

# How much a worker keeps in all, in the events' stored token estimates (about 4 bytes of text
# each); the least recently used session's rows go first. 2,000,000 tokens is about 8 MB of
# text: ten full windows at the default context budget (190,000 tokens), or hundreds of
# shorter chats.
KEEP_TOKENS = 2_000_000


@dataclass(frozen=True)
class _Kept:
    start: int  # the window start the rows were read from (event id, 0 for the first event)
    rows: tuple[EventRow, ...]  # every event of the session from ``start`` on, through ...
    through: int  # ... this event id: rows after it are read from the database
    tokens: int  # the rows' stored token estimates, summed


@dataclass
class _Keeper:
    """What this process keeps: sessions' stable rows, least recently used first."""

    sessions: OrderedDict = field(default_factory=OrderedDict)
    tokens: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def get(self, session_id) -> _Kept | None:
        with self.lock:
            return self.sessions.get(session_id)

    def put(self, session_id, kept: _Kept | None) -> None:
        """Keep ``kept`` for the session (None: keep nothing) as the most recently used."""
        with self.lock:
            old = self.sessions.pop(session_id, None)
            if old is not None:
                self.tokens -= old.tokens
            if kept is None or kept.tokens > KEEP_TOKENS:
                return
            self.sessions[session_id] = kept
            self.tokens += kept.tokens
            while self.tokens > KEEP_TOKENS:
                _, dropped = self.sessions.popitem(last=False)
                self.tokens -= dropped.tokens


_keeper = _Keeper()


def window_rows(session_id, start: int | None) -> list[EventRow]:
    """The session's events from event ``start`` on (all of them for None), by seq: the kept
    stable rows plus one query for the rest."""
    start = start or 0
    kept = _keeper.get(session_id)
    if kept is not None and kept.start <= start:
        stable, tokens = kept.rows, kept.tokens
        if start > kept.start:  # the window start moved on
            stable = tuple(row for row in stable if row.pk >= start)
            tokens = sum(row.token_count for row in stable)
        fresh = event_rows(session_id, after_id=max(kept.through, start - 1))
    else:
        stable, tokens, fresh = (), 0, event_rows(session_id, from_id=start)
    # Kept rows stay stable, so only the rows read now are looked at.
    now_stable = _stable_prefix(fresh)
    if stable or now_stable:
        rows = stable + tuple(now_stable)
        tokens += sum(row.token_count for row in now_stable)
        _keeper.put(session_id, _Kept(start, rows, rows[-1].pk, tokens))
    else:
        _keeper.put(session_id, None)
    return [*stable, *fresh]


def _stable_prefix(rows: list[EventRow]) -> list[EventRow]:
    """The rows before the newest sent one (system notes are not sent) and before the first
    tool call without an answer."""
    # The newest sent event may still get the step context (``prompt.context_carrier``).
    end = max((i for i, r in enumerate(rows) if r.kind != SYSTEM_MESSAGE), default=0)
    answered = {r.tool_use_id for r in rows if r.kind == TOOL_RESPONSE}
    for index, row in enumerate(rows[:end]):
        if row.kind == TOOL_CALL and row.tool_use_id not in answered:
            return rows[:index]
    return rows[:end]
