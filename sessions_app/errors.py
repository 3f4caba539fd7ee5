"""The one error base for failures the model reads as a tool result.

``ToolError`` (tools), ``ArtifactError`` (the artifact store) and ``PlanError`` (plan rules)
subclass it, so the tool pipeline converts every one of them the same way (``as_result``).
It lives in the lowest app so every layer can raise it.
"""

from __future__ import annotations

from typing import Any


class ModelFacingError(Exception):
    """``{ok: false, error: code, message, hint?, **data}`` for the model."""

    def __init__(self, code: str, message: str, hint: str | None = None, **data: Any):
        super().__init__(message)
        self.code = code
        self.message = message
        self.hint = hint
        self.data = data

    def as_result(self) -> dict[str, Any]:
        result: dict[str, Any] = {"ok": False, "error": self.code, "message": self.message}
        if self.hint:
            result["hint"] = self.hint
        result.update({k: v for k, v in self.data.items() if k not in result})
        return result
