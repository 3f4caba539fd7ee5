"""Attachments in the chat sidebar, in a real browser: the attach button, paste and drag and drop
put uploads in the composer as removable thumbnails; Send posts them with the message; the
transcript shows them (images from the owner-only URL, PDFs as a file chip); a refused file
shows the server's error. Skipped without playwright or chromium like test_sidebar_browser.
"""

import base64

import pytest

from orchestrator_app.testing.localapi import text_reply
from sessions_app.models import Attachment
from tests.support.attachment_files import SVG, pdf, png
from tests.support.browser import (
    expect,
    new_chat,
    open_home,
    screenshot,
    status_is,
)

# The browser, its logged-in context and page: tests/browser/conftest.py (importing
# tests.support.browser skips this module, or fails it under AHENTIC_REQUIRE_BROWSER=1, without a
# browser).

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("llm_strict"),
]

DISPATCH = """([data, name, type, selector, kind]) => {
  const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
  const transfer = new DataTransfer();
  transfer.items.add(new File([bytes], name, { type }));
  const init = { bubbles: true, cancelable: true };
  const event =
    kind === "paste"
      ? new ClipboardEvent("paste", { ...init, clipboardData: transfer })
      : new DragEvent(kind, { ...init, dataTransfer: transfer });
  document.querySelector(selector).dispatchEvent(event);
}"""


def dispatch(page, kind: str, selector: str, name: str, data: bytes, content_type: str):
    encoded = base64.b64encode(data).decode()
    page.evaluate(DISPATCH, [encoded, name, content_type, selector, kind])


def pending(page):
    return page.locator(".ahentic-pending-attachment")


def test_attach_paste_and_drop_then_send_shows_thumbnails_and_reaches_the_model(page, llm):
    llm.enqueue(text_reply("A red square, a blue one is gone, and a two-page PDF."))
    open_home(page)
    new_chat(page)

    # The attach button's file input.
    page.locator('[data-role="attach-input"]').set_input_files(
        [{"name": "red.png", "mimeType": "image/png", "buffer": png(60, 40, (220, 40, 40))}]
    )
    expect(pending(page)).to_have_count(1)
    expect(pending(page).first).to_have_attribute("data-status", "ready")
    # Paste an image into the text box, drop a PDF on the composer.
    dispatch(page, "paste", "#ahentic-input", "blue.png", png(30, 30, (40, 40, 220)), "image/png")
    dispatch(page, "drop", '[data-role="composer"]', "report.pdf", pdf(2), "application/pdf")
    expect(pending(page)).to_have_count(3)
    for n in range(3):
        expect(pending(page).nth(n)).to_have_attribute("data-status", "ready")
    assert Attachment.objects.count() == 3
    # Remove the pasted one: it is deleted on the server too.
    page.get_by_role("button", name="Remove blue.png").click()
    expect(pending(page)).to_have_count(2)
    screenshot(page, "attach-composer")

    box = page.get_by_label("Message the agent")
    box.fill("What are these?")
    box.press("Enter")

    reply = page.locator(".ahentic-assistant .ahentic-msg-text")
    expect(reply).to_have_text(["A red square, a blue one is gone, and a two-page PDF."])
    status_is(page, "idle")
    expect(pending(page)).to_have_count(0)
    user = page.locator(".ahentic-user:not(.is-local)")
    image = user.locator(".ahentic-attachment.is-image img")
    expect(image).to_have_count(1)
    # The thumbnail loaded from the owner-only route.
    page.wait_for_function(
        "(img) => img.complete && img.naturalWidth === 60", arg=image.element_handle()
    )
    expect(user.locator(".ahentic-attachment.is-file")).to_contain_text("report.pdf")
    screenshot(page, "attach-transcript")

    [request] = llm.message_requests()
    kinds = [block["type"] for block in request["messages"][0]["content"]]
    assert kinds[:3] == ["image", "document", "text"]
    assert Attachment.objects.count() == 2  # the removed upload is gone
    assert set(Attachment.objects.values_list("name", flat=True)) == {"red.png", "report.pdf"}


def test_a_refused_file_shows_the_servers_error_and_nothing_is_pending(page, llm):
    open_home(page)
    new_chat(page)

    page.locator('[data-role="attach-input"]').set_input_files(
        [{"name": "logo.png", "mimeType": "image/png", "buffer": SVG}]
    )

    error = page.locator('[data-role="error"]')
    # What happened and what to do; the stable code only in the Debug view.
    expect(error).to_contain_text(
        "'logo.png' is a kind of file the agent cannot read. Attach PNG, JPEG, GIF, WebP images "
        "and PDF documents."
    )
    expect(error).not_to_contain_text("ahentic_attachment_type")
    expect(pending(page)).to_have_count(0)
    assert not Attachment.objects.exists()
    screenshot(page, "attach-refused")
