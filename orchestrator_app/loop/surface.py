"""The model's wider surface: thinking, effort and the API's server tools (web search, web fetch).

Each feature is a setting that may differ per mode: a plain value applies to both modes, a dict
``{"agent": value, "ask": value}`` gives each mode its own (a mode it does not name is off).

* ``THINKING``: ``"off"``, ``"adaptive"`` or a budget in tokens (an int >= 1024, below the
  step's ``max_tokens``), sent as ``thinking``; ``THINKING_DISPLAY`` (``"summarized"`` or
  ``"omitted"``) rides in it. ``EFFORT`` (``"low"`` ... ``"max"``) is ``output_config.effort``.
* ``WEB_SEARCH`` / ``WEB_FETCH``: None (off) or a dict of the tool's options (``max_uses``,
  ``allowed_domains``, ``blocked_domains``; web fetch also ``max_content_tokens`` and
  ``citations``), sent as the versioned server tools below.

History: thinking, redacted-thinking and server tool blocks are stored as the model sent them
(``llm.LLMResult.content``) with the assistant turn's message event (``turn_blocks``) and sent
back unchanged in every later request. The API would let earlier turns' thinking be dropped, but
dropping it would change the bytes of turns already in the cached prefix the moment a new user
message arrives; keeping it keeps every request a byte-extension of the previous one.
"""

from __future__ import annotations

import re
from typing import Any

from sessions_app import agents
from sessions_app.conf import ahentic_settings
from sessions_app.models import Session

# The server tools' versions: the current ones (dynamic filtering of results) for current
# models, the first ones for the models released before them (``server_tool_types``).
WEB_SEARCH_TYPE = "web_search_20260209"
WEB_FETCH_TYPE = "web_fetch_20260209"
LEGACY_WEB_SEARCH_TYPE = "web_search_20250305"
LEGACY_WEB_FETCH_TYPE = "web_fetch_20250910"
# Model names that take only the first versions: Claude 3.x, and Claude 4 up to 4.5.
LEGACY_SERVER_TOOL_MODELS = re.compile(
    r"^claude-(?:3\b.*|[a-z]+-3\b.*|[a-z]+-4(?:-[0-5])?(?:-\d{8}.*)?)$"
)
THINKING_MIN_BUDGET = 1024
DISPLAYS = ("summarized", "omitted")
EFFORTS = ("low", "medium", "high", "xhigh", "max")
MODES = ("agent", "ask")
# Blocks of an assistant turn that are sent back exactly as received.
THINKING_TYPES = ("thinking", "redacted_thinking")
WEB_SEARCH_OPTIONS = ("max_uses", "allowed_domains", "blocked_domains", "user_location")
WEB_FETCH_OPTIONS = (
    "max_uses",
    "allowed_domains",
    "blocked_domains",
    "max_content_tokens",
    "citations",
)


def per_mode(value: Any, mode: str) -> Any:
    """``value`` for ``mode`` ("agent" or "ask"): a ``{"agent": ..., "ask": ...}`` dict picks
    the mode's entry (None when it has none); anything else applies to every mode."""
    if isinstance(value, dict) and value and set(value) <= set(MODES):
        return value.get(mode)
    return value


def session_mode(session: Session) -> str:
    return "ask" if session.mode == Session.Mode.ASK else "agent"


def thinking_setting(mode: str, settings: Any = ahentic_settings) -> str | int:
    """``"off"``, ``"adaptive"`` or a budget, for ``mode``. ``settings``: the session's agent
    settings (``sessions_app.agents.settings_for``), the site's by default."""
    value = per_mode(settings.THINKING, mode)
    if value in (None, False, "off", 0):
        return "off"
    return value


def thinking_config(
    mode: str, max_tokens: int, settings: Any = ahentic_settings
) -> dict[str, Any] | None:
    """The request's ``thinking`` for ``mode``, or None when thinking is off."""
    value = thinking_setting(mode, settings)
    if value == "off":
        return None
    config: dict[str, Any]
    if value == "adaptive":
        config = {"type": "adaptive"}
    else:
        config = {"type": "enabled", "budget_tokens": min(int(value), max_tokens - 1)}
    display = per_mode(settings.THINKING_DISPLAY, mode)
    if display:
        config["display"] = display
    return config


def effort(mode: str, settings: Any = ahentic_settings) -> str | None:
    return per_mode(settings.EFFORT, mode) or None


def server_tools(mode: str, settings: Any = ahentic_settings) -> list[dict[str, Any]]:
    """The server tool definitions for ``mode`` (empty when both are off), in the versions
    the model takes (``server_tool_types``)."""
    search_type, fetch_type = server_tool_types(settings.MODEL)
    tools = []
    for setting, name, version, options in (
        (settings.WEB_SEARCH, "web_search", search_type, WEB_SEARCH_OPTIONS),
        (settings.WEB_FETCH, "web_fetch", fetch_type, WEB_FETCH_OPTIONS),
    ):
        value = per_mode(setting, mode)
        if value is None or value is False:
            continue
        value = value if isinstance(value, dict) else {}
        tool = {"type": version, "name": name}
        tool.update({k: value[k] for k in options if value.get(k) is not None})
        tools.append(tool)
    return tools


def server_tool_types(model: str) -> tuple[str, str]:
    """The web search and web fetch tool types ``model`` takes."""
    if LEGACY_SERVER_TOOL_MODELS.match(model or ""):
        return LEGACY_WEB_SEARCH_TYPE, LEGACY_WEB_FETCH_TYPE
    return WEB_SEARCH_TYPE, WEB_FETCH_TYPE


def opens_with_thinking(message: dict[str, Any]) -> bool:
    content = message.get("content") or []
    return bool(content) and content[0].get("type") in THINKING_TYPES


def continues_tool_loop(messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The assistant turn the request continues inside a tool loop: the one before a final user
    message holding tool results, or a final assistant turn (``pause_turn``). None otherwise."""
    if not messages:
        return None
    last = messages[-1]
    if last["role"] == "assistant":
        return last
    if len(messages) > 1 and any(b.get("type") == "tool_result" for b in last["content"]):
        return messages[-2]
    return None


def request_options(
    session: Session,
    messages: list[dict[str, Any]],
    max_tokens: int,
    settings: agents.AgentSettings | None = None,
):
    """``thinking`` and ``output_config`` for the step's request (keyword arguments of
    ``llm.call_model``).

    Thinking cannot start in the middle of a tool loop: when the turn the request continues
    did not open with a thinking block (thinking was switched on mid-run, or the turn is a
    sub-agent's synthetic report), the request goes without thinking; the API refuses it
    otherwise. The next turn that starts from a user message thinks again. ``settings``: the
    session's agent's settings when the caller holds them."""
    mode = session_mode(session)
    if settings is None:
        settings = agents.settings_for(session)
    options: dict[str, Any] = {}
    thinking = thinking_config(mode, max_tokens, settings)
    if thinking is not None:
        turn = continues_tool_loop(messages)
        if turn is None or opens_with_thinking(turn):
            options["thinking"] = thinking
    level = effort(mode, settings)
    if level:
        options["output_config"] = {"effort": level}
    return options


def turn_blocks(content: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """The blocks of an assistant reply its message event stores whole (all but ``tool_use``,
    which each have their tool call event), or None when the reply is plain text (its event's
    text is the block)."""
    # A thinking block cut off by max_tokens has no signature: the API would refuse it back, and
    # the turn it opened ended without tool calls, so nothing needs it.
    kept = [
        b
        for b in content
        if b.get("type") != "tool_use"
        and not (b.get("type") == "thinking" and not b.get("signature"))
    ]
    if all(b.get("type") == "text" and not b.get("citations") for b in kept):
        return None
    return kept
