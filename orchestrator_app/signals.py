"""Signals for host code: what the agent did, sent after the write that records it commits.

This module's path, ``orchestrator_app.signals``, is public and stays stable whatever the
package layout becomes. Every signal is sent with ``sender`` the ``Session`` class and
``session=`` the session (the app's own sends pass its id, read once the transaction
committed, so a receiver sees the row as recorded), once per occurrence, after the transaction that recorded the occurrence
commits (at once when there is none). A conditional write that lost a race sends nothing, and
neither does a retried step (its writes are conditional on the lease it no longer holds).

What a run is: a run is live while the session is ``running``, ``awaiting_human`` or
``awaiting_browser``, and at rest when it is ``idle``, ``error`` or ``cancelled``.
``run_started`` is sent when a session leaves rest (a message, queued messages, a suggested
action, or Continue on a resumable job), ``run_finished`` when it comes back to rest, so every
``run_started`` is followed by exactly one ``run_finished``. Waiting for an approval or for the
browser is not an ending: ``approval_requested`` reports the wait, and the run goes on (same
``run`` number, no new ``run_started``) once the user decides. A message sent instead of a
decision ends the run (``idle``) and starts the next one.

The keyword arguments:

- ``run_started``: ``run`` (the session's run number; Continue keeps the number it resumes).
- ``run_finished``: ``run``, ``outcome`` (the status the run came to rest in: ``idle``,
  ``error`` or ``cancelled``), ``error_code`` ("" unless ``error``).
- ``approval_requested``: ``run``, ``tool`` (registry name), ``tool_use_id``.
- ``tool_executed``: ``run``, ``tool``, ``tool_use_id``, ``is_error``. Sent for each call of
  the app's tools that ran and whose result was recorded: executed by a worker, or handed to
  the browser and answered by it (or timed out there: ``is_error``). Calls refused before they
  ran (unknown tool, Ask mode, permission, invalid input, denied, skipped, cancelled) and the
  model provider's server tools (web search, web fetch: they run at the provider) are not.
- ``run_failed``: ``run``, ``error_code``, ``message``, ``resumable``; sent just before the
  ``run_finished`` with outcome ``error`` of the same run.
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
from collections.abc import Callable
from typing import Any

from django.db import transaction
from django.dispatch import Signal

from sessions_app import db
from sessions_app.models import Session

logger = logging.getLogger("orchestrator_app.signals")

run_started = Signal()
run_finished = Signal()
approval_requested = Signal()
tool_executed = Signal()
run_failed = Signal()
schedule_run_finished = Signal()

# The app's own receivers that need a signal's session by its key alone (the webhooks, whose
# payloads carry ids; the schedules' and the telemetry's run receivers), by signal: they are
# called before the row is read, and a signal that only they hear is sent without reading it
# (``send_after_commit``).
_key_receivers: dict[Signal, list[Callable[..., None]]] = {}


def on_session_key(signal: Signal, receiver: Callable[..., None]) -> None:
    """Have ``receiver(session_id=..., **kwargs)`` hear ``signal`` (once per receiver) with
    the session's key instead of its row, for a feature of this app whose receiver reads
    nothing of the row (``session_id`` is None where the signal's ``session`` is). Host code
    connects to the signals themselves."""
    receivers = _key_receivers.setdefault(signal, [])
    if receiver not in receivers:
        receivers.append(receiver)


def _failed(receiver: Any, error: Exception) -> None:
    logger.error(
        "A receiver of an ahentic signal failed: %r",
        receiver,
        exc_info=(type(error), error, error.__traceback__),
    )


def send_after_commit(signal: Signal, session: Session | Any, **kwargs: Any) -> None:
    """Send ``signal`` for ``session`` once the current transaction commits (at once when
    none is open). The only way the app sends its public signals.

    ``session`` is the session, its primary key, or None (``schedule_run_finished`` for a
    firing refused before it had a chat); a key is read when the signal is sent (the committed
    row; nothing is sent to the signal's receivers when it is gone, or when nobody listens).
    The app's key receivers (``on_session_key``) hear it first, without the row."""

    session_id = session.pk if isinstance(session, Session) else session

    def send() -> None:
        for receiver in _key_receivers.get(signal, ()):
            try:
                receiver(session_id=session_id, **kwargs)
            except Exception as error:  # as ``send_robust``: the others and the run go on
                _failed(receiver, error)
        if not signal.has_listeners(Session):
            return
        row = session
        if row is not None and not isinstance(row, Session):
            try:
                row = db.primary(Session).select_related("owner").get(pk=session)
            except Session.DoesNotExist:  # deleted meanwhile: nothing left to report on
                return
        for receiver, result in signal.send_robust(sender=Session, session=row, **kwargs):
            if isinstance(result, Exception):
                _failed(receiver, result)

    transaction.on_commit(send, using=db.write_alias(Session), robust=True)
