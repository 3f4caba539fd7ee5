"""The API's one JSON parser: bounded nesting, no NUL characters, never a 5xx.

Python's decoder recurses once per nesting level and raises ``RecursionError`` (not a
``ValueError``) near the interpreter's limit, and PostgreSQL's ``jsonb`` and ``text`` refuse
``\\u0000`` where SQLite stores it. Both are refused here, before any view sees the body, so every
database answers the same 400.
"""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from ..json_limits import MAX_JSON_DEPTH, json_depth_exceeds
from .errors import ApiError

NUL = "\x00"


def nul_path(value: Any, path: str = "") -> str | None:
    """The dotted path of the first key or string holding a NUL character, else None."""
    stack = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            if NUL in item:
                return where or "body"
        elif isinstance(item, dict):
            for key, child in item.items():
                child_path = f"{where}.{key}" if where else str(key)
                if NUL in str(key):
                    return child_path.replace(NUL, "\\u0000")
                stack.append((child, child_path))
        elif isinstance(item, list):
            stack.extend((child, f"{where}[{i}]") for i, child in enumerate(item))
    return None


class AhenticJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(f"JSON nests deeper than {MAX_JSON_DEPTH} levels.") from None
        if json_depth_exceeds(data):
            raise ParseError(f"JSON nests deeper than {MAX_JSON_DEPTH} levels.")
        where = nul_path(data)
        if where is not None:
            field = where.split(".")[0].split("[")[0] or "body"
            raise ApiError(
                "ahentic_invalid_input",
                f"{where} contains a NUL character (\\u0000), which is not accepted.",
                fields={field: ["NUL characters are not accepted."]},
            )
        return data
