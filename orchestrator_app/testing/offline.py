"""The offline demo model: a scripted tour served by the local Messages API server.

``make demo`` without ``ANTHROPIC_API_KEY`` answers every message with this responder, so the
whole loop (plan card, a tool call, the final reply) can be seen without network access.
"""

from __future__ import annotations

import json
from typing import Any

from ..prompt import CONTEXT_HEADER
from .localapi import LocalResponse, text_reply, tool_call, tool_reply

TOUR_PLAN = [
    {"id": "read", "content": "Read your message", "status": "completed"},
    {"id": "plan", "content": "Show how a plan card looks", "status": "in_progress"},
    {"id": "reply", "content": "Answer in the chat", "status": "pending"},
]


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message["role"] != "user":
            continue
        content = message["content"]
        if isinstance(content, str):
            return content
        texts = [
            b.get("text", "")
            for b in content
            if b.get("type") == "text" and not b.get("text", "").startswith(CONTEXT_HEADER)
        ]
        if texts:
            return texts[-1]
    return ""


def brain_reply(body: dict[str, Any]) -> LocalResponse:
    """Naming and memory requests (no tools): a title from the first user line, or a summary."""
    system = " ".join(b.get("text", "") for b in body.get("system") or [])
    text = _last_user_text(body.get("messages") or [])
    if "Name this conversation" in system:
        first = next((line for line in text.splitlines() if line.startswith("user:")), text)
        words = first.removeprefix("user:").split()[:6]
        return text_reply(" ".join(words).capitalize() or "Demo chat")
    return text_reply("- (Offline memory) " + " ".join(text.split())[:300])


def _tool_results(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [b for b in content if b.get("type") == "tool_result"]


def _page_title(result: dict[str, Any]) -> str:
    raw = result.get("content")
    if isinstance(raw, list):
        raw = " ".join(b.get("text", "") for b in raw if isinstance(b, dict))
    try:
        return str(json.loads(raw).get("title") or "")
    except (TypeError, ValueError, AttributeError):
        return ""


def demo_responder(body: dict[str, Any]) -> LocalResponse:
    """The tour: a message mentioning "page" reads the open page in the browser (page_read);
    any other message gets a plan card, then an echo. Brain requests (no tools) are named or
    summarized."""
    if not body.get("tools"):
        return brain_reply(body)
    messages = body.get("messages") or []
    last = messages[-1] if messages else {"content": []}
    content = last.get("content") if isinstance(last.get("content"), list) else []
    results = _tool_results(content)
    tool_names = {t.get("name") for t in body.get("tools") or []}
    said = _last_user_text(messages).strip()[:200]
    if not results and "page" in said.lower() and "page_read" in tool_names:
        return tool_reply(
            tool_call("page_read", {}), text="(Offline demo model) Let me read your page."
        )
    if results and results[-1].get("is_error"):
        return text_reply("(Offline demo model) That did not work; see the tool result above.")
    title = _page_title(results[-1]) if results else ""
    if title:
        return text_reply(f"(Offline demo model) Your page is titled “{title}”.")
    if not results and "update_plan" in tool_names:
        return tool_reply(
            tool_call("update_plan", {"title": "Offline demo", "steps": TOUR_PLAN}),
            text="(Offline demo model) Let me show you a plan first.",
        )
    return text_reply(
        f"(Offline demo model) You said: “{said}”. This reply comes from the local Messages "
        "API server bundled with django-ahentic. Set ANTHROPIC_API_KEY and restart `make demo` "
        "to talk to Claude."
    )
