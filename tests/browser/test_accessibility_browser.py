"""WCAG 2.2 AA in a real browser: axe-core checks the sidebar in each of its states and every admin
page of the app, and a screen reader hears a finished reply once, never the streamed tokens.

axe-core is the npm package, installed outside the repository (the browser leg does it):

    npm install --no-save --prefix var/axe-core axe-core@<AXE_CORE_VERSION below>

``AHENTIC_AXE_JS`` points at another ``axe.min.js``. Without it the module is skipped, or fails
under ``AHENTIC_REQUIRE_BROWSER=1`` (.ci/browser-leg), like the other browser modules without
chromium. Any serious or critical violation of the WCAG 2.0/2.1/2.2 A and AA rules fails the test
and prints each rule, its help page and the selectors of the nodes to fix.

A new sidebar state is one more entry in ``SIDEBAR_STATES`` (a function that brings the open
sidebar into that state); a new admin page one more entry in ``ADMIN_PAGES`` (its list, add and
change forms, with a row in ``admin_objects``).
"""

# The fixtures imported from test_sidebar_browser are parameters of the tests: F811 by design.
# ruff: noqa: F811

import json
import os
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from orchestrator_app.testing.localapi import text_reply, tool_call, tool_reply
from sessions_app.models import Session
from tests.support import tools_for_sidebar  # noqa: F401  (registers the sidebar_* tools)
from tests.support.browser import (
    LONG_REPLY,
    assistant_messages,
    expect,
    hitl_card,
    make_staff,
    menu_item,
    new_chat,
    open_from_history,
    open_history,
    screenshot,
    send,
    set_view_mode,
    sidebar,
    status_is,
    unavailable,
)
from tests.support.factories import UserFactory
from tests.support.paths import ROOT

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("llm_strict"),
]

# The one pin: .ci/browser-leg reads it from this line to install the same version.
AXE_CORE_VERSION = "4.14.1"
AXE_JS = Path(
    os.environ.get("AHENTIC_AXE_JS")
    or ROOT / "var" / "axe-core" / "node_modules" / "axe-core" / "axe.min.js"
)
INSTALL_AXE = f"npm install --no-save --prefix var/axe-core axe-core@{AXE_CORE_VERSION}"
if not AXE_JS.exists():
    unavailable(f"axe-core is missing at {AXE_JS}: run `{INSTALL_AXE}` in the repository root")

WCAG_AA_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22a", "wcag22aa"]
FAILING_IMPACTS = {"serious", "critical"}

LAPTOP = {"width": 1366, "height": 900}
PHONE = {"width": 390, "height": 844}
VIEWPORTS = [pytest.param(LAPTOP, id="1366x900"), pytest.param(PHONE, id="390x844")]


# --- the axe-core check -------------------------------------------------------------------------


def axe_violations(page, context=None) -> list[dict]:
    """axe-core's WCAG A/AA violations on the page (or inside ``context``, an axe context such
    as ``{"include": ["#ahentic-sidebar"]}``), injected into the page if it is not there yet."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.add_script_tag(path=str(AXE_JS))
    version = page.evaluate("() => window.axe.version")
    assert version == AXE_CORE_VERSION, (
        f"{AXE_JS} is axe-core {version}, the tests pin {AXE_CORE_VERSION}: run `{INSTALL_AXE}`"
    )
    options = {"runOnly": {"type": "tag", "values": WCAG_AA_TAGS}, "resultTypes": ["violations"]}
    return page.evaluate(
        "([context, options]) => axe.run(context || document, options).then(r => r.violations)",
        [context, options],
    )


def describe(violations: list[dict]) -> str:
    """One paragraph per rule: what to fix, where, and axe's own explanation per node."""
    lines = []
    for violation in violations:
        lines.append(
            f"\n[{violation['impact']}] {violation['id']}: {violation['help']}\n"
            f"  {violation['helpUrl']}"
        )
        for node in violation["nodes"]:
            lines.append(f"  - {json.dumps(node['target'])}")
            summary = (node.get("failureSummary") or "").replace("\n", "\n      ")
            if summary:
                lines.append(f"      {summary}")
    return "\n".join(lines)


def assert_no_serious_violations(page, context=None, *, label: str = "") -> None:
    """Fails on any serious or critical WCAG 2.0/2.1/2.2 A or AA violation axe-core finds."""
    serious = [v for v in axe_violations(page, context) if v["impact"] in FAILING_IMPACTS]
    where = label or page.url
    assert not serious, f"axe-core: {len(serious)} serious or critical rule(s) on {where}:" + (
        describe(serious)
    )


# --- the sidebar --------------------------------------------------------------------------------

SIDEBAR = {"include": ["#ahentic-sidebar"]}


def logged_in_context(browser, live_server, user, viewport):
    client = Client()
    client.force_login(user)
    cookie = client.cookies[django_settings.SESSION_COOKIE_NAME]
    context = browser.new_context(base_url=live_server.url, viewport=viewport)
    context.add_cookies(
        [{"name": cookie.key, "value": cookie.value, "url": live_server.url, "httpOnly": True}]
    )
    return context


@pytest.fixture(params=VIEWPORTS)
def viewport(request):
    return request.param


@pytest.fixture
def context(browser, live_server, owner, viewport):
    """A logged-in browser context at the test's viewport (a laptop's or a phone's)."""
    context = logged_in_context(browser, live_server, owner, viewport)
    yield context
    context.close()


def open_sidebar(page):
    """The home page with the panel open: a phone starts with it folded behind the launcher."""
    page.goto("/")
    launcher = page.get_by_role("button", name="Open the agent panel")
    if launcher.is_visible():
        launcher.click()
    expect(page.locator("#ahentic-panel")).to_be_visible()


def state_folded(page, llm, settings):
    page.goto("/")
    panel = page.locator("#ahentic-panel")
    expect(sidebar(page)).to_have_attribute("data-status", "none")
    if panel.is_visible():
        page.get_by_role("button", name="Collapse the agent panel").click()
    expect(page.get_by_role("button", name="Open the agent panel")).to_be_visible()


def state_empty(page, llm, settings):
    open_sidebar(page)
    new_chat(page)


def state_streaming(page, llm, settings):
    llm.enqueue(text_reply(LONG_REPLY, chunk_delay_s=0.2))  # about 8 s of deltas
    open_sidebar(page)
    send(page, "Tell me a long story")
    expect(page.locator(".ahentic-live .ahentic-msg-text")).to_contain_text("Part 1 of")


def state_approval_card(page, llm, settings):
    llm.enqueue(
        tool_reply(
            tool_call("sidebar_publish_note", {"title": "Beans"}, id="toolu_pub"),
            text="I will publish it once you allow it.",
        )
    )
    open_sidebar(page)
    send(page, "Publish a note about beans")
    expect(hitl_card(page)).to_be_visible()
    status_is(page, "awaiting_human")


MARKDOWN_REPLY = (
    "## Beans\n\n| Origin | Roast |\n|---|---|\n| Kenya | light |\n\n"
    "- Grind them fresh\n- Use [good water](https://example.com)\n\n```\nprint(1)\n```"
)


def earlier_chat(owner) -> Session:
    """A finished chat of ``owner`` with a Markdown reply, made before the page opens."""
    from sessions_app import services
    from tests.support.factories import SessionFactory

    session = SessionFactory(owner=owner, title="Beans")
    services.events_append(
        session_id=session.pk,
        items=[
            {"kind": "user_message", "content": "Tell me about beans"},
            {"kind": "agent_message", "content": MARKDOWN_REPLY},
        ],
    )
    return session


def state_history_open(page, llm, settings):
    """The History panel open, an earlier chat listed in it."""
    earlier = earlier_chat(get_user_model().objects.get(username="owner"))  # conftest's owner
    open_sidebar(page)
    open_history(page)
    expect(page.locator(f'.ahentic-history-open[data-session="{earlier.pk}"]')).to_be_visible()


def state_earlier_chat(page, llm, settings):
    """An earlier chat, with a Markdown reply, opened again from the history."""
    earlier = earlier_chat(get_user_model().objects.get(username="owner"))  # conftest's owner
    open_sidebar(page)
    open_from_history(page, earlier.pk)
    expect(page.locator(".ahentic-tab.is-active")).to_contain_text("Beans")
    expect(assistant_messages(page)).to_have_count(1)


def state_error(page, llm, settings):
    settings.AHENTIC = {**settings.AHENTIC, "MAX_MESSAGE_CHARS": 10}
    open_sidebar(page)
    send(page, "This message is far too long")
    expect(page.locator('[data-role="error"]')).to_be_visible()


def state_more_menu(page, llm, settings):
    """The More menu open, as staff (the view mode's three choices in it)."""
    make_staff(get_user_model().objects.get(username="owner"))  # conftest's owner
    state_empty(page, llm, settings)
    page.get_by_role("button", name="More", exact=True).click()
    expect(page.get_by_role("group", name="View mode")).to_be_visible()


def state_shortcuts(page, llm, settings):
    """The shortcut list ("?")."""
    open_sidebar(page)
    page.locator('[data-role="transcript"]').focus()
    page.keyboard.press("?")
    expect(page.get_by_role("dialog", name="Keyboard shortcuts")).to_be_visible()


def state_artifact_preview(page, llm, settings):
    """An HTML artifact previewed in its sandboxed frame."""
    llm.enqueue(
        tool_reply(
            tool_call(
                "stage_artifact",
                {
                    "key": "banner",
                    "kind": "html",
                    "title": "Shop banner",
                    "payload": {"content": "<h1>Sale</h1><p>All beans off.</p>"},
                },
            )
        ),
        text_reply("Staged a banner."),
    )
    open_sidebar(page)
    send(page, "Draft a banner")
    expect(assistant_messages(page)).to_have_text(["Staged a banner."])
    artifacts = page.locator('[data-role="artifacts-box"]')
    artifacts.locator("summary").click()
    artifacts.get_by_role("button", name="Open artifact banner").click()
    expect(page.frame_locator('[data-role="artifact-preview"] iframe').locator("h1")).to_have_text(
        "Sale"
    )


def state_versions(page, llm, settings):
    """An edited message: its versions' pager, the earlier version shown."""
    llm.enqueue(text_reply("Paris."), text_reply("Rome."))
    open_sidebar(page)
    send(page, "Capital of France?")
    expect(assistant_messages(page)).to_have_text(["Paris."])
    status_is(page, "idle")
    box = page.get_by_label("Message the agent")
    box.focus()
    box.press("ArrowUp")
    box.fill("Capital of Italy?")
    box.press("Enter")
    expect(assistant_messages(page)).to_have_text(["Rome."])
    page.get_by_role("button", name="Previous version").click()
    expect(assistant_messages(page)).to_have_text(["Paris."])


SIDEBAR_STATES = {
    "folded": state_folded,
    "empty": state_empty,
    "streaming": state_streaming,
    "approval-card": state_approval_card,
    "history-open": state_history_open,
    "earlier-chat": state_earlier_chat,
    "error": state_error,
    "more-menu": state_more_menu,
    "shortcuts": state_shortcuts,
    "artifact-preview": state_artifact_preview,
    "versions": state_versions,
}


@pytest.mark.parametrize("state", list(SIDEBAR_STATES))
def test_the_sidebar_has_no_serious_accessibility_violations(page, llm, settings, viewport, state):
    SIDEBAR_STATES[state](page, llm, settings)
    screenshot(page, f"a11y-{state}-{viewport['width']}")

    assert_no_serious_violations(page, SIDEBAR, label=f"the sidebar ({state})")

    if state == "streaming":  # let the run end inside the test, as the live-text test does
        expect(assistant_messages(page).last).to_contain_text("Part 40 of")


# --- what a screen reader hears -----------------------------------------------------------------


def announcer(page):
    return page.locator('[data-role="announcer"]')


LIVE_ANCESTOR = (
    'e => !!e.closest(\'[aria-live]:not([aria-live="off"]), [role=log], [role=status], '
    "[role=alert], [role=marquee], [role=timer]')"
)


@pytest.mark.parametrize("viewport", [LAPTOP], ids=["1366x900"])
def test_a_screen_reader_hears_the_finished_reply_once_not_the_streamed_tokens(page, llm):
    llm.enqueue(text_reply(LONG_REPLY, chunk_delay_s=0.1))
    open_sidebar(page)
    expect(announcer(page)).to_have_attribute("aria-live", "polite")
    expect(announcer(page)).to_have_text("")

    send(page, "Tell me a long story")

    live = page.locator(".ahentic-live .ahentic-msg-text")
    expect(live).to_contain_text("Part 1 of")
    assert not live.evaluate(LIVE_ANCESTOR), "the streaming text is inside a live region"
    assert "Part 1 of" not in announcer(page).inner_text()  # nothing announced while it streams
    expect(assistant_messages(page).last).to_contain_text("Part 40 of")
    expect(announcer(page)).to_contain_text("Part 40 of a long answer.")
    expect(announcer(page)).to_contain_text("Part 1 of a long answer.")
    assert not assistant_messages(page).last.evaluate(LIVE_ANCESTOR)
    status_is(page, "idle")
    announced = announcer(page).inner_text()

    page.wait_for_timeout(2500)  # more polls of the idle chat: nothing is announced again

    assert announcer(page).inner_text() == announced
    expect(announcer(page).locator("p")).to_have_count(1)


@pytest.mark.parametrize("viewport", [LAPTOP], ids=["1366x900"])
def test_a_screen_reader_hears_the_approval_request_once(page, llm):
    llm.enqueue(tool_reply(tool_call("sidebar_publish_note", {"title": "Beans"}, id="toolu_pub")))
    open_sidebar(page)

    send(page, "Publish a note about beans")

    expect(hitl_card(page)).to_be_visible()
    expect(announcer(page)).to_have_text("Approval needed: Publish the note 'Beans'")
    page.wait_for_timeout(2000)  # the card stays through more polls: said once
    expect(announcer(page).locator("p")).to_have_count(1)


@pytest.mark.parametrize("viewport", [LAPTOP], ids=["1366x900"])
def test_an_error_of_the_sidebar_is_an_alert(page, llm, settings):
    state_error(page, llm, settings)

    alert = page.get_by_role("alert")
    expect(alert).to_be_visible()
    expect(alert).to_contain_text("the limit is 10")


def test_an_opened_earlier_chat_is_not_read_out_again(page, llm, settings, viewport):
    state_earlier_chat(page, llm, settings)

    expect(announcer(page)).to_have_text("")


# --- focus ----------------------------------------------------------------------------------------

FOCUS_RING = """e => {
    const rgb = (colour) => (colour.match(/[\\d.]+/g) || []).map(Number);
    const opaque = (c) => c.length === 3 || (c.length === 4 && c[3] === 1);
    const backdrop = (node) => {  // the first opaque background behind the node
        for (let n = node; n; n = n.parentElement) {
            const c = rgb(getComputedStyle(n).backgroundColor);
            if (opaque(c)) return c.slice(0, 3);
        }
        return [255, 255, 255];
    };
    const luminance = (c) => {
        const [r, g, b] = c.map((v) => {
            v /= 255;
            return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
        });
        return 0.2126 * r + 0.7152 * g + 0.0722 * b;
    };
    const style = getComputedStyle(e);
    const ring = rgb(style.outlineColor).slice(0, 3);
    // An outline drawn outside the control lies on what is around it; inside, on the control.
    const behind = parseFloat(style.outlineOffset) < 0 ? backdrop(e) : backdrop(e.parentElement);
    const [light, dark] = [luminance(ring), luminance(behind)].sort((a, b) => b - a);
    return {
        control: e.getAttribute("aria-label") || (e.labels && e.labels.length
            ? e.labels[0].textContent : e.textContent).trim().slice(0, 40) || e.tagName,
        style: style.outlineStyle,
        width: parseFloat(style.outlineWidth),
        contrast: Math.round(((light + 0.05) / (dark + 0.05)) * 100) / 100,
    };
}"""


def tab_stops_in_sidebar(page, limit: int = 150) -> list[dict]:
    """Tab through the page from its top; the focus ring of each stop inside the sidebar."""
    stops, seen = [], set()
    page.locator("body").click(position={"x": 1, "y": 1})
    for _ in range(limit):
        page.keyboard.press("Tab")
        focused = page.locator(":focus")
        if not focused.count():
            continue
        key = focused.evaluate("e => e.outerHTML.slice(0, 200) + e.getBoundingClientRect().top")
        if key in seen:
            break
        seen.add(key)
        if focused.evaluate("e => !!e.closest('#ahentic-sidebar')"):
            stops.append(focused.evaluate(FOCUS_RING))
    return stops


def test_every_control_shows_a_focus_ring_that_stands_out(page, llm, settings, viewport, owner):
    make_staff(owner)  # Verbose (staff only) shows the card's raw input
    state_approval_card(page, llm, settings)
    set_view_mode(page, "verbose")  # the card's raw input shows in Verbose and Debug
    hitl_card(page).locator("summary").click()  # the input's JSON: a <pre> in the card
    menu_item(page, "Show the debugger").click()

    stops = tab_stops_in_sidebar(page)

    names = [stop["control"] for stop in stops]
    for expected in ("Message the agent", "Deny: Publish a note", "Refresh diagnostics"):
        assert any(expected in name for name in names), (expected, names)
    weak = [
        stop
        for stop in stops
        if stop["style"] == "none" or stop["width"] < 2 or stop["contrast"] < 3
    ]
    assert not weak, f"focus rings missing, thinner than 2px or under 3:1: {weak}"
    screenshot(page, f"a11y-focus-ring-{viewport['width']}")  # on the last stop: Send


@pytest.mark.parametrize("viewport", [LAPTOP], ids=["1366x900"])
def test_delete_closes_the_focused_tab_and_the_close_button_stays_out_of_the_tablist(page, llm):
    open_sidebar(page)
    new_chat(page)
    new_chat(page)
    tabs = page.get_by_role("tab")
    expect(tabs).to_have_count(2)
    # The x buttons are for the pointer: a tablist owns only tabs (axe: aria-required-children).
    expect(page.get_by_role("tablist").get_by_role("button")).to_have_count(0)
    tabs.last.focus()

    page.keyboard.press("Delete")

    expect(tabs).to_have_count(1)
    expect(tabs.first).to_be_focused()
    expect(tabs.first).to_have_attribute("aria-selected", "true")
    page.keyboard.press("Delete")
    expect(tabs).to_have_count(0)
    expect(page.get_by_label("Message the agent")).to_be_focused()


# --- the session admin --------------------------------------------------------------------------


@pytest.fixture
def staff_context(browser, live_server, viewport, settings):
    settings.AHENTIC = {**settings.AHENTIC, "ADMIN_SIDEBAR": True}
    staff = UserFactory(username="staff", is_staff=True, is_superuser=True, agent_permission=True)
    context = logged_in_context(browser, live_server, staff, viewport)
    yield context
    context.close()


@pytest.fixture
def admin_objects(inspected, owner):
    """One row of each model the app's admin pages show (the session with every section, its
    events and trace, an agent, a schedule, an MCP server, a webhook endpoint)."""
    from orchestrator_app.models import McpServer, Schedule, WebhookEndpoint
    from sessions_app import agents
    from sessions_app.models import Event, TraceEvent
    from tests.support.factories import (
        SessionFactory,
        UsageRecordFactory,
        agent_create,
        schedule_create,
    )

    agent = agent_create("writer", name="Writer")
    pinned = SessionFactory(owner=owner, agent_version=agents.latest_version(agent))
    UsageRecordFactory(session=pinned, cost_usd="0.0420")  # a bar and a row on the spend page
    schedule_create(owner, agent)
    McpServer.objects.create(slug="tickets", name="Tickets", url="https://mcp.example.com/mcp")
    WebhookEndpoint.objects.create(
        name="Receiver", url="https://hooks.example.com/in", events=[], secret=""
    )
    return {
        "session": inspected,
        "event": Event.objects.filter(session=inspected).first(),
        "traceevent": TraceEvent.objects.filter(session=inspected).first(),
        "agent": agent,
        "artifact": inspected.artifacts.first(),
        "schedule": Schedule.objects.get(),
        "mcpserver": McpServer.objects.get(),
        "webhookendpoint": WebhookEndpoint.objects.get(),
    }


def _admin(app: str, model: str, view: str = "changelist"):
    """The admin page ``view`` of ``app.model``: its list, add form, or (change) the form of the
    fixture's row."""
    if view == "change":
        return lambda rows: reverse(f"admin:{app}_{model}_change", args=[rows[model].pk])
    return lambda rows: reverse(f"admin:{app}_{model}_{view}")


ADMIN_PAGES = {
    "session-list": _admin("sessions_app", "session"),
    "session-change": _admin("sessions_app", "session", "change"),
    "event-list": _admin("sessions_app", "event"),
    "event-change": _admin("sessions_app", "event", "change"),
    "traceevent-list": _admin("sessions_app", "traceevent"),
    "traceevent-change": _admin("sessions_app", "traceevent", "change"),
    "agent-list": _admin("sessions_app", "agent"),
    "agent-add": _admin("sessions_app", "agent", "add"),
    "agent-change": _admin("sessions_app", "agent", "change"),
    "artifact-list": _admin("artifacts_app", "artifact"),
    "artifact-change": _admin("artifacts_app", "artifact", "change"),
    "schedule-list": _admin("orchestrator_app", "schedule"),
    "schedule-add": _admin("orchestrator_app", "schedule", "add"),
    "schedule-change": _admin("orchestrator_app", "schedule", "change"),
    "mcpserver-list": _admin("orchestrator_app", "mcpserver"),
    "mcpserver-add": _admin("orchestrator_app", "mcpserver", "add"),
    "mcpserver-change": _admin("orchestrator_app", "mcpserver", "change"),
    "webhookendpoint-list": _admin("orchestrator_app", "webhookendpoint"),
    "webhookendpoint-add": _admin("orchestrator_app", "webhookendpoint", "add"),
    "webhookendpoint-change": _admin("orchestrator_app", "webhookendpoint", "change"),
    "spend": _admin("orchestrator_app", "spend"),
}


@pytest.mark.parametrize("admin_page", list(ADMIN_PAGES))
def test_the_apps_admin_pages_have_no_serious_accessibility_violations(
    staff_context,
    admin_objects,
    admin_page,
    viewport,
):
    page = staff_context.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    response = page.goto(ADMIN_PAGES[admin_page](admin_objects))
    assert response.status == 200, admin_page
    expect(page.locator("#content")).to_be_visible()
    screenshot(page, f"a11y-admin-{admin_page}-{viewport['width']}")

    assert_no_serious_violations(page, label=f"the admin's {admin_page}")
    assert not errors, errors
