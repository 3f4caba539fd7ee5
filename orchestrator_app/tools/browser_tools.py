"""Built-in browser tools: the sidebar runs them in the user's page and posts the result."""

from __future__ import annotations

import re
from typing import Any

from django.utils.translation import gettext_lazy as _

from ..vault import SENSITIVE_FIELD_PATTERN
from . import tool

# Form fields whose values are secrets (``vault.SENSITIVE_FIELD_PATTERN``): filling one needs
# the user's approval, and page_read never returns its value. One rule for Python and the
# sidebar, which receives both patterns from the ``{% ahentic_sidebar %}`` tag (JavaScript
# reads them as case-insensitive RegExps).
SENSITIVE_AUTOCOMPLETE_PATTERN = r"password|one-time-code|cc-number|cc-csc"
_SENSITIVE_FIELD = re.compile(SENSITIVE_FIELD_PATTERN, re.IGNORECASE)


def is_sensitive_field(name: Any) -> bool:
    return bool(_SENSITIVE_FIELD.search(str(name)))


def _fills_sensitive_field(input: dict[str, Any]) -> bool:
    return any(is_sensitive_field(name) for name in (input.get("fields") or {}))


@tool(
    name="page_read",
    label=_("Read this page"),
    description="Read the page open in the user's browser: url, title, headings, a text excerpt "
    "and form fields. Optional CSS selector to read one part.",
    input_schema={"type": "object", "properties": {"selector": {"type": "string"}}},
    readonly=True,
    runtime="browser",
    summary=lambda input: (
        f"Read the page{' (' + input['selector'] + ')' if input.get('selector') else ''}"
    ),
)
def page_read(ctx, input):  # runs in the browser
    raise NotImplementedError


@tool(
    name="page_fill_fields",
    label=_("Fill in this page's form"),
    description="Fill form fields in the user's open page (by field name or id) without "
    "submitting or saving.",
    input_schema={
        "type": "object",
        "properties": {
            "fields": {
                "type": "object",
                "minProperties": 1,
                "additionalProperties": {"type": ["string", "number", "boolean"]},
            }
        },
        "required": ["fields"],
    },
    # Not readonly (Ask mode refuses it), but filling a form saves nothing, so only a password
    # or secret field asks for approval.
    readonly=False,
    requires_approval=_fills_sensitive_field,
    runtime="browser",
    summary=lambda input: "Fill " + ", ".join(sorted(map(str, (input.get("fields") or {}))))[:200],
)
def page_fill_fields(ctx, input):  # runs in the browser
    raise NotImplementedError


# Browser tools that read the user's page: their successful result refreshes the session's
# page context, so the next step's context names the page the tool just read.
PAGE_READ_TOOLS = frozenset({"page_read"})


def page_context_from_read(tool_name: str, result: Any) -> dict[str, Any] | None:
    """The page context a page-read result implies (the page's url and title, as the
    composer sends them), or None when ``result`` is not a successful page read."""
    if tool_name not in PAGE_READ_TOOLS or not isinstance(result, dict):
        return None
    url = result.get("url")
    if not isinstance(url, str) or not url or result.get("ok") is False:
        return None
    title = result.get("title")
    return {"url": url[:2000], "title": title[:500] if isinstance(title, str) else ""}
