"""How deep JSON may nest: one limit for a request body (``api.parsers``) and for a tool's input
(``tools.Tool.validate``), below both so neither imports the other."""

from __future__ import annotations

from typing import Any

MAX_JSON_DEPTH = 32


def json_depth_exceeds(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """True when ``value`` nests objects/arrays more than ``limit`` deep (iterative walk)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False
