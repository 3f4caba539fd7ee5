"""The session's admin page for a long session: events and trace by run (issue 31, section 4).

Runs are shown the newest first, ``RUNS_PER_PAGE`` a page, each a ``<details>`` (the newest
open) with its newest events and trace rows; ``?run=N`` shows one run alone, paged. Times are in
the site's time zone with the exact time in ``<time datetime>``; a denial shows its reason. The
page costs the same queries whatever the session's size, and renders only what it shows.
``admin_client`` (pytest-django) is a logged-in superuser.
"""

import re
from datetime import UTC, datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from orchestrator_app.testing.localapi import text_reply, tool_call, tool_reply
from sessions_app import services
from sessions_app.admin.runs import ROWS_PER_RUN, RUN_PAGE_ROWS, RUNS_PER_PAGE
from sessions_app.services import TraceItem
from tests.support import tools_for_artifacts  # noqa: F401  (registers publish_note)
from tests.support.admin import add_runs
from tests.support.api import decide, post_message
from tests.support.factories import SessionFactory


def page_of(admin_client, session, **query):
    response = admin_client.get(
        reverse("admin:sessions_app_session_change", args=[session.pk]), query
    )
    assert response.status_code == 200
    return response.content.decode()


def runs_in(html: str) -> list[tuple[int, bool]]:
    """The runs shown, in page order: (number, open)."""
    return [
        (int(number), " open" in rest)
        for number, rest in re.findall(
            r'<details class="ahentic-run" data-run="(\d+)"([^>]*)>', html
        )
    ]


def run_html(html: str, number: int) -> str:
    start = html.index(f'data-run="{number}"')
    return html[start : html.index("</details>", start)]


def event_rows(html: str) -> int:
    return len(re.findall(r"/admin/sessions_app/event/\d+/change/", html))


def trace_rows(html: str) -> int:
    return len(re.findall(r"/admin/sessions_app/traceevent/\d+/change/", html))


@pytest.fixture
def session(owner):
    return SessionFactory(owner=owner, title="A long chat")


def test_runs_are_shown_the_newest_first_with_only_the_newest_open(admin_client, session):
    add_runs(session, 3)

    html = page_of(admin_client, session)

    assert runs_in(html) == [(3, True), (2, False), (1, False)]
    newest = run_html(html, 3)
    assert "run 3 message 0" in newest and "run 3 step 1" in newest
    assert "run 2" not in newest
    assert "3 runs, the newest first." in html
    assert "3 events" in newest and "2 trace rows" in newest
    # Within a run, rows read in the order they happened.
    assert newest.index("run 3 message 0") < newest.index("run 3 message 2")


def test_older_runs_are_on_the_next_page(admin_client, session):
    add_runs(session, RUNS_PER_PAGE + 2)

    first = page_of(admin_client, session)
    second = page_of(admin_client, session, runs=2)

    assert [n for n, _ in runs_in(first)] == list(range(RUNS_PER_PAGE + 2, 2, -1))
    assert 'href="?runs=2" rel="next">Older runs' in first
    assert runs_in(second) == [(2, False), (1, False)]  # no run open on an older page
    assert 'href="?runs=1" rel="prev">Newer runs' in second


@pytest.mark.parametrize(
    "query", [{"runs": "x"}, {"runs": "999"}, {"run": "abc"}, {"run": "77"}, {"run": "-1"}]
)
def test_a_bad_page_or_run_shows_the_runs_it_can(admin_client, session, query):
    add_runs(session, 2)

    html = page_of(admin_client, session, **query)

    # The first page of runs (the last one for a page past the end), never an error.
    assert runs_in(html) == [(2, True), (1, False)]


def test_times_are_in_the_sites_time_zone_with_the_exact_time(admin_client, session, settings):
    settings.TIME_ZONE = "America/New_York"
    at = datetime(2026, 3, 1, 17, 4, 5, tzinfo=UTC)
    services.trace_records(
        session_id=session.pk, items=[TraceItem(type="run_start", summary="go", run=1, at=at)]
    )

    html = page_of(admin_client, session)

    # 17:04:05 UTC is 12:04:05 in New York (EST, UTC-5), shown as such with its ISO time.
    row = re.search(r'<time datetime="([^"]+)" title="([^"]+)">12:04:05</time>', html)
    assert row, "the trace row's local time"
    assert row.group(1) == "2026-03-01T12:04:05-05:00"
    assert row.group(2) == "March 1, 2026 12:04:05 EST"
    summary = run_html(html, 1).split("</summary>")[0]
    assert 'datetime="2026-03-01T12:04:05-05:00"' in summary
    assert " ago)" in summary  # and how long ago, in words


def test_a_denied_approval_shows_its_reason_in_the_trace_row(
    admin_client, owner_client, session, llm, run_tasks, llm_strict
):
    note = {"title": "Opening hours", "body": "We open at nine."}
    llm.enqueue(tool_reply(tool_call("publish_note", note, id="toolu_1")), text_reply("OK."))
    post_message(owner_client, session, run_tasks, "Publish the opening hours")
    decide(owner_client, session, run_tasks, "deny", reason="Wrong <hours>")

    html = page_of(admin_client, session)

    denied = re.search(r"<td>hitl_denied</td>.*?</tr>", html, re.S)
    assert denied, "the denial's trace row"
    assert "Denied: Wrong &lt;hours&gt;" in denied.group(0)


def test_a_denial_without_a_reason_says_so(admin_client, session):
    services.trace_records(
        session_id=session.pk,
        items=[
            TraceItem(type="hitl_denied", summary="publish_note: deny", data={"reason": ""}, run=1),
            TraceItem(type="hitl_denied", data={"reason": "user_redirect"}, run=1),
        ],
    )

    html = page_of(admin_client, session)

    assert "Denied: no reason given" in html
    assert "Denied: the user sent a new message instead" in html


def test_the_page_costs_the_same_queries_for_two_runs_or_thirty(admin_client, owner):
    def queries(session, **query) -> int:
        with CaptureQueriesContext(connection) as captured:
            page_of(admin_client, session, **query)
        return len(captured)

    small, large = SessionFactory(owner=owner), SessionFactory(owner=owner)
    add_runs(small, 2)
    add_runs(large, 30, events=40, trace=5)
    queries(small)  # the first request of a test reads what later ones find cached

    # The login (2), the session, its runs (events and trace grouped by run: 2), the shown
    # runs' rows (2), the owner, the agent and its latest version (3), the conversation (its
    # newest messages: 1), sub-agents, goals, pending messages, artifacts and snapshots (5).
    assert queries(small) == queries(large) == 17
    # One run alone: its rows counted and read a page at a time (4 instead of 2).
    assert queries(small, run=1) == queries(large, run=1) == 19


def test_a_run_of_five_thousand_events_renders_one_page_of_them(admin_client, session):
    add_runs(session, 1, events=5000, trace=3, first=4)
    add_runs(session, 3, events=2, trace=1)

    html = page_of(admin_client, session)

    # The overview: each run's newest rows only, and a link to the rest.
    assert event_rows(html) == ROWS_PER_RUN + 3 * 2
    longest = run_html(html, 4)
    assert "The newest 20 events." in longest
    assert '<a href="?run=4">Show all 5000 events</a>' in longest
    assert "run 4 message 4999" in longest and "run 4 message 4979" not in longest

    alone = page_of(admin_client, session, run=4)
    last = page_of(admin_client, session, run=4, page=25)

    assert runs_in(alone) == [(4, True)]
    assert event_rows(alone) == RUN_PAGE_ROWS and trace_rows(alone) == 3
    assert "Page 1 of 25." in alone and "run 4 message 199" in alone
    assert 'href="?run=4&amp;page=2&amp;trace_page=1" rel="next"' in alone
    assert event_rows(last) == RUN_PAGE_ROWS and "run 4 message 4999" in last
    assert "run 4 message 4799" not in last
