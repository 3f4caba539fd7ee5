"""Signals for host code: what the agent did, sent after the write that records it commits.

This module's path, ``orchestrator_app.signals``, is public and stays stable whatever the
package layout becomes. Every signal is sent with ``sender`` the ``Session`` class and
``session=`` the session, once per occurrence, after the transaction that recorded the
occurrence commits (at once when there is none). The other keyword arguments:

- ``run_started``: ``run`` (the session's run number).
- ``run_finished``: ``run``, ``outcome`` (the status the run ended in: ``idle``,
  ``awaiting_human``, ``error`` or ``cancelled``), ``error_code`` ("" unless ``error``).
- ``approval_requested``: ``run``, ``tool`` (registry name), ``tool_use_id``.
- ``tool_executed``: ``run``, ``tool``, ``tool_use_id``, ``is_error``.
- ``run_failed``: ``run``, ``error_code``, ``message``, ``resumable``.
- ``schedule_run_finished``: ``schedule`` (the schedule), ``schedule_run`` (its log row),
  ``status`` (the log row's status: ``done``, ``awaiting_human``, ``failed``, ``cancelled``
  or ``skipped``); ``session`` is None for a firing refused before it had a chat (its user
  or agent; ``schedule_run.error`` says why). A run logged ``awaiting_human`` is sent again
  when it ends.

A receiver that raises is logged and does not stop the others or the run
(``send_robust``).

    from django.dispatch import receiver
    from orchestrator_app.signals import run_finished

    @receiver(run_finished)
    def on_run_finished(sender, session, run, outcome, **kwargs):
        ...
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.dispatch import Signal

from sessions_app.models import Session

logger = logging.getLogger("orchestrator_app.signals")

run_started = Signal()
run_finished = Signal()
approval_requested = Signal()
tool_executed = Signal()
run_failed = Signal()
schedule_run_finished = Signal()


def send_after_commit(signal: Signal, session: Session, **kwargs: Any) -> None:
    """Send ``signal`` for ``session`` once the current transaction commits (at once when
    none is open). The only way the app sends its public signals."""

    def send() -> None:
        for receiver, result in signal.send_robust(sender=Session, session=session, **kwargs):
            if isinstance(result, Exception):
                logger.error(
                    "A receiver of an ahentic signal failed: %r",
                    receiver,
                    exc_info=(type(result), result, result.__traceback__),
                )

    transaction.on_commit(send, robust=True)
