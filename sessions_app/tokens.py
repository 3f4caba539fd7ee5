"""The one token-estimate rule, shared by the context engine, stored event sizes and the local
Messages API server the tests and the offline demo use (so it imports nothing from Django)."""

from __future__ import annotations

import json
from typing import Any


def estimate_tokens(text: str) -> int:
    """Token estimate used everywhere: ceil(utf-8 bytes / 4), at least 1."""
    return max(1, (len((text or "").encode("utf-8")) + 3) // 4)  # ceil in integers


def tool_use_tokens(name: str | None, input: Any) -> int:
    """A tool_use block's estimate: its name and input as compact JSON with sorted keys."""
    text = json.dumps({"name": name, "input": input}, sort_keys=True, separators=(",", ":"))
    return estimate_tokens(text)
