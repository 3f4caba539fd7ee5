"""The lease watch: every django-q2 worker process re-enqueues runs whose worker is gone.

A run's worker holds a lease of ``RUN_LEASE_S``, refreshed while it works
(``heartbeat.py``). When the worker dies, something else must notice the lease expire and
re-enqueue the step (``runs.recover_stalled``). django-q2 has no delayed task, and its
scheduler runs from the cluster's guard loop about every 30 s with schedules of a minute at
least, so the ``ahentic_recover`` schedule alone resumed a killed run 33-64 s after the kill.

So each worker process runs a small daemon thread, started from django-q2's documented
``post_spawn`` signal (sent in every worker process as it starts, including the one the
cluster spawns in place of a worker that died). It sweeps every ``interval_s()`` (a quarter of
``RUN_LEASE_S``, at least half a second): a stalled run resumes within about 1.25 x
``RUN_LEASE_S`` after its worker died, with any broker (the sweep only reads the session table
and enqueues), any number of clusters and hosts, and while every worker slot is busy with a
long tool (a thread, not a task). A sweep is one indexed query; processes that share a cache
take turns (``cache.add``), so a site with a shared cache sweeps once per interval, and a
run is re-enqueued at most once per lease period (``runs.recover_stalled``). A duplicate step
only fails its claim. The thread keeps its database connection between sweeps as long as
``CONN_MAX_AGE`` allows (``close_old_connections``, as django-q2 does around each task). The
``ahentic_recover`` schedule stays as a backstop.
"""

from __future__ import annotations

import logging
import math
import random
import threading
import time
from multiprocessing import parent_process

from django.conf import settings
from django.core.cache import cache
from django.db import close_old_connections

from sessions_app.conf import ahentic_settings

from . import runs

log = logging.getLogger("ahentic")

SWEEP_KEY = "ahentic:lease-watch"
MIN_INTERVAL_S = 0.5

_lock = threading.Lock()
_thread: threading.Thread | None = None


def interval_s() -> float:
    return max(float(ahentic_settings.RUN_LEASE_S) / 4, MIN_INTERVAL_S)


def start_watch(sender=None, **kwargs) -> None:
    """``post_spawn`` receiver: start this worker process's watch thread (once).

    django-q2 sends ``post_spawn`` from a task run inline too (``sync``, as in tests and in
    development), in whatever process enqueued it: there no watch starts. A cluster's worker
    is a child process its sentinel started."""
    global _thread
    if (getattr(settings, "Q_CLUSTER", None) or {}).get("sync") or parent_process() is None:
        return
    with _lock:
        if _thread is not None and _thread.is_alive():
            return
        _thread = threading.Thread(target=_watch, name="ahentic-lease-watch", daemon=True)
        _thread.start()


def _watch() -> None:
    interval = interval_s()
    time.sleep(random.uniform(0, interval))  # sibling workers start together: spread them
    while True:
        try:
            sweep(interval)
        except Exception:  # a locked or unreachable database: try again next time
            log.warning("ahentic lease watch: the sweep failed", exc_info=True)
        finally:
            # This thread's own connections (they are per thread), closed as a request's are:
            # when past ``CONN_MAX_AGE`` or unusable after an error. A site with persistent
            # connections sweeps on one connection instead of opening one per sweep.
            close_old_connections()
        time.sleep(interval)


def sweep(interval: float | None = None) -> int:
    """Re-enqueue stalled runs, unless another process sharing the cache swept within the
    interval. Returns how many runs were re-enqueued."""
    timeout = max(1, math.floor(interval or interval_s()))
    if not cache.add(SWEEP_KEY, 1, timeout=timeout):
        return 0
    return runs.recover_stalled()
