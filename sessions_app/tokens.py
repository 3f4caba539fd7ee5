"""The one token-estimate rule, shared by the context engine, stored event sizes and the local
Messages API server the tests and the offline demo use (so it imports nothing from Django)."""

from __future__ import annotations

import math


def estimate_tokens(text: str) -> int:
    """Token estimate used everywhere: ceil(utf-8 bytes / 4), at least 1."""
    return max(1, math.ceil(len((text or "").encode("utf-8")) / 4))
