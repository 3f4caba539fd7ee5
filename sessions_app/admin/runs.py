"""A session's events and trace on its admin page, one collapsible section per run.

A long session has thousands of events; listing them all made the page slow and useless. The
page now shows runs, the newest first, ``RUNS_PER_PAGE`` at a time (``?runs=2`` the older
ones), each a ``<details>`` (the newest open) with the newest ``ROWS_PER_RUN`` events and
trace rows of that run, oldest first, and a "Show all" link when it has more. ``?run=N`` shows
run N alone, its events and trace ``RUN_PAGE_ROWS`` a page (``&page=`` / ``&trace_page=``).

What a page renders is bounded by these numbers whatever the session's size, and it costs the
same few queries however many runs it shows: the runs' counts and times in one grouped query per
table, their rows in one query per table (a window function ranks each run's rows), never a
query per run. Times are shown in the site's time zone (the template's ``date`` filter), with
the exact ISO time in the ``<time>`` element. A denied approval's reason (kept in the trace
row's data) is shown in its row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.core.paginator import Paginator
from django.db.models import Count, F, Max, Min, Window
from django.db.models.fields.json import KT
from django.db.models.functions import RowNumber
from django.http import QueryDict
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from ..models import Event, Session, TraceEvent

Link = Callable[[Any, Any], SafeString]

RUNS_PER_PAGE = 10  # runs on one page of the overview
ROWS_PER_RUN = 20  # events (and trace rows) shown of each run in the overview: its newest
RUN_PAGE_ROWS = 200  # events (and trace rows) on one page of a single run
EXCERPT_CHARS = 200

DENIED = "hitl_denied"
# What the sidebar sends as a denial's reason when the user wrote none, and the reason a run
# records when a new message took the place of a decision (``control.runs``); translated when
# shown (``denial_text``).
DENIAL_CODES = {
    "": gettext_noop("no reason given"),
    "user_denied": gettext_noop("no reason given"),
    "user_redirect": gettext_noop("the user sent a new message instead"),
}


@dataclass
class RunSection:
    """One run on the page: its counts and times, and the rows shown of it."""

    number: int
    events: int = 0
    trace: int = 0
    started: datetime | None = None
    ended: datetime | None = None
    open: bool = False
    event_rows: list[dict[str, Any]] = field(default_factory=list)
    trace_rows: list[dict[str, Any]] = field(default_factory=list)
    event_page: Any = None  # a Paginator page, when the run is shown alone
    trace_page: Any = None

    @property
    def events_hidden(self) -> int:
        return self.events - len(self.event_rows)

    @property
    def trace_hidden(self) -> int:
        return self.trace - len(self.trace_rows)


def _number(value: str | None) -> int | None:
    try:
        number = int(value or "")
    except ValueError:
        return None
    return number if number >= 0 else None


def _excerpt(text: str) -> str:
    text = text or ""
    return text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS] + "…"


def denial_text(reason: str | None) -> str:
    """A denied approval's reason as the trace row shows it."""
    reason = (reason or "").strip()
    return _("Denied: %(reason)s") % {"reason": _(DENIAL_CODES.get(reason, reason))}


def _run_totals(session: Session) -> dict[int, RunSection]:
    """Every run of the session with its counts and times: one grouped query per table."""
    runs: dict[int, RunSection] = {}
    grouped = (
        Event.objects.filter(session=session)
        .order_by()
        .values("run")
        .annotate(count=Count("id"), first=Min("created_at"), last=Max("created_at"))
    )
    for row in grouped:
        run = runs.setdefault(row["run"], RunSection(row["run"]))
        run.events, run.started, run.ended = row["count"], row["first"], row["last"]
    grouped = (
        TraceEvent.objects.filter(session=session)
        .order_by()
        .values("run")
        .annotate(count=Count("id"), first=Min("at"), last=Max("at"))
    )
    for row in grouped:
        run = runs.setdefault(row["run"], RunSection(row["run"]))
        run.trace = row["count"]
        run.started = min(filter(None, [run.started, row["first"]]))
        run.ended = max(filter(None, [run.ended, row["last"]]))
    return runs


def _events(session: Session):
    # The payload may be large (a tool's input, an attachment's reference): only its tool name.
    return Event.objects.filter(session=session).defer("payload").annotate(tool=KT("payload__tool"))


def _trace(session: Session):
    # The data is bookkeeping, but for a denial's reason.
    return (
        TraceEvent.objects.filter(session=session).defer("data").annotate(reason=KT("data__reason"))
    )


def _newest_of_each(queryset, runs: list[int]) -> list:
    """The newest ``ROWS_PER_RUN`` rows of each of ``runs``, in one query."""
    ranked = queryset.filter(run__in=runs).annotate(
        rank=Window(RowNumber(), partition_by=[F("run")], order_by=F("seq").desc())
    )
    return list(ranked.filter(rank__lte=ROWS_PER_RUN).order_by("seq"))


def _event_row(event: Event, link: Link) -> dict[str, Any]:
    return {
        "seq": link(event, event.seq),
        "kind": event.kind,
        "content": _excerpt(event.content),
        "tool": event.tool or "",
        "at": event.created_at,
    }


def _trace_row(row: TraceEvent, link: Link) -> dict[str, Any]:
    return {
        "seq": link(row, row.seq),
        "type": row.type,
        "step": row.step,
        "summary": row.summary,
        "denial": denial_text(row.reason) if row.type == DENIED else "",
        "at": row.at,
    }


def session_runs(session: Session, query: QueryDict, link: Link) -> dict[str, Any]:
    """The runs section's context for ``session`` from the page's query string; ``link(row,
    text)`` links a row to its own admin page (the Session admin's ``admin_link``)."""
    totals = _run_totals(session)
    numbers = sorted(totals, reverse=True)
    focus = _number(query.get("run"))
    if focus is not None and focus in totals:
        run = totals[focus]
        run.open = True
        events = Paginator(_events(session).filter(run=focus).order_by("seq"), RUN_PAGE_ROWS)
        trace = Paginator(_trace(session).filter(run=focus).order_by("seq"), RUN_PAGE_ROWS)
        run.event_page = events.get_page(query.get("page"))
        run.trace_page = trace.get_page(query.get("trace_page"))
        run.event_rows = [_event_row(e, link) for e in run.event_page]
        run.trace_rows = [_trace_row(t, link) for t in run.trace_page]
        return {"runs": [run], "focus": run, "run_count": len(numbers), "page": None}

    page = Paginator(numbers, RUNS_PER_PAGE).get_page(query.get("runs"))
    shown = [totals[n] for n in page]
    if shown:
        shown[0].open = page.number == 1
        by_number = {run.number: run for run in shown}
        for event in _newest_of_each(_events(session), list(by_number)):
            by_number[event.run].event_rows.append(_event_row(event, link))
        for row in _newest_of_each(_trace(session), list(by_number)):
            by_number[row.run].trace_rows.append(_trace_row(row, link))
    return {"runs": shown, "focus": None, "run_count": len(numbers), "page": page}
