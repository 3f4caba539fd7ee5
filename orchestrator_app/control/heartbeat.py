"""The lease heartbeat: a worker thread keeps the run's lease fresh while a tool executes.

A tool call cannot refresh the lease itself, and a lease stretched by the tool's whole time
limit made a dead worker invisible for ``RUN_LEASE_S`` + ``TOOL_TIMEOUT_S``. Instead the lease
stays ``RUN_LEASE_S`` long and this thread refreshes it every third of that, so a worker that
dies mid-tool is noticed within about ``RUN_LEASE_S`` (then ``POST continue`` or the recover
sweep takes the run over and heals the call).

The thread stops when the tool returns (the ``with`` block joins it, so it never writes after),
at the first refresh that finds the lease lost (a cancel, a takeover: it never writes again),
and once the tool overran its own time limit (a tool the timer cannot stop must not hold the
run forever).
"""

from __future__ import annotations

import logging
import threading
import time

from django.db import connections

from sessions_app import db, runstate
from sessions_app.conf import ahentic_settings
from sessions_app.runstate import Lease

log = logging.getLogger("ahentic")


class LeaseHeartbeat:
    def __init__(self, lease: Lease, *, limit_s: float):
        self.lease = lease
        self.limit_s = limit_s
        self.interval_s = max(float(ahentic_settings.RUN_LEASE_S) / 3, 0.05)
        self.beats = 0
        self.lost = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ahentic-heartbeat", daemon=True)

    def __enter__(self) -> LeaseHeartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        deadline = time.monotonic() + self.limit_s
        used_connection = False
        try:
            while not self._stop.wait(self.interval_s):
                if time.monotonic() > deadline:
                    return
                used_connection = True
                try:
                    refreshed = runstate.lease_refresh(self.lease)
                except Exception:  # a locked database: try again at the next beat
                    log.warning("ahentic heartbeat could not refresh %s", self.lease, exc_info=True)
                    continue
                if not refreshed:
                    self.lost = True
                    return
                self.beats += 1
        finally:
            if used_connection:
                connections[db.write_alias()].close()  # this thread's own connection
