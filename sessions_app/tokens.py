"""The one token-estimate rule, shared by the context engine, stored event sizes and the local
Messages API server the tests and the offline demo use (so it imports nothing from Django)."""

from __future__ import annotations

import json
from typing import Any

from .media import media_tokens


def estimate_tokens(text: str) -> int:
    """Token estimate used everywhere: ceil(utf-8 bytes / 4), at least 1."""
    return max(1, (len((text or "").encode("utf-8")) + 3) // 4)  # ceil in integers


# One encoder for the compact form (``json.dumps`` with options builds an encoder per call).
_COMPACT = json.JSONEncoder(sort_keys=True, separators=(",", ":"))


def compact_json(value: Any) -> str:
    """``value`` as compact JSON with sorted keys: the form the estimate sizes JSON in."""
    return _COMPACT.encode(value)


def tool_use_tokens(name: str | None, input: Any) -> int:
    """A tool_use block's estimate: its name and input as compact JSON with sorted keys."""
    return estimate_tokens(compact_json({"name": name, "input": input}))


def _plain(block: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in block.items() if k != "cache_control"}


def block_tokens(block: dict[str, Any]) -> int:
    """A Messages API content block's estimate, as sent (its ``cache_control`` not counted)."""
    kind = block.get("type")
    if kind == "text":
        return estimate_tokens(block.get("text", ""))
    if kind == "tool_use":
        return tool_use_tokens(block.get("name"), block.get("input"))
    if kind == "tool_result":
        return tool_result_tokens(block.get("content") or "")
    media = media_tokens(block)
    return media if media is not None else estimate_tokens(compact_json(_plain(block)))


def tool_result_tokens(content: Any) -> int:
    """A tool_result's content: its text, or its list of blocks as compact JSON, except that
    an image in it counts as an image (``media.media_tokens``), not as its base64 text."""
    if isinstance(content, str):
        return estimate_tokens(content)
    media = [media_tokens(b) if isinstance(b, dict) else None for b in content]
    rest = [_plain(b) for b, tokens in zip(content, media, strict=True) if tokens is None]
    return estimate_tokens(compact_json(rest)) + sum(t for t in media if t is not None)


def definition_tokens(definition: dict[str, Any]) -> int:
    """A tool definition's estimate, as sent (its ``cache_control`` not counted)."""
    return estimate_tokens(compact_json(_plain(definition)))
