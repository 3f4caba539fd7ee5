"""Built-in browser tools: the sidebar runs them in the user's page and posts the result."""

from __future__ import annotations

from typing import Any

from . import tool

SENSITIVE = ("password", "passwd", "secret", "token", "otp")


def _fills_sensitive_field(input: dict[str, Any]) -> bool:
    return any(s in str(name).lower() for name in (input.get("fields") or {}) for s in SENSITIVE)


@tool(
    name="page_read",
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
