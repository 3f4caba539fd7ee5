"""The chat sidebar in a real browser: Playwright drives Debian's chromium against the live server.

The live server runs django-q2 in sync mode (tests.settings), so a POST that starts or resumes a
run executes its steps inside that request's thread while the sidebar keeps polling on others.
The model is the local Messages API server (the ``llm`` fixture).

Without playwright or /usr/bin/chromium the module is skipped, so ``make test`` passes on any
machine; ``AHENTIC_REQUIRE_BROWSER=1`` (set by .ci/browser-leg) turns that skip into a failure.
"""

import json
import re
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.test import Client

from orchestrator_app.testing.localapi import text_reply, tool_call, tool_reply
from sessions_app.models import PendingMessage, Session
from tests.support.browser import (
    LONG_REPLY,
    admin_page,
    assistant_messages,
    covered,
    expect,
    hitl_card,
    make_staff,
    menu_item,
    new_chat,
    only_session,
    open_from_history,
    open_home,
    screenshot,
    send,
    set_view_mode,
    status_is,
    tool_result_block,
    tool_result_json,
)

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("llm_strict"),
]


# --- (a) a message and its reply ----------------------------------------------------------------


def test_a_message_gets_the_reply_and_the_tab_takes_the_provisional_title(page, llm):
    llm.enqueue(text_reply("Grind the beans just before brewing."))
    open_home(page)
    new_chat(page)

    send(page, "How do I make better coffee?")

    expect(assistant_messages(page)).to_have_text(["Grind the beans just before brewing."])
    expect(page.locator(".ahentic-user .ahentic-msg-text")).to_have_text(
        ["How do I make better coffee?"]
    )
    expect(page.locator(".ahentic-tab.is-active")).to_contain_text("How do I make better coffee?")
    status_is(page, "idle")
    expect(page.get_by_role("button", name="Stop the run")).to_be_hidden()
    # The message carried the page's context, which reaches the model.
    [request] = llm.message_requests()
    assert "Ahentic demo" in json.dumps(request)
    assert only_session().page_context["title"] == "Ahentic demo"
    # The open tab (with autoTitle beside it) is remembered for the next page load.
    stored = page.evaluate(
        "Object.entries(localStorage).filter(([k]) => k.endsWith(':tabs')).map(([, v]) => v)"
    )
    [tabs] = [json.loads(value) for value in stored]
    assert tabs["active"] == str(only_session().pk)
    assert tabs["open"] == [
        {"id": str(only_session().pk), "title": "How do I make better coffee?", "autoTitle": True}
    ]
    screenshot(page, "sidebar")


def test_typing_without_an_open_chat_starts_one(page, llm):
    llm.enqueue(text_reply("A new chat, just for you."))
    open_home(page)
    expect(page.locator(".ahentic-tab")).to_have_count(0)

    send(page, "Hello there")

    expect(assistant_messages(page)).to_have_text(["A new chat, just for you."])
    expect(page.locator(".ahentic-tab.is-active")).to_contain_text("Hello there")


def test_the_open_tabs_survive_a_reload(page, llm):
    llm.enqueue(text_reply("Hello again."))
    open_home(page)
    new_chat(page)
    send(page, "Remember me")
    expect(assistant_messages(page)).to_have_text(["Hello again."])

    page.reload()

    expect(page.locator(".ahentic-tab.is-active")).to_contain_text("Remember me")
    expect(assistant_messages(page)).to_have_text(["Hello again."])


def test_shift_enter_adds_a_newline_instead_of_sending(page, llm):
    open_home(page)
    new_chat(page)
    box = page.get_by_label("Message the agent")
    box.fill("first line")

    box.press("Shift+Enter")
    box.type("second line")

    expect(box).to_have_value("first line\nsecond line")
    assert llm.message_requests() == []


def test_the_view_mode_switch_shows_tool_calls_in_verbose(page, llm, owner):
    make_staff(owner)
    llm.enqueue(
        tool_reply(tool_call("echo", {"text": "ping"}, id="toolu_echo")), text_reply("Echoed.")
    )
    open_home(page)
    new_chat(page)
    send(page, "Echo ping")
    expect(assistant_messages(page)).to_have_text(["Echoed."])
    expect(page.locator(".ahentic-tool-call")).to_have_count(0)

    set_view_mode(page, "verbose")

    expect(page.locator(".ahentic-tool-call")).to_contain_text("echo")
    expect(page.locator(".ahentic-tool-result")).to_contain_text("echo ok")
    assert only_session().view_mode == "verbose"


# --- (b) approvals ------------------------------------------------------------------------------


def test_allow_once_runs_the_tool_and_the_reply_follows(page, llm, sidebar_calls, owner):
    make_staff(owner)
    llm.enqueue(
        tool_reply(tool_call("sidebar_publish_note", {"title": "Beans"}, id="toolu_pub")),
        text_reply("Published your note."),
    )
    open_home(page)
    new_chat(page)

    send(page, "Publish a note about beans")

    card = hitl_card(page)
    expect(card).to_be_visible()
    expect(card).to_contain_text("Publish the note 'Beans'")
    # Basic: the tool's label, no registry name and no raw input; Verbose adds them.
    expect(card).to_contain_text("Publish a note")
    expect(card).not_to_contain_text("sidebar_publish_note")
    set_view_mode(page, "verbose")
    expect(card).to_contain_text("sidebar_publish_note")
    expect(card.locator("pre")).to_contain_text('"title": "Beans"')  # the input preview
    for name in ("Allow once", "Allow for this chat", "Always allow", "Deny"):
        expect(card.get_by_role("button", name=re.compile(f"^{name}:"))).to_be_visible()
    status_is(page, "awaiting_human")
    expect(card).not_to_contain_text("null")
    screenshot(page, "sidebar-approval")
    assert sidebar_calls == []

    card.get_by_role("button", name=re.compile("^Allow once:")).click()

    expect(assistant_messages(page)).to_have_text(["Published your note."])
    expect(card).to_be_hidden()
    status_is(page, "idle")
    assert sidebar_calls == [{"tool": "sidebar_publish_note", "input": {"title": "Beans"}}]
    assert tool_result_json(llm.message_requests()[1], "toolu_pub")["published"] == "Beans"


def test_deny_sends_the_reason_and_the_tool_never_runs(page, llm, sidebar_calls):
    llm.enqueue(
        tool_reply(tool_call("sidebar_publish_note", {"title": "Beans"}, id="toolu_pub")),
        text_reply("Understood, not publishing."),
    )
    open_home(page)
    new_chat(page)
    send(page, "Publish a note about beans")
    card = hitl_card(page)
    expect(card).to_be_visible()

    card.get_by_label("Reason for denying").fill("Not before the review")
    card.get_by_role("button", name=re.compile("^Deny:")).click()

    expect(assistant_messages(page)).to_have_text(["Understood, not publishing."])
    assert sidebar_calls == []
    result = tool_result_json(llm.message_requests()[1], "toolu_pub")
    assert result["error"] == "user_denied"
    assert result["reason"] == "Not before the review"


def test_a_non_preallowable_tool_offers_only_allow_once_and_deny(page, llm, sidebar_calls):
    llm.enqueue(tool_reply(tool_call("sidebar_wipe_notes", {})), text_reply("Wiped."))
    open_home(page)
    new_chat(page)

    send(page, "Wipe my notes")

    card = hitl_card(page)
    expect(card.get_by_role("button", name=re.compile("^Allow once:"))).to_be_visible()
    expect(card.get_by_role("button", name=re.compile("^Deny:"))).to_be_visible()
    expect(card.get_by_role("button", name=re.compile("^Allow for this chat"))).to_have_count(0)
    expect(card.get_by_role("button", name=re.compile("^Always allow"))).to_have_count(0)


# --- (c) browser tools --------------------------------------------------------------------------


def test_page_read_sends_at_most_the_page_text_limit(page, llm):
    llm.enqueue(
        tool_reply(tool_call("page_read", {}, id="toolu_read")),
        text_reply("A long page."),
    )
    open_home(page)
    page.evaluate(
        """() => {
            const long = document.createElement("p");
            long.textContent = "lorem ".repeat(3000);
            document.querySelector("main, body").append(long);
        }"""
    )
    new_chat(page)

    send(page, "What is on this page?")

    expect(assistant_messages(page)).to_have_text(["A long page."])
    result = tool_result_json(llm.message_requests()[1], "toolu_read")
    assert len(result["text"]) == 4000
    assert result["textTruncated"] is True


def test_page_read_runs_in_the_page_and_the_model_reads_the_result(page, llm):
    llm.enqueue(
        tool_reply(tool_call("page_read", {}, id="toolu_read")),
        text_reply("This is the Ahentic demo page."),
    )
    open_home(page)
    page.fill("#account-password", "hunter2-very-secret")  # typed by the user, never sent
    page.fill("#newsletter-email", "reader@example.com")
    new_chat(page)

    send(page, "What is on this page?")

    expect(assistant_messages(page)).to_have_text(["This is the Ahentic demo page."])
    requests = llm.message_requests()
    result = tool_result_json(requests[1], "toolu_read")
    assert result["title"] == "Ahentic demo"
    assert result["url"].endswith("/")
    assert {"level": 2, "text": "Coffee newsletter"} in result["headings"]
    assert "One email a month about beans" in result["text"]
    assert len(result["text"]) <= 4000
    fields = {field.get("name"): field for field in result["fields"]}
    assert fields["newsletter_email"]["label"] == "Email address"
    assert fields["newsletter_email"]["value"] == "reader@example.com"
    assert fields["password"]["type"] == "password"
    assert "value" not in fields["password"]
    # Nothing of the sidebar itself, no password, no CSRF token is read from the page.
    assert "Message the agent" not in result["text"]
    assert "hunter2" not in json.dumps(requests[1])
    assert "csrfmiddlewaretoken" not in fields


def test_page_read_with_a_selector_reads_that_part(page, llm):
    llm.enqueue(
        tool_reply(tool_call("page_read", {"selector": "#account-form"}, id="toolu_read")),
        text_reply("Read it."),
    )
    open_home(page)
    new_chat(page)

    send(page, "Read the account form")

    expect(assistant_messages(page)).to_have_text(["Read it."])
    result = tool_result_json(llm.message_requests()[1], "toolu_read")
    assert [field["name"] for field in result["fields"]] == ["display_name", "password"]
    assert "newsletter" not in result["text"].lower()


def test_page_read_with_an_unknown_selector_answers_an_error(page, llm):
    llm.enqueue(
        tool_reply(tool_call("page_read", {"selector": "#nowhere"}, id="toolu_read")),
        text_reply("No such part."),
    )
    open_home(page)
    new_chat(page)

    send(page, "Read the missing part")

    expect(assistant_messages(page)).to_have_text(["No such part."])
    block = tool_result_block(llm.message_requests()[1], "toolu_read")
    assert block.get("is_error") is True
    assert "#nowhere" in json.dumps(block)


def test_page_fill_fields_fills_the_form_without_submitting_it(page, llm):
    llm.enqueue(
        tool_reply(
            tool_call(
                "page_fill_fields",
                {
                    "fields": {
                        "newsletter_email": "ada@example.com",
                        "newsletter_frequency": "weekly",
                    }
                },
                id="toolu_fill",
            )
        ),
        text_reply("I filled in the newsletter form; press Subscribe when ready."),
    )
    open_home(page)
    page.evaluate(
        """() => {
            window.__submits = 0;
            window.__inputs = 0;
            const form = document.getElementById('newsletter-form');
            form.addEventListener('submit', () => window.__submits++);
            form.addEventListener('input', () => window.__inputs++);
        }"""
    )
    new_chat(page)

    send(page, "Sign me up for the weekly newsletter as ada@example.com")

    expect(assistant_messages(page)).to_contain_text(["I filled in the newsletter form"])
    expect(page.locator("#newsletter-email")).to_have_value("ada@example.com")
    expect(page.locator("#newsletter-frequency")).to_have_value("weekly")
    assert page.evaluate("window.__submits") == 0
    assert page.evaluate("window.__inputs") >= 2
    result = tool_result_json(llm.message_requests()[1], "toolu_fill")
    assert result["ok"] is True
    assert sorted(result["filled"]) == ["newsletter_email", "newsletter_frequency"]


def test_filling_a_password_field_asks_first_then_runs_in_the_page(page, llm):
    llm.enqueue(
        tool_reply(
            tool_call("page_fill_fields", {"fields": {"password": "correct horse"}}, id="toolu_pw")
        ),
        text_reply("Password filled."),
    )
    open_home(page)
    new_chat(page)

    send(page, "Put my password in")

    card = hitl_card(page)
    expect(card).to_contain_text("Fill password")
    expect(page.locator("#account-password")).to_have_value("")
    card.get_by_role("button", name=re.compile("^Allow once:")).click()

    expect(assistant_messages(page)).to_have_text(["Password filled."])
    expect(page.locator("#account-password")).to_have_value("correct horse")
    assert tool_result_json(llm.message_requests()[1], "toolu_pw")["filled"] == ["password"]


def test_page_fill_fields_reports_fields_it_could_not_find(page, llm):
    llm.enqueue(
        tool_reply(tool_call("page_fill_fields", {"fields": {"shoe_size": "42"}}, id="toolu_fill")),
        text_reply("There is no such field."),
    )
    open_home(page)
    new_chat(page)

    send(page, "Fill my shoe size")

    expect(assistant_messages(page)).to_have_text(["There is no such field."])
    block = tool_result_block(llm.message_requests()[1], "toolu_fill")
    assert block.get("is_error") is True
    assert tool_result_json(llm.message_requests()[1], "toolu_fill")["notFound"] == ["shoe_size"]


def test_only_one_window_runs_a_browser_tool(context, page, llm):
    llm.enqueue(tool_reply(tool_call("page_read", {}, id="toolu_read")), text_reply("Read once."))
    open_home(page)
    new_chat(page)
    watcher = context.new_page()  # the same chat open in a second window
    open_home(watcher)
    expect(watcher.locator(".ahentic-tab.is-active")).to_contain_text("New Agent")
    posts = []
    for window in (page, watcher):
        window.on(
            "request",
            lambda request, window=window: (
                posts.append(window)
                if request.method == "POST" and request.url.endswith("/browser-results")
                else None
            ),
        )

    send(page, "Read the page")

    expect(assistant_messages(page)).to_have_text(["Read once."])
    expect(assistant_messages(watcher)).to_have_text(["Read once."])
    assert posts == [page]


# --- (d) nothing from the API runs as HTML ----------------------------------------------------


def test_user_and_model_text_is_shown_as_text_and_never_runs(page, llm):
    hostile = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script> hi'
    llm.enqueue(text_reply('Echo: <img src=y onerror="window.__pwned=3"><b>bold</b>'))
    open_home(page)
    new_chat(page)

    send(page, hostile)

    expect(assistant_messages(page)).to_have_text(
        ['Echo: <img src=y onerror="window.__pwned=3"><b>bold</b>']
    )
    expect(page.locator(".ahentic-user .ahentic-msg-text")).to_have_text([hostile])
    expect(page.locator(".ahentic-tab.is-active")).to_contain_text("<img src=x")
    assert (
        page.locator("#ahentic-sidebar img, #ahentic-sidebar script, #ahentic-sidebar b").count()
        == 0
    )
    assert page.evaluate("window.__pwned") is None


# --- (e) Stop -----------------------------------------------------------------------------------


def test_stop_during_a_run_cancels_it_and_the_composer_returns_to_idle(page, llm, gate):
    llm.enqueue(text_reply("Too late to matter.", gate=gate))
    open_home(page)
    new_chat(page)
    send(page, "Take your time")
    status_is(page, "running")
    stop_button = page.get_by_role("button", name="Stop the run")
    expect(stop_button).to_be_visible()
    expect(page.locator('[data-role="progress"]')).not_to_be_empty()

    stop_button.click()

    status_is(page, "cancelled")
    expect(stop_button).to_be_hidden()
    expect(page.locator('[data-role="progress"]')).to_be_empty()
    expect(page.locator('[data-role="banner"]')).to_be_hidden()
    expect(page.locator(".ahentic-event")).to_contain_text(["Run cancelled."])
    assert only_session().status == Session.Status.CANCELLED

    gate.set()  # the model's late answer is recorded as usage only, never shown
    assert llm.wait_for_requests(1)
    page.wait_for_timeout(1500)
    status_is(page, "cancelled")
    expect(page.get_by_text("Too late to matter.")).to_have_count(0)


# --- (f) queued messages ------------------------------------------------------------------------


def test_a_message_sent_while_running_is_queued_and_can_be_recalled(page, llm, gate):
    llm.enqueue(text_reply("First answer.", gate=gate))
    open_home(page)
    new_chat(page)
    send(page, "First question")
    status_is(page, "running")

    send(page, "Actually, one more thing")

    pending = page.locator('[data-role="pending"]')
    expect(pending).to_contain_text("Actually, one more thing")
    assert PendingMessage.objects.count() == 1
    screenshot(page, "sidebar-pending")

    with page.expect_response(lambda r: "/pending-messages/" in r.url) as recalled:
        pending.get_by_role("button", name=re.compile("^Recall")).click()

    expect(pending).to_be_hidden()
    assert recalled.value.status == 204
    assert PendingMessage.objects.count() == 0
    gate.set()
    expect(assistant_messages(page)).to_have_text(["First answer."])
    status_is(page, "idle")
    # The recalled message never reached the model.
    assert len(llm.message_requests()) == 1
    assert "one more thing" not in json.dumps(llm.message_requests())


# --- plan and artifacts -------------------------------------------------------------------------

PLAN_STEPS = [
    {"id": "grind", "content": "Grind the beans", "status": "in_progress"},
    {"id": "brew", "content": "Brew the coffee", "status": "pending"},
    {"id": "pour", "content": "Pour it", "status": "pending"},
]


def test_the_plan_card_and_the_artifacts_list_follow_the_run(page, llm, gate):
    llm.enqueue(
        tool_reply(
            tool_call("update_plan", {"title": "Morning coffee", "steps": PLAN_STEPS}),
            tool_call(
                "stage_artifact",
                {
                    "key": "recipe",
                    "kind": "markdown",
                    "title": "Pour-over recipe",
                    "payload": {"content": "# Pour-over\n15 g coffee, 250 g water."},
                },
            ),
        ),
        text_reply("Coffee is ready.", gate=gate),
    )
    open_home(page)
    new_chat(page)

    send(page, "Make me a coffee plan")

    plan = page.locator('[data-role="plan"]')
    expect(plan).to_contain_text("Morning coffee")
    expect(plan.locator("li")).to_have_text(
        [re.compile("Grind the beans"), re.compile("Brew the coffee"), re.compile("Pour it")]
    )
    expect(plan.locator('li[data-status="in_progress"]')).to_contain_text("Grind the beans")
    artifacts = page.locator('[data-role="artifacts-box"]')
    expect(artifacts).to_contain_text("Artifacts (1)")
    artifacts.locator("summary").click()
    # Basic: a sentence (the key, kind and status are Verbose's).
    expect(artifacts.locator("li")).to_contain_text(["Drafted “Pour-over recipe” (52 bytes)"])
    screenshot(page, "sidebar-plan")

    gate.set()

    expect(assistant_messages(page)).to_have_text(["Coffee is ready."])
    expect(plan.locator('li[data-status="completed"]')).to_have_count(3)


# --- stalls and pauses ----------------------------------------------------------------------------


def test_a_stalled_run_opened_from_history_is_nudged_and_finishes(page, llm, owner):
    """A run whose worker vanished: the runner window POSTs continue, which re-enqueues it."""
    from datetime import timedelta
    from unittest import mock

    from django.utils import timezone

    from orchestrator_app.control import runs
    from tests.support.factories import SessionFactory

    session = SessionFactory(owner=owner, title="Stalled chat")
    with mock.patch.object(runs, "enqueue_step"):  # the step is lost, as if q2 dropped it
        runs.message_post(session=session, content="Finish this, please")
    Session.objects.filter(pk=session.pk).update(heartbeat_at=timezone.now() - timedelta(minutes=2))
    llm.enqueue(text_reply("Finished after the nudge."))
    open_home(page)

    open_from_history(page, session.pk)

    expect(page.locator(".ahentic-tab.is-active")).to_contain_text("Stalled chat")
    expect(assistant_messages(page)).to_have_text(["Finished after the nudge."])
    status_is(page, "idle")
    assert "run_requeue" in [
        t.type for t in Session.objects.get(pk=session.pk).trace_events.order_by("seq")
    ]


def test_the_soft_budget_pause_offers_continue_and_stop(page, llm, owner):
    from tests.support.factories import SessionFactory

    session = SessionFactory(owner=owner, title="Big chat")
    Session.objects.filter(pk=session.pk).update(
        status=Session.Status.ERROR,
        job_resumable=True,
        last_error="Paused after 200k tokens.",
        last_error_code="ahentic_session_token_budget",
        tokens_in=200_000,
        tokens_out=1_000,
    )
    open_home(page)
    open_from_history(page, session.pk)

    banner = page.locator('[data-role="banner"]')
    expect(banner).to_contain_text("This chat is using a lot of tokens (201.0k)")
    expect(banner.get_by_role("button", name="Continue")).to_be_visible()
    banner.get_by_role("button", name="Stop").click()

    expect(banner).to_be_hidden()
    status_is(page, "cancelled")
    assert not Session.objects.get(pk=session.pk).job_resumable


def test_an_api_error_shows_as_an_inline_error_line(page, llm, settings):
    settings.AHENTIC = {**settings.AHENTIC, "MAX_MESSAGE_CHARS": 10}
    open_home(page)
    new_chat(page)

    send(page, "This message is far too long")

    error = page.locator('[data-role="error"]')
    expect(error).to_be_visible()
    expect(error).to_contain_text("The message has 28 characters; the limit is 10.")
    expect(error).not_to_contain_text("ahentic_message_too_long")  # the code: Debug only
    # The text comes back to the composer to fix and resend; no bubble stays behind.
    expect(page.get_by_label("Message the agent")).to_have_value("This message is far too long")
    expect(page.locator(".ahentic-user")).to_have_count(0)


# --- banners, tokens and the debugger ------------------------------------------------------------


def test_a_resumable_error_shows_the_continue_banner(page, llm):
    llm.enqueue(*[tool_reply(tool_call("echo", {"text": str(n)})) for n in range(3)])
    llm.enqueue(text_reply("Finished after continuing."))
    open_home(page)
    new_chat(page)
    session = only_session()
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(django_settings.AHENTIC, "MAX_STEPS_PER_RUN", 2)
        send(page, "Echo three times")
        banner = page.locator('[data-role="banner"]')
        expect(banner).to_contain_text("This job can be continued.")
    assert Session.objects.get(pk=session.pk).job_resumable

    banner.get_by_role("button", name="Continue").click()

    expect(assistant_messages(page).last).to_have_text("Finished after continuing.")
    expect(banner).to_be_hidden()


def test_the_debugger_downloads_the_diagnostics(page, llm):
    llm.enqueue(text_reply("Hi."))
    open_home(page)
    new_chat(page)
    send(page, "Hello")
    expect(assistant_messages(page)).to_have_text(["Hi."])

    menu_item(page, "Show the debugger").click()
    download_button = page.get_by_role("button", name="Download JSON")
    expect(download_button).to_be_enabled()
    expect(page.locator('[data-role="trace"]')).to_contain_text("run_start")
    with page.expect_download() as info:
        download_button.click()

    bundle = json.loads(Path(info.value.path()).read_text())
    assert bundle["id"] == str(only_session().pk)
    assert "run_start" in [row["type"] for row in bundle["trace"]]


def test_the_context_ring_and_the_token_count_follow_the_payload(page, llm):
    llm.enqueue(text_reply("Counted."))
    open_home(page)
    new_chat(page)

    send(page, "Count my tokens")

    expect(assistant_messages(page)).to_have_text(["Counted."])
    tokens = page.locator('[data-role="tokens"]')
    expect(tokens).to_contain_text("tokens")
    used = only_session().tokens_used
    assert used > 0
    expect(tokens).to_contain_text(
        f"{used / 1000:.1f}k tokens" if used >= 1000 else f"{used} tokens"
    )


def test_the_panel_collapses_and_the_choice_is_remembered(page):
    open_home(page)

    page.get_by_role("button", name="Collapse the agent panel").click()

    expect(page.locator("#ahentic-panel")).to_be_hidden()
    page.reload()
    launcher = page.get_by_role("button", name="Open the agent panel")
    expect(launcher).to_be_visible()
    launcher.click()
    expect(page.locator("#ahentic-panel")).to_be_visible()


# --- the admin ------------------------------------------------------------------------------------


def test_the_sidebar_works_in_the_admin_starting_folded(browser, live_server, llm, settings):
    from tests.support.factories import UserFactory

    settings.AHENTIC = {**settings.AHENTIC, "ADMIN_SIDEBAR": True}
    staff = UserFactory(username="staff", is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(staff)
    cookie = client.cookies[django_settings.SESSION_COOKIE_NAME]
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 860})
    context.add_cookies([{"name": cookie.key, "value": cookie.value, "url": live_server.url}])
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    llm.enqueue(text_reply("Hello, admin."))
    try:
        page.goto("/admin/")
        expect(page.locator("#site-name")).to_contain_text("Django administration")
        expect(page.locator("#ahentic-panel")).to_be_hidden()

        page.get_by_role("button", name="Open the agent panel").click()
        new_chat(page)
        send(page, "Hi from the admin")

        expect(assistant_messages(page)).to_have_text(["Hello, admin."])
        screenshot(page, "sidebar-admin")
        assert not errors, errors
    finally:
        context.close()


# --- Markdown in replies --------------------------------------------------------------------------

MARKDOWN_REPLY = """## Brewing guide

Use **fresh** beans and `filtered` water:

- Grind medium-fine
- Bloom for 30 s

| Method | Ratio |
|---|---|
| V60 | 1:16 |

```python
print("brew")
```

Read [the guide](https://example.com/coffee) or mail <baristas@example.com>."""


def test_a_markdown_reply_renders_headings_lists_tables_code_and_links(context, page, llm):
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    llm.enqueue(text_reply(MARKDOWN_REPLY))
    open_home(page)
    new_chat(page)

    send(page, "**How** do I brew? # not a heading")

    reply = page.locator(".ahentic-assistant .ahentic-msg-text")
    expect(reply.locator("h2")).to_have_text("Brewing guide")
    expect(reply.locator("strong")).to_have_text("fresh")
    expect(reply.locator("p code")).to_have_text("filtered")
    expect(reply.locator("ul > li")).to_have_text(["Grind medium-fine", "Bloom for 30 s"])
    expect(reply.locator("table th")).to_have_text(["Method", "Ratio"])
    expect(reply.locator("table td")).to_have_text(["V60", "1:16"])
    expect(reply.locator("pre code")).to_have_text('print("brew")\n')
    link = reply.get_by_role("link", name="the guide")
    expect(link).to_have_attribute("href", "https://example.com/coffee")
    expect(link).to_have_attribute("target", "_blank")
    expect(link).to_have_attribute("rel", "noopener noreferrer")
    expect(reply.get_by_role("link", name="baristas@example.com")).to_have_attribute(
        "href", "mailto:baristas@example.com"
    )
    # The code block keeps its lines (it scrolls sideways) and copies its text.
    assert page.locator(".ahentic-md-code pre").evaluate("e => getComputedStyle(e).whiteSpace") == (
        "pre"
    )
    page.get_by_role("button", name="Copy code").click()
    expect(page.get_by_role("button", name="Copy code")).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == 'print("brew")\n'
    # The user's own text stays plain text.
    user = page.locator(".ahentic-user .ahentic-msg-text")
    expect(user).to_have_text("**How** do I brew? # not a heading")
    assert user.locator("strong, h1").count() == 0
    screenshot(page, "sidebar-markdown")


def test_raw_html_and_script_links_in_a_reply_never_become_markup(page, llm):
    llm.enqueue(
        text_reply(
            'Look: <img src=x onerror="window.__pwned=1"> and <script>window.__pwned=2</script>\n\n'
            "[click me](javascript:window.__pwned=3) or [this](JAVASCRIPT:alert(1)) "
            'or <a href="javascript:window.__pwned=4">that</a> or ![pic](https://example.com/x.png)'
        )
    )
    open_home(page)
    new_chat(page)

    send(page, "Be hostile")

    reply = page.locator(".ahentic-assistant .ahentic-msg-text")
    expect(reply).to_contain_text('<img src=x onerror="window.__pwned=1">')
    expect(reply).to_contain_text("<script>window.__pwned=2</script>")
    sidebar_markup = page.locator("#ahentic-sidebar")
    assert sidebar_markup.locator("img, script, iframe, [onerror]").count() == 0
    hrefs = reply.locator("a").evaluate_all("links => links.map(a => a.getAttribute('href'))")
    assert all(href and href.startswith("https://") for href in hrefs), hrefs
    reply.get_by_text("click me", exact=False).click()
    page.wait_for_timeout(300)
    assert page.evaluate("window.__pwned") is None


# --- rough edges ----------------------------------------------------------------------------------


def tab_is_fully_visible(page) -> bool:
    return page.evaluate(
        """() => {
            const strip = document.querySelector('[data-role="tabs"]').getBoundingClientRect();
            const tab = document.querySelector('.ahentic-tab.is-active').getBoundingClientRect();
            return tab.left >= strip.left - 1 && tab.right <= strip.right + 1;
        }"""
    )


def test_the_active_tab_stays_in_view_and_arrow_keys_move_between_tabs(page):
    open_home(page)
    for count in range(1, 9):
        page.get_by_role("button", name="New chat").click()
        expect(page.locator(".ahentic-tab")).to_have_count(count)
    overflow = page.locator('[data-role="tabs"]').evaluate("e => e.scrollWidth > e.clientWidth")
    assert overflow, "eight tabs should not fit: the test would prove nothing"
    assert tab_is_fully_visible(page)

    tabs = page.get_by_role("tab")
    tabs.last.focus()
    page.keyboard.press("Home")

    expect(tabs.first).to_have_attribute("aria-selected", "true")
    expect(tabs.first).to_be_focused()
    assert tab_is_fully_visible(page)
    page.keyboard.press("ArrowLeft")  # wraps around to the last tab
    expect(tabs.last).to_have_attribute("aria-selected", "true")
    assert tab_is_fully_visible(page)
    page.keyboard.press("ArrowRight")
    expect(tabs.first).to_have_attribute("aria-selected", "true")
    page.keyboard.press("ArrowRight")
    expect(tabs.nth(1)).to_have_attribute("aria-selected", "true")
    expect(tabs.nth(1)).to_be_focused()
    # Only the active tab is in the focus order (one Tab stop for the whole strip).
    assert tabs.evaluate_all("ts => ts.filter(t => t.tabIndex === 0).length") == 1

    page.reload()
    expect(page.locator(".ahentic-tab.is-active")).to_have_count(1)
    assert tab_is_fully_visible(page)


def test_after_stop_a_queued_message_says_what_happens_and_can_be_sent_now(page, llm, gate):
    llm.enqueue(text_reply("Too late.", gate=gate), text_reply("Here is the second answer."))
    open_home(page)
    new_chat(page)
    send(page, "First question")
    status_is(page, "running")
    send(page, "Second question")
    pending = page.locator('[data-role="pending"]')
    expect(pending).to_contain_text("Queued until the agent is free")

    page.get_by_role("button", name="Stop the run").click()

    status_is(page, "cancelled")
    expect(pending).to_contain_text("Not sent yet")
    expect(pending).to_contain_text("goes with your next message")
    expect(pending).not_to_contain_text("Queued until the agent is free")
    expect(pending.get_by_role("button", name=re.compile("^Recall"))).to_be_visible()
    gate.set()
    assert llm.wait_for_requests(1)

    pending.get_by_role("button", name=re.compile("^Send now")).click()

    expect(assistant_messages(page)).to_have_text(["Here is the second answer."])
    expect(pending).to_be_hidden()
    assert PendingMessage.objects.count() == 0
    second = llm.message_requests()[1]
    assert "Second question" in json.dumps(second["messages"][-1])


def test_the_stuck_banner_says_what_to_check_and_keeps_the_newest_message_in_view(page, llm, owner):
    from datetime import timedelta

    from django.utils import timezone

    from sessions_app import services as session_services
    from sessions_app.models import Event
    from tests.support.factories import SessionFactory

    session = SessionFactory(owner=owner, title="Long chat")
    session_services.events_append(
        session_id=session.pk,
        items=[
            {
                "kind": Event.Kind.USER_MESSAGE if n % 2 == 0 else Event.Kind.AGENT_MESSAGE,
                "content": f"Message number {n}\n\nwith a second paragraph",
            }
            for n in range(30)
        ],
    )
    # A run whose worker holds a lease but went quiet: Continue cannot requeue it yet.
    Session.objects.filter(pk=session.pk).update(
        status=Session.Status.RUNNING,
        lease_token="held-by-a-worker",
        lease_expires_at=timezone.now() + timedelta(minutes=10),
        heartbeat_at=timezone.now() - timedelta(minutes=2),
    )
    open_home(page)
    open_from_history(page, session.pk)

    banner = page.locator('[data-role="banner"]')
    expect(banner).to_contain_text("This run may be stuck")
    expect(banner).to_contain_text("Check that a worker is running")
    expect(banner).to_contain_text("qcluster")
    expect(banner.get_by_role("button", name="Continue")).to_be_visible()
    newest = page.get_by_text("Message number 29")
    expect(newest).to_be_in_viewport()
    visible = newest.evaluate(
        """e => {
            const box = document.querySelector('[data-role="transcript"]').getBoundingClientRect();
            const r = e.getBoundingClientRect();
            return r.top >= box.top && r.bottom <= box.bottom + 1;
        }"""
    )
    assert visible
    screenshot(page, "sidebar-stuck")


def test_long_summaries_and_status_lines_are_shortened_with_show_more(
    page, llm, owner, sidebar_calls
):
    from datetime import timedelta

    from django.utils import timezone

    from tests.support.factories import SessionFactory

    # The tool registry cuts summaries at 300 characters: the marker sits before that.
    title = "A very long note title " + "with many words " * 12 + "THE END " + "and more " * 5
    llm.enqueue(tool_reply(tool_call("sidebar_publish_note", {"title": title}, id="toolu_long")))
    busy = SessionFactory(owner=owner, title="Busy chat")  # listed in the history on page load
    open_home(page)
    new_chat(page)
    send(page, "Publish a long note")

    summary = hitl_card(page).locator(".ahentic-hitl-summary")
    expect(summary).to_contain_text("Publish the note")
    expect(summary).not_to_contain_text("THE END")
    summary.get_by_role("button", name="Show more").click()
    expect(summary).to_contain_text("THE END")
    summary.get_by_role("button", name="Show less").click()
    expect(summary).not_to_contain_text("THE END")

    label = "Reading the whole catalogue, " + "page after page, " * 10 + "LAST PAGE"
    Session.objects.filter(pk=busy.pk).update(
        status=Session.Status.RUNNING,
        lease_token="held-by-a-worker",
        lease_expires_at=timezone.now() + timedelta(minutes=10),
        heartbeat_at=timezone.now(),
        progress={"label": label, "updatedAt": timezone.now().isoformat()},
    )
    open_from_history(page, busy.pk)
    progress = page.locator('[data-role="progress"]')
    expect(progress).to_contain_text("Reading the whole catalogue")
    expect(progress).not_to_contain_text("LAST PAGE")
    progress.get_by_role("button", name="Show more").click()
    expect(progress).to_contain_text("LAST PAGE")
    page.wait_for_timeout(1500)  # heartbeats and polls re-render the line: it stays open
    expect(progress).to_contain_text("LAST PAGE")


def test_decisions_show_in_the_transcript_in_every_view_mode(page, llm, sidebar_calls, owner):
    make_staff(owner)  # Verbose and Debug are offered to staff only
    llm.enqueue(
        tool_reply(tool_call("sidebar_publish_note", {"title": "Beans"}, id="toolu_one")),
        tool_reply(tool_call("sidebar_publish_note", {"title": "Milk"}, id="toolu_two")),
        text_reply("Published one of them."),
    )
    open_home(page)
    new_chat(page)
    send(page, "Publish two notes")
    card = hitl_card(page)
    card.get_by_role("button", name=re.compile("^Allow once:")).click()
    expect(card).to_contain_text("Publish the note 'Milk'")
    card.get_by_label("Reason for denying").fill("No milk today")
    card.get_by_role("button", name=re.compile("^Deny:")).click()
    expect(assistant_messages(page)).to_have_text(["Published one of them."])

    decisions = page.locator(".ahentic-decision")
    # The Basic view says the decision only; Verbose and Debug name the tool too.
    expect(decisions).to_have_text(["Allowed once", "Denied: No milk today"])
    expected = [
        "Allowed once (sidebar_publish_note)",
        "Denied: No milk today (sidebar_publish_note)",
    ]
    for view_mode in ("verbose", "debug"):
        set_view_mode(page, view_mode)
        expect(page.locator(".ahentic-tool-call")).to_have_count(2)
        expect(decisions).to_have_text(expected)
    assert sidebar_calls == [{"tool": "sidebar_publish_note", "input": {"title": "Beans"}}]


def test_artifacts_open_as_a_preview_and_escape_closes_it_then_the_panel(page, llm):
    llm.enqueue(
        tool_reply(
            tool_call(
                "stage_artifact",
                {
                    "key": "recipe",
                    "kind": "markdown",
                    "title": "Pour-over recipe",
                    "payload": {"content": "# Pour-over\n\n- 15 g coffee\n- 250 g water"},
                },
            ),
            tool_call(
                "stage_artifact",
                {
                    "key": "banner",
                    "kind": "html",
                    "title": "Shop banner",
                    "payload": {"content": '<h1>Sale</h1><img src=x onerror="window.__pwned=1">'},
                },
            ),
        ),
        text_reply("Staged two drafts."),
    )
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    open_home(page)
    new_chat(page)
    send(page, "Draft a recipe and a banner")
    expect(assistant_messages(page)).to_have_text(["Staged two drafts."])
    artifacts = page.locator('[data-role="artifacts-box"]')
    artifacts.locator("summary").click()
    preview = page.get_by_role("region", name="Artifact preview")

    open_recipe = artifacts.get_by_role("button", name="Open artifact recipe")
    open_recipe.click()

    # Markdown renders in a sandboxed frame: no scripts, an origin of its own.
    frame_node = preview.locator("iframe")
    expect(frame_node).to_have_attribute("sandbox", "")
    frame = preview.frame_locator("iframe")
    expect(frame.locator("h1")).to_have_text("Pour-over")
    expect(frame.locator("li")).to_have_text(["15 g coffee", "250 g water"])
    expect(preview).to_contain_text("Pour-over recipe")
    # Copy takes the source; Download saves it under the artifact's key.
    preview.get_by_role("button", name="Copy the artifact's source").click()
    expect(preview.get_by_role("button", name="Copy the artifact's source")).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == (
        "# Pour-over\n\n- 15 g coffee\n- 250 g water"
    )
    with page.expect_download() as download:
        preview.get_by_role("button", name="Download the artifact").click()
    assert download.value.suggested_filename == "recipe.md"
    assert Path(download.value.path()).read_text() == "# Pour-over\n\n- 15 g coffee\n- 250 g water"

    # HTML renders too, but its script never runs; the source is one click away.
    artifacts.get_by_role("button", name="Open artifact banner").click()
    expect(frame.locator("h1")).to_have_text("Sale")
    inner = next(f for f in page.frames if f.parent_frame is not None)
    assert inner.evaluate("window.__pwned") is None
    assert inner.evaluate("window.origin") == "null"  # sandboxed: not this site's origin
    assert page.evaluate("window.__pwned") is None
    show_source = preview.get_by_role("button", name="Show source")
    show_source.click()
    source = preview.locator("pre")
    expect(source).to_have_text('<h1>Sale</h1><img src=x onerror="window.__pwned=1">')
    expect(preview.locator("iframe")).to_have_count(0)
    expect(preview.get_by_role("button", name="Show preview")).to_have_attribute(
        "aria-pressed", "true"
    )
    screenshot(page, "sidebar-artifact")

    preview.get_by_role("button", name="Close the preview").focus()
    page.keyboard.press("Escape")
    expect(preview).to_be_hidden()
    expect(page.locator("#ahentic-panel")).to_be_visible()
    # Focus is back where it was: the button that opened the preview.
    expect(artifacts.get_by_role("button", name="Open artifact banner")).to_be_focused()
    page.get_by_label("Message the agent").press("Escape")  # leaves the box only
    expect(page.locator("#ahentic-panel")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.locator("#ahentic-panel")).to_be_hidden()
    expect(page.get_by_role("button", name="Open the agent panel")).to_be_focused()


def test_the_context_label_separates_the_context_fill_from_the_tokens_used(page, llm):
    llm.enqueue(text_reply("Counted."))
    open_home(page)
    new_chat(page)

    send(page, "Count my tokens")

    expect(assistant_messages(page)).to_have_text(["Counted."])
    session = only_session()
    percent = int(session.context_usage["percent"] + 0.5)  # shown rounded to a whole percent
    used = session.tokens_used
    used_text = f"{used / 1000:.1f}k" if used >= 1000 else str(used)
    expect(page.locator('[data-role="tokens"]')).to_contain_text(
        f"Context {percent}% · {used_text} tokens this chat"
    )


def test_a_sub_agent_shows_under_its_parent_and_opens_read_only(page, llm, owner):
    from sessions_app import services as session_services
    from sessions_app.models import Event
    from tests.support.factories import SessionFactory

    parent = SessionFactory(owner=owner, title="Research trip")
    child = SessionFactory(owner=owner, title="Bean researcher", parent=parent)
    session_services.events_append(
        session_id=child.pk,
        items=[
            {"kind": Event.Kind.USER_MESSAGE, "content": "Find three Kenyan beans"},
            {"kind": Event.Kind.AGENT_MESSAGE, "content": "Found **three** beans."},
        ],
    )
    Session.objects.filter(pk=child.pk).update(status=Session.Status.RUNNING)
    open_home(page)
    open_from_history(page, parent.pk)

    children = page.locator('[data-role="children-box"]')
    expect(children).to_contain_text("Sub-agents (1)")
    children.locator("summary").click()
    row = children.locator(".ahentic-child")
    expect(row).to_contain_text("Bean researcher")
    expect(row).to_contain_text("running")

    row.get_by_role("button", name="Open sub-agent Bean researcher").click()

    expect(page.locator(".ahentic-tab.is-active")).to_contain_text("Bean researcher")
    expect(assistant_messages(page).locator("strong")).to_have_text("three")
    expect(page.locator('[data-role="read-only"]')).to_be_visible()
    expect(page.get_by_label("Message the agent")).to_be_hidden()
    expect(page.get_by_role("button", name="Stop the run")).to_be_hidden()


def test_the_docked_panel_pushes_the_admin_aside_instead_of_covering_it(
    browser, live_server, settings
):
    settings.AHENTIC = {**settings.AHENTIC, "ADMIN_SIDEBAR": True}
    # 1366 px: with the admin's navigation open, the widest a docked panel can be while the
    # admin's content keeps 700 px is 327 px (tests/browser/test_admin_operator_browser.py).
    context = admin_page(browser, live_server, {"width": 1366, "height": 900})
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    try:
        page.goto("/admin/")
        page.get_by_role("button", name="Open the agent panel").click()
        log_out = page.locator("#logout-form button")
        # In the admin the floating panel starts below the header: its links stay clear.
        assert not covered(page, log_out)
        assert not page.evaluate("document.documentElement.classList.contains('ahentic-docked')")

        menu_item(page, "Dock the panel beside the page").click()

        expect(page.locator('[data-role="dock"]')).to_have_attribute(
            "aria-label", "Float the panel over the page"
        )
        screenshot(page, "sidebar-docked")
        assert page.evaluate("document.documentElement.classList.contains('ahentic-docked')")
        assert not covered(page, log_out)
        log_out.click(trial=True)  # reachable: the header ends where the panel starts
        page.reload()
        expect(page.locator("#ahentic-panel")).to_be_visible()  # open and docked, remembered
        assert not covered(page, page.locator("#logout-form button"))
        screenshot(page, "sidebar-docked")
        assert not errors, errors
    finally:
        context.close()


def test_the_panel_starts_folded_on_a_narrow_screen(browser, live_server, owner):
    client = Client()
    client.force_login(owner)
    cookie = client.cookies[django_settings.SESSION_COOKIE_NAME]
    context = browser.new_context(base_url=live_server.url, viewport={"width": 420, "height": 800})
    context.add_cookies([{"name": cookie.key, "value": cookie.value, "url": live_server.url}])
    page = context.new_page()
    try:
        page.goto("/")
        launcher = page.get_by_role("button", name="Open the agent panel")
        expect(launcher).to_be_visible()
        expect(page.locator("#ahentic-panel")).to_be_hidden()
        launcher.click()
        expect(page.locator("#ahentic-panel")).to_be_visible()
        page.reload()  # opened once, still folded on the next page: the page comes first
        expect(page.locator("#ahentic-panel")).to_be_hidden()
    finally:
        context.close()


# --- live text ----------------------------------------------------------------------------------


def test_a_streamed_reply_grows_in_the_transcript_before_it_ends(page, llm):
    llm.enqueue(text_reply(LONG_REPLY, chunk_delay_s=0.12))  # about 5 s of deltas
    open_home(page)
    live = page.locator(".ahentic-live .ahentic-msg-text")

    send(page, "Tell me a long story")
    assert llm.wait_for_requests(1)  # the call is out; its first delta follows at once

    expect(live).to_contain_text("Part 1 of a long answer.", timeout=1500)
    first = live.inner_text()
    expect(live).not_to_have_text(first, timeout=2000)  # it grows
    screenshot(page, "live-text")
    assert LONG_REPLY.startswith(live.inner_text().strip().rstrip("▍").strip()[:20])
    expect(assistant_messages(page).last).to_contain_text("Part 40 of a long answer.")
    expect(page.locator(".ahentic-live")).to_have_count(0)  # the message replaced it
    status_is(page, "idle")


def test_an_idle_chat_never_asks_for_live_text(page, llm):
    llm.enqueue(text_reply("Short answer."))
    open_home(page)
    send(page, "Hello")
    expect(assistant_messages(page).last).to_contain_text("Short answer.")
    status_is(page, "idle")
    live_requests = []
    page.on(
        "request",
        lambda request: live_requests.append(request.url) if "/live" in request.url else None,
    )

    page.wait_for_timeout(2000)

    assert live_requests == []
