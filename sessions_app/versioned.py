"""Per-process values derived from a session that change only with a visible change of it.

A step reads some of a session's children every time although they rarely change: its goals
and its artifacts' pointers (the step context shows them). Every write of those bumps the
session's ``version`` (the REST ETag) in the same transaction, so what was read after the
version ``v`` was loaded holds for ``v``: kept by ``(name, session, v)`` as the payload of a
poll is cached, a step reuses what the previous one read when nothing visible changed since.
A version is never reused, so an entry is never stale for its key; the keeping is bounded
(least recently used first) and per process. Values kept are immutable (text, tuples).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

MAX_ENTRIES = 256

_kept: OrderedDict[tuple, Any] = OrderedDict()
_lock = threading.Lock()


def derived(name: str, session_id, version: int, compute: Callable[[], T]) -> T:
    """``compute()`` for ``session_id`` at ``version`` (read before ``compute`` reads
    anything), computed once per process while kept."""
    key = (name, str(session_id), version)
    with _lock:
        if key in _kept:
            _kept.move_to_end(key)
            return _kept[key]
    value = compute()
    with _lock:
        _kept[key] = value
        while len(_kept) > MAX_ENTRIES:
            _kept.popitem(last=False)
    return value


def carry(session_id, from_version: int, to_version: int, names: tuple[str, ...]) -> None:
    """Keep the values ``names`` kept for ``session_id`` at ``from_version`` for
    ``to_version`` too: for a writer that knows the version moved only by writes of its own
    that change none of them (a step's turn, progress and answers:
    ``runstate.only_lease_wrote``)."""
    if from_version == to_version:
        return
    session_key = str(session_id)
    with _lock:
        for name in names:
            value = _kept.get((name, session_key, from_version), _kept)
            if value is not _kept:
                _kept[(name, session_key, to_version)] = value
        while len(_kept) > MAX_ENTRIES:
            _kept.popitem(last=False)


def clear() -> None:
    with _lock:
        _kept.clear()
