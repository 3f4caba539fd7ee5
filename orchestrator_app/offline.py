"""The offline demo model: a scripted tour served by the local Messages API server.

``make demo`` without ``ANTHROPIC_API_KEY`` answers every message with this responder, so the
whole loop (plan card, a tool call, the final reply) can be seen without network access.
"""

from __future__ import annotations

from typing import Any

from .localapi import LocalResponse, text_reply, tool_call, tool_reply
from .prompt import CONTEXT_HEADER

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


def demo_responder(body: dict[str, Any]) -> LocalResponse:
    if not body.get("tools"):
        return brain_reply(body)
    messages = body.get("messages") or []
    last = messages[-1] if messages else {"content": []}
    content = last.get("content") if isinstance(last.get("content"), list) else []
    answered_plan = any(b.get("type") == "tool_result" for b in content)
    tool_names = {t.get("name") for t in body.get("tools") or []}
    if not answered_plan and "update_plan" in tool_names:
        return tool_reply(
            tool_call("update_plan", {"title": "Offline demo", "steps": TOUR_PLAN}),
            text="(Offline demo model) Let me show you a plan first.",
        )
    said = _last_user_text(messages).strip()[:200]
    return text_reply(
        f"(Offline demo model) You said: “{said}”. This reply comes from the local Messages "
        "API server bundled with django-ahentic. Set ANTHROPIC_API_KEY and restart `make demo` "
        "to talk to Claude."
    )
