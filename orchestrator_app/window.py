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

So the rows before the newest sent event and before the first unanswered tool call are stable. A
worker keeps those of the sessions it served last (``KEEP_SESSIONS``) and reads the events
from the first row it does not keep in one query, the same count as reading the whole window.
Rows kept by a worker that did not serve the session's last steps stay valid for the same
reasons. Nothing here is shared between processes.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from sessions_app.models import EventRow, event_rows

from .prompt import SYSTEM_MESSAGE, TOOL_CALL, TOOL_RESPONSE

# Sessions whose stable rows a worker keeps (least recently used first out). A window holds
# at most the context budget's worth of text: about 100 KB at the default 50,000 tokens.
KEEP_SESSIONS = 64


@dataclass(frozen=True)
class _Kept:
    start: int  # the window start the rows were read from (event id, 0 for the first event)
    rows: tuple[EventRow, ...]  # every event of the session from ``start`` on, through ...
    through: int  # ... this event id: rows after it are read from the database


_kept: OrderedDict[object, _Kept] = OrderedDict()
_lock = threading.Lock()


def window_rows(session_id, start: int | None) -> list[EventRow]:
    """The session's events from event ``start`` on (all of them for None), by seq: the kept
    stable rows plus one query for the rest."""
    start = start or 0
    with _lock:
        kept = _kept.get(session_id)
    if kept is not None and kept.start <= start:
        stable = kept.rows
        if start > kept.start:  # the window start moved on
            stable = tuple(row for row in stable if row.pk >= start)
        fresh = event_rows(session_id, after_id=max(kept.through, start - 1))
    else:
        stable, fresh = (), event_rows(session_id, from_id=start)
    # Kept rows stay stable, so only the rows read now are looked at.
    _keep(session_id, start, stable + tuple(_stable_prefix(fresh)))
    return [*stable, *fresh]


def _keep(session_id, start: int, stable: tuple[EventRow, ...]) -> None:
    with _lock:
        if stable:
            _kept[session_id] = _Kept(start, stable, stable[-1].pk)
            _kept.move_to_end(session_id)
            while len(_kept) > KEEP_SESSIONS:
                _kept.popitem(last=False)
        else:
            _kept.pop(session_id, None)


def forget(session_id=None) -> None:
    """Drop the rows kept for ``session_id`` (all sessions for None)."""
    with _lock:
        if session_id is None:
            _kept.clear()
        else:
            _kept.pop(session_id, None)


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
