"""Errors a client can cause: a stable code, a human detail and an HTTP status.

The API renders them as ``{code, detail}``; tools that call run control turn them into tool
results.
"""

from __future__ import annotations


class AhenticError(Exception):
    def __init__(self, code: str, detail: str, status: int = 400):
        super().__init__(detail)
        self.code = code
        self.detail = detail
        self.status = status
