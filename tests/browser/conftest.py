"""The browser tests' fixtures: one chromium for the package (each test gets contexts of its
own, so no cookie, storage or page is shared), a logged-in context, a page that fails
the test on a JavaScript error. Only the browser modules use them, and those are skipped (by
importing tests.support.browser) where playwright or chromium is missing, so nothing here
imports playwright until a fixture runs."""

import threading

import pytest
from django.conf import settings as django_settings
from django.test import Client


@pytest.fixture(scope="package")
def browser():
    from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, sync_playwright

    # Playwright's sync API keeps an asyncio loop on this thread while it runs, so Django would
    # refuse the ORM calls of the test bodies and of the database flush after each test;
    # nothing here is actually async. Restored when the package's tests are done.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            yield browser
            browser.close()


@pytest.fixture
def sidebar_calls():
    from tests.support import tools_for_sidebar

    tools_for_sidebar.CALLS.clear()
    yield tools_for_sidebar.CALLS
    tools_for_sidebar.CALLS.clear()


@pytest.fixture
def gate():
    """Holds a scripted model answer in flight; always released so the server thread ends."""
    event = threading.Event()
    yield event
    event.set()


@pytest.fixture
def context(browser, live_server, owner):
    """A browser context logged in as ``owner`` (the session cookie of a forced login)."""
    client = Client()
    client.force_login(owner)
    cookie = client.cookies[django_settings.SESSION_COOKIE_NAME]
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 860})
    context.add_cookies(
        [{"name": cookie.key, "value": cookie.value, "url": live_server.url, "httpOnly": True}]
    )
    yield context
    context.close()


@pytest.fixture
def page_errors():
    return []


@pytest.fixture
def page(context, page_errors):
    page = context.new_page()
    page.on("pageerror", lambda error: page_errors.append(str(error)))
    yield page
    assert not page_errors, f"JavaScript errors on the page: {page_errors}"
