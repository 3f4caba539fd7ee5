"""The sidebar in German: a browser that asks for German (Accept-Language, which the demo's
LocaleMiddleware reads) sees no English string of the sidebar's catalogues.

The walk reads every rendered text, aria-label, title and placeholder of the sidebar in several
states (empty, a reply with its actions, the More menu, an approval card in the Basic and
the verbose view, the History panel, the settings) and fails on any that is an
English msgid (or contains one) whose German differs: a string the code forgot to wrap, or one
the catalogue lacks. Playwright + Debian's chromium; the fixtures and the skip rule are those of
``test_sidebar_browser``.
"""

import importlib.util
import re
import sys
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.test import Client

from tests.support.browser import expect, hitl_card, make_staff, screenshot, status_is
from tests.support.paths import ROOT

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("llm_strict"),
]

VIEWPORTS = {"laptop": {"width": 1366, "height": 900}, "phone": {"width": 390, "height": 844}}
PLACEHOLDER = re.compile(r"%\(\w+\)[sd]|%[sdr]")

# Every rendered string of the sidebar: direct text, the accessible names and hints. The
# options of a (closed) select count as shown.
SHOWN_JS = """(root) => {
  const found = [];
  const add = (text, where) => {
    const value = (text || "").replace(/\\s+/g, " ").trim();
    if (value) found.push([value, where]);
  };
  for (const node of [root, ...root.querySelectorAll("*")]) {
    const shown = node.tagName === "OPTION"
      ? node.parentElement.checkVisibility()
      : node.checkVisibility();
    if (!shown) continue;
    for (const child of node.childNodes) {
      if (child.nodeType === Node.TEXT_NODE) add(child.data, node.tagName.toLowerCase());
    }
    for (const name of ["aria-label", "title", "placeholder"]) add(node.getAttribute(name), name);
  }
  return found;
}"""


def _parse_po(path: Path):
    name = "ahentic_ci_translations"
    spec = importlib.util.spec_from_file_location(name, ROOT / ".ci" / "translations.py")
    module = sys.modules.setdefault(name, importlib.util.module_from_spec(spec))
    spec.loader.exec_module(module)
    return module.parse_po(path)


def english_patterns() -> list[tuple[str, re.Pattern]]:
    """The sidebar's msgids whose German differs, as patterns (a placeholder matches any
    text): the djangojs catalogue and the template's strings."""
    locale = ROOT / "orchestrator_app" / "locale" / "de" / "LC_MESSAGES"
    patterns = []
    for po in (locale / "djangojs.po", locale / "django.po"):
        for entry in _parse_po(po):
            for english, german in zip(
                [entry.msgid, entry.msgid_plural or entry.msgid],
                [entry.msgstr.get(0), entry.msgstr.get(1, entry.msgstr.get(0))],
                strict=True,
            ):
                # %% in a template's msgid is one % on the page.
                english = english.replace("%%", "%")
                if german.replace("%%", "%") == english or not PLACEHOLDER.sub("", english).strip(
                    " :.()"
                ):
                    continue
                parts = [re.escape(part) for part in PLACEHOLDER.split(english)]
                body = ".+?".join(parts)
                patterns.append((english, re.compile(rf"(?<![\w-]){body}(?![\w-])")))
    return patterns


def english_left(page) -> list[str]:
    shown = sidebar_root(page).evaluate(SHOWN_JS)
    return sorted(
        {
            f"{where}: {text!r} is the English {msgid!r}"
            for text, where in shown
            for msgid, pattern in PATTERNS
            if pattern.search(text)
        }
    )


PATTERNS = english_patterns()


def german_menu_item(page, name: str):
    """Open the header's More menu ("Mehr") and return its item ``name``."""
    more = page.get_by_role("button", name="Mehr", exact=True)
    if more.get_attribute("aria-expanded") != "true":
        more.click()
    menu = page.get_by_role("menu", name="Mehr")
    return menu.get_by_role("menuitemcheckbox", name=name, exact=True).or_(
        menu.get_by_role("menuitem", name=name, exact=True)
    )


def sidebar_root(page):
    return page.locator("#ahentic-sidebar")


@pytest.fixture(params=sorted(VIEWPORTS))
def german_page(request, browser, live_server, owner):  # noqa: F811
    """A German browser (de-DE) logged in as ``owner`` (staff: the Verbose view is offered to
    staff only) at each size, the panel open."""
    make_staff(owner)
    client = Client()
    client.force_login(owner)
    cookie = client.cookies[django_settings.SESSION_COOKIE_NAME]
    context = browser.new_context(
        base_url=live_server.url, viewport=VIEWPORTS[request.param], locale="de-DE"
    )
    context.add_cookies(
        [{"name": cookie.key, "value": cookie.value, "url": live_server.url, "httpOnly": True}]
    )
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto("/")
    launcher = page.locator('[data-role="launcher"]')
    if launcher.is_visible():  # narrow screens start folded
        launcher.click()
    expect(page.locator("#ahentic-panel")).to_be_visible()
    page.viewport_name = request.param
    yield page
    context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


def test_the_walk_finds_english_where_the_page_is_english(browser, live_server, owner):  # noqa: F811
    """The check itself: the same walk over the English sidebar finds the msgids."""
    client = Client()
    client.force_login(owner)
    cookie = client.cookies[django_settings.SESSION_COOKIE_NAME]
    context = browser.new_context(base_url=live_server.url, locale="en-US")
    context.add_cookies(
        [{"name": cookie.key, "value": cookie.value, "url": live_server.url, "httpOnly": True}]
    )
    page = context.new_page()
    page.goto("/")
    expect(page.locator("#ahentic-panel")).to_be_visible()

    found = english_left(page)
    context.close()

    assert any("'Send message'" in line for line in found)
    assert any(
        "'Ask the agent… (Enter sends, Shift+Enter for a new line)'" in line for line in found
    )


@pytest.fixture
def earlier_chat(owner):
    """A chat from before the page loads: the history lists it."""
    from tests.support.factories import SessionFactory

    return SessionFactory(owner=owner, title="Bohnen")


def test_the_german_sidebar_shows_no_english_in_any_state(
    earlier_chat,
    german_page,
    llm,
    sidebar_calls,  # noqa: F811
):
    from orchestrator_app.testing.localapi import text_reply, tool_call, tool_reply

    page = german_page
    assert page.evaluate("document.documentElement.lang") == "de"

    # Empty: no chat yet.
    expect(page.locator('[data-role="send"]')).to_have_text("Senden")
    assert english_left(page) == []

    # A reply.
    llm.enqueue(
        text_reply("Mahlen Sie die Bohnen kurz vor dem Brühen."),
        tool_reply(tool_call("sidebar_publish_note", {"title": "Bohnen"}, id="toolu_pub")),
        text_reply("Die Notiz ist veröffentlicht."),
    )
    page.locator('[data-role="new-session"]').click()
    expect(page.locator(".ahentic-tab.is-active")).to_contain_text("Neuer Agent")
    box = page.locator('[data-role="input"]')
    box.fill("Wie mahle ich Kaffee?")
    box.press("Enter")
    expect(page.locator(".ahentic-assistant .ahentic-msg-text")).to_have_text(
        ["Mahlen Sie die Bohnen kurz vor dem Brühen."]
    )
    status_is(page, "idle")
    # Numbers in German form: "Kontext 3 %" (Intl, the page's language).
    expect(page.locator('[data-role="tokens"]')).to_contain_text(re.compile(r"Kontext \d+\s%"))
    assert english_left(page) == []

    # The reply's actions (Copy, Retry, Edit: in the page, shown on hover or always on a phone)
    # are read with the reply above; here they are named in German.
    reply = page.locator('[data-role="transcript"] > .ahentic-assistant').last
    expect(reply.get_by_role("button", name=re.compile("^Wiederholen"))).to_have_count(1)

    # The More menu, open.
    more = page.get_by_role("button", name="Mehr", exact=True)
    more.click()
    menu = page.get_by_role("menu", name="Mehr")
    expect(menu).to_be_visible()
    assert english_left(page) == []
    page.keyboard.press("Escape")
    expect(menu).to_be_hidden()

    # An approval card in the Basic view.
    box.fill("Veröffentliche eine Notiz über Bohnen")
    box.press("Enter")
    card = hitl_card(page)
    expect(card).to_be_visible()
    expect(card.get_by_role("button", name=re.compile("^Einmal erlauben:"))).to_be_visible()
    assert english_left(page) == []

    # The verbose view (tool calls and results) with the card's details open.
    page.locator('[data-role="more"]').click()
    switch = page.get_by_role("group", name="Ansicht")
    switch.get_by_role("menuitemradio", name="Ausführlich").click()
    card.locator("summary").click()
    screenshot(page, f"sidebar-german-approval-{page.viewport_name}")
    assert english_left(page) == []

    # The decision's line and the reply.
    card.get_by_role("button", name=re.compile("^Einmal erlauben:")).click()
    expect(page.locator(".ahentic-assistant .ahentic-msg-text").last).to_have_text(
        "Die Notiz ist veröffentlicht."
    )
    expect(page.locator('[data-role-kind="decision"]')).to_contain_text("Einmal erlaubt")
    expect(page.locator('[data-role-kind="tool_response"]').first).to_be_visible()
    assert english_left(page) == []
    assert sidebar_calls == [{"tool": "sidebar_publish_note", "input": {"title": "Bohnen"}}]

    # The History panel: the earlier chat under "Heute", the open one marked.
    page.get_by_role("button", name="Verlauf", exact=True).click()
    panel = page.locator('[data-role="history-panel"]')
    expect(panel).to_be_visible()
    expect(panel.locator(".ahentic-history-title", has_text="Bohnen")).to_have_count(1)
    expect(panel.locator(".ahentic-history-day h3").first).to_have_text("Heute")
    expect(panel.locator(".ahentic-history-badge").first).to_have_text("In einem Tab geöffnet")
    screenshot(page, f"sidebar-german-history-{page.viewport_name}")
    assert english_left(page) == []
    page.get_by_role("button", name="Verlauf schließen").click()
    expect(panel).to_be_hidden()

    # The settings (an item of the More menu).
    german_menu_item(page, "Einstellungen").click()
    expect(page.locator('[data-role="settings"]')).to_be_visible()
    expect(page.locator(".ahentic-settings-status")).to_have_text("")
    screenshot(page, f"sidebar-german-settings-{page.viewport_name}")
    assert english_left(page) == []
