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


def clear() -> None:
    with _lock:
        _kept.clear()
