"""Presence: whether the owner of a chat is watching it, as its sidebar's poll tells.

The poll is a hot path, so it writes no row: each poll of a chat by its owner sets one cache
key (``seen``), and what reaches a user who is not watching (the approval mail,
``orchestrator_app.notifications``) reads it (``last_seen``). The cache must be shared by the
web and worker processes (Redis, Memcached, the database cache): with a per-process cache the
worker never sees a poll (system check ahentic.W014 with ``--deploy``).
"""

from __future__ import annotations

import time

from django.core.cache import cache

# How long a poll is remembered: longer than any sensible NOTIFY_APPROVAL_AFTER_S (an older
# poll is before the request anyway).
MEMORY_S = 7 * 24 * 3600


def _key(session_id) -> str:
    return f"ahentic:polled:{session_id}"


def seen(session_id) -> None:
    """The owner polled the chat now (one cache set, no database write)."""
    cache.set(_key(session_id), time.time(), timeout=MEMORY_S)


def last_seen(session_id) -> float | None:
    """When the owner last polled the chat (a Unix time), or None (never, or long ago)."""
    return cache.get(_key(session_id))
