"""The session list's paging: DRF's ``CursorPagination`` with the answer shape of SPEC's
``GET sessions`` (``{sessions, hasMore, nextCursor}``, the cursor an opaque token rather than a
URL, ``?limit`` for the page size)."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from rest_framework.exceptions import NotFound
from rest_framework.pagination import CursorPagination
from rest_framework.response import Response

from .errors import ApiError


class SessionListPagination(CursorPagination):
    """Newest first; the id breaks ties between equal modification times."""

    ordering = ("-updated_at", "-id")
    cursor_query_param = "cursor"
    page_size = 50
    page_size_query_param = "limit"  # validated (1..100) by SessionListQuerySerializer
    max_page_size = 100

    def decode_cursor(self, request):
        try:
            return super().decode_cursor(request)
        except NotFound:
            # A cursor names a page; one this list never handed out names none (DRF's 404).
            raise ApiError(
                "ahentic_cursor_not_found",
                "No page at this cursor: pass nextCursor from the previous page.",
                404,
            ) from None

    def encode_cursor(self, cursor) -> str:
        # The token alone (what ?cursor= takes), not DRF's absolute URL that carries it.
        query = parse_qs(urlsplit(super().encode_cursor(cursor)).query)
        return query[self.cursor_query_param][0]

    def get_paginated_response(self, data) -> Response:
        return Response(
            {"sessions": data, "hasMore": self.has_next, "nextCursor": self.get_next_link()}
        )

    def get_paginated_response_schema(self, schema: dict) -> dict:
        return {
            "type": "object",
            "required": ["sessions", "hasMore", "nextCursor"],
            "properties": {
                "sessions": schema,
                "hasMore": {"type": "boolean"},
                "nextCursor": {
                    "type": "string",
                    "nullable": True,
                    "description": "Pass as ?cursor= for the next (older) page.",
                },
            },
        }

    def get_schema_operation_parameters(self, view) -> list:
        return []  # documented by SessionListQuerySerializer (limit, status, cursor)
