"""The API's OpenAPI description (drf-spectacular): response shapes, error responses and the
``extend_schema`` arguments of every route, kept out of the viewsets so they stay readable.

The shapes here are documentation and the fuzzing leg's oracle (``.ci/fuzz-leg`` checks every
response against them); the payload itself is built in ``payload.py``.
"""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import serializers

from sessions_app.models import Event, Session

from . import serializers as s

# --- shapes -----------------------------------------------------------------------------------


def any_json(**kwargs) -> serializers.JSONField:
    return serializers.JSONField(**kwargs)


def shape(name: str, fields: dict[str, serializers.Field]) -> type[serializers.Serializer]:
    """A named response shape (an OpenAPI component); never used to serialize."""
    return type(name, (serializers.Serializer,), fields)


Error = shape(
    "Error",
    {
        "code": serializers.CharField(help_text="Stable code, for example ahentic_invalid_input."),
        "detail": serializers.CharField(help_text="Human text."),
        "fields": serializers.DictField(
            required=False, help_text="Field errors of a 400 (camelCase field names)."
        ),
    },
)

Message = shape(
    "Message",
    {
        "id": serializers.IntegerField(),
        "seq": serializers.IntegerField(),
        "role": serializers.ChoiceField(choices=["user", "assistant", "tool", "event"]),
        "kind": serializers.ChoiceField(choices=Event.Kind.choices),
        "content": serializers.CharField(allow_blank=True),
        "createdAt": serializers.DateTimeField(),
        "meta": serializers.DictField(),
    },
)

PendingMessage = shape(
    "PendingMessage",
    {
        "id": serializers.IntegerField(),
        "content": serializers.CharField(),
        "sourceType": serializers.CharField(),
        "createdAt": serializers.DateTimeField(),
    },
)

SESSION_STATUS = serializers.ChoiceField(choices=Session.Status.choices)

SessionPayload = shape(
    "SessionPayload",
    {
        "id": serializers.UUIDField(),
        "title": serializers.CharField(allow_blank=True),
        "autoTitle": serializers.BooleanField(),
        "status": SESSION_STATUS,
        "mode": serializers.ChoiceField(choices=Session.Mode.choices),
        "viewMode": serializers.ChoiceField(choices=Session.ViewMode.choices),
        "parentId": serializers.UUIDField(allow_null=True),
        "children": serializers.ListField(child=serializers.DictField()),
        "messages": Message(many=True),
        "hasMore": serializers.BooleanField(),
        "pendingMessages": PendingMessage(many=True),
        "trace": serializers.ListField(
            child=serializers.DictField(), help_text="Last TRACE_POLL_WINDOW envelopes, no data."
        ),
        "traceCount": serializers.IntegerField(),
        "progress": serializers.DictField(allow_null=True),
        "heartbeatAt": serializers.DateTimeField(allow_null=True),
        "plan": serializers.DictField(allow_null=True),
        "pendingTool": serializers.DictField(allow_null=True),
        "artifacts": serializers.ListField(child=serializers.DictField()),
        "goals": serializers.ListField(
            child=serializers.DictField(),
            help_text="Active goals and the most recent completed ones (bounded).",
        ),
        "activeSkills": serializers.ListField(child=serializers.CharField()),
        "activeWorkflow": serializers.CharField(allow_null=True),
        "tokensIn": serializers.IntegerField(),
        "tokensOut": serializers.IntegerField(),
        "tokensUsed": serializers.IntegerField(),
        "cacheReadTokens": serializers.IntegerField(),
        "cacheWriteTokens": serializers.IntegerField(),
        "costUsd": serializers.FloatField(allow_null=True),
        "contextUsage": serializers.DictField(),
        "stepCount": serializers.IntegerField(),
        "runSeq": serializers.IntegerField(),
        "lastError": serializers.CharField(allow_blank=True),
        "lastErrorCode": serializers.CharField(allow_blank=True),
        "jobResumable": serializers.BooleanField(),
        "contentWork": serializers.BooleanField(),
        "browserPausedAt": serializers.DateTimeField(allow_null=True),
        "version": serializers.IntegerField(),
        "createdAt": serializers.DateTimeField(),
        "modifiedAt": serializers.DateTimeField(),
        "pendingMessage": PendingMessage(
            required=False, help_text="Only in a 200 answer to POST messages: the queued message."
        ),
    },
)
PAYLOAD_KEYS = [key for key in SessionPayload._declared_fields if key != "pendingMessage"]

SessionRow = shape(
    "SessionRow",
    {
        "id": serializers.UUIDField(),
        "title": serializers.CharField(allow_blank=True),
        "status": SESSION_STATUS,
        "mode": serializers.ChoiceField(choices=Session.Mode.choices),
        "tokensUsed": serializers.IntegerField(),
        "parentId": serializers.UUIDField(allow_null=True),
        "modifiedAt": serializers.DateTimeField(),
    },
)

SessionList = shape(
    "SessionList",
    {
        "sessions": SessionRow(many=True),
        "hasMore": serializers.BooleanField(),
        "nextCursor": serializers.CharField(
            help_text="Pass as ?cursor= for older.", allow_null=True
        ),
    },
)

MessagePage = shape(
    "MessagePage",
    {"messages": Message(many=True), "hasMore": serializers.BooleanField()},
)


def pointer_fields() -> dict[str, serializers.Field]:
    """An artifact's pointer (``store.pointer_json`` plus ``updatedAt``); fresh field
    instances for each shape that holds them."""
    return {
        "key": serializers.CharField(),
        "kind": serializers.CharField(),
        "status": serializers.CharField(),
        "title": serializers.CharField(allow_blank=True),
        "bytes": serializers.IntegerField(),
        "blockCount": serializers.IntegerField(),
        "step": serializers.IntegerField(allow_null=True),
        "updatedAt": serializers.DateTimeField(),
    }


ArtifactPointer = shape("ArtifactPointer", pointer_fields())

ArtifactList = shape("ArtifactList", {"artifacts": ArtifactPointer(many=True)})
LiveText = shape(
    "LiveText",
    {
        "text": serializers.CharField(allow_blank=True),
        "run": serializers.IntegerField(allow_null=True),
        "updatedAt": serializers.DateTimeField(allow_null=True),
    },
)

Artifact = shape(
    "Artifact",
    {
        **pointer_fields(),
        "payload": any_json(),
        "source": any_json(),
        "createdAt": serializers.DateTimeField(),
    },
)

Diagnostics = shape(
    "Diagnostics",
    {
        "id": serializers.UUIDField(),
        "title": serializers.CharField(allow_blank=True),
        "exportedAt": serializers.DateTimeField(),
        "environment": serializers.DictField(),
        "session": serializers.DictField(),
        "state": serializers.DictField(),
        "trace": serializers.ListField(child=serializers.DictField()),
    },
)

Tool = shape(
    "Tool",
    {
        "name": serializers.CharField(),
        "description": serializers.CharField(allow_blank=True),
        "readonly": serializers.BooleanField(),
        "runtime": serializers.ChoiceField(choices=["server", "browser"]),
        "requiresApproval": serializers.BooleanField(),
        "nonPreallowable": serializers.BooleanField(),
    },
)

CatalogItem = shape(
    "CatalogItem",
    {"name": serializers.CharField(), "description": serializers.CharField(allow_blank=True)},
)

TokenDay = shape(
    "TokenDay",
    {
        "date": serializers.DateField(),
        "in": serializers.IntegerField(),
        "out": serializers.IntegerField(),
        "cacheRead": serializers.IntegerField(),
        "cacheWrite": serializers.IntegerField(),
        "total": serializers.IntegerField(),
        "costUsd": serializers.FloatField(
            help_text="0 without calls; null when a call had no price.", allow_null=True
        ),
    },
)
TokenSeries = shape("TokenSeries", {"series": TokenDay(many=True)})

# --- error responses --------------------------------------------------------------------------

ERROR_TEXT = {
    400: "Invalid input or JSON (ahentic_invalid_input, ahentic_invalid_json, ...).",
    401: "Not logged in (ahentic_unauthenticated).",
    403: "No permission to use the agent, or a CSRF failure (ahentic_forbidden).",
    404: "Not found (ahentic_session_not_found, ahentic_pending_not_found, artifact_missing).",
    405: "Method not allowed (ahentic_method_not_allowed).",
    409: "Conflict with the session's state (busy, queue full, not awaiting, ...).",
    413: "Body over 2 MiB (ahentic_body_too_large).",
    415: "Body is not JSON (ahentic_unsupported_media_type).",
    429: "Throttled (ahentic_throttled, Retry-After) or the daily token limit.",
    503: "No model configured (ahentic_ai_unavailable).",
}
READ_ERRORS = (400, 401, 403, 404, 405)
WRITE_ERRORS = (*READ_ERRORS, 413, 415)


def responses(ok: dict, *errors: int) -> dict:
    return {**ok, **{code: OpenApiResponse(Error, description=ERROR_TEXT[code]) for code in errors}}


def describe(operation_id: str, summary: str, ok: dict, errors=READ_ERRORS, **kwargs) -> dict:
    return {
        "operation_id": operation_id,
        "summary": summary,
        "responses": responses(ok, *errors),
        **kwargs,
    }


# ``list`` routes that answer one object (drf-spectacular assumes a ``list`` action answers an
# array of its response shape).
WRAPPED_LISTS = {"session_list", "token_stats"}


def postprocess(result, generator, request, public):
    """Postprocessing hook: paths as documented (``sessions/{session_id}``, both forms answer),
    and the wrapped lists as the object they are."""
    result["paths"] = {path.rstrip("/") or "/": item for path, item in result["paths"].items()}
    for item in result["paths"].values():
        for operation in item.values():
            if operation.get("operationId") in WRAPPED_LISTS:
                content = operation["responses"]["200"]["content"]["application/json"]
                content["schema"] = content["schema"]["items"]
    return result


class SessionCookieScheme(OpenApiAuthenticationExtension):
    target_class = "orchestrator_app.api.permissions.SessionAuthentication401"
    name = "sessionCookie"

    def get_security_definition(self, auto_schema):
        return {"type": "apiKey", "in": "cookie", "name": "sessionid"}


PAYLOAD = {200: SessionPayload}
SESSION_ID = OpenApiParameter(
    "session_id", str, OpenApiParameter.PATH, description="The session's UUID."
)

session_list = describe(
    "session_list",
    "List own root sessions, newest first",
    {200: SessionList},
    parameters=[s.SessionListQuerySerializer],
)
session_create = describe(
    "session_create",
    "Create a session",
    {201: SessionPayload},
    (*WRITE_ERRORS, 429),
    request=s.SessionCreateSerializer,
)
session_retrieve = describe(
    "session_retrieve",
    "The session payload (ETag; If-None-Match -> 304)",
    {
        200: SessionPayload,
        304: OpenApiResponse(description="Not modified: If-None-Match holds the current ETag."),
    },
    parameters=[
        SESSION_ID,
        OpenApiParameter(
            "include", str, description="`artifacts` adds the artifacts' bodies to the payload."
        ),
        OpenApiParameter("If-None-Match", str, OpenApiParameter.HEADER),
    ],
)
session_update = describe(
    "session_update",
    "Change title, mode, view mode, page context, skills or workflow",
    PAYLOAD,
    WRITE_ERRORS,
    request=s.SessionUpdateSerializer,
    parameters=[SESSION_ID],
)
session_destroy = describe(
    "session_destroy",
    "Delete a session (cancels a live run first)",
    {204: OpenApiResponse(description="Deleted.")},
    parameters=[SESSION_ID],
)
messages_list = describe(
    "messages_list",
    "Page the transcript (chronological)",
    {200: MessagePage},
    parameters=[SESSION_ID, s.MessagesQuerySerializer],
)
message_post = describe(
    "message_post",
    "Post a message: 202 a run started, 200 queued while busy",
    {202: SessionPayload, 200: SessionPayload},
    (*WRITE_ERRORS, 409, 429, 503),
    request=s.MessageCreateSerializer,
    parameters=[SESSION_ID],
)
pending_recall = describe(
    "pending_recall",
    "Recall a queued message (404 once promoted)",
    {204: OpenApiResponse(description="Recalled.")},
    parameters=[
        SESSION_ID,
        OpenApiParameter("pending_id", str, OpenApiParameter.PATH, description="Digits."),
    ],
)
run_cancel = describe(
    "run_cancel", "Cancel the run", PAYLOAD, WRITE_ERRORS, request=None, parameters=[SESSION_ID]
)
run_continue = describe(
    "run_continue",
    "Continue: resume a resumable job or a stalled run (no-op otherwise)",
    PAYLOAD,
    (*WRITE_ERRORS, 429, 503),
    request=None,
    parameters=[SESSION_ID],
)
approvals = describe(
    "approvals",
    "Decide the pending approval",
    PAYLOAD,
    (*WRITE_ERRORS, 409),
    request=s.ApprovalSerializer,
    parameters=[SESSION_ID],
)
browser_results = describe(
    "browser_results",
    "Answer the pending browser tool",
    PAYLOAD,
    (*WRITE_ERRORS, 409),
    request=s.BrowserResultSerializer,
    parameters=[SESSION_ID],
)
actions = describe(
    "actions",
    "Run one tool as a suggested action (idle sessions only)",
    {202: SessionPayload},
    (*WRITE_ERRORS, 409, 429, 503),
    request=s.ActionSerializer,
    parameters=[SESSION_ID],
)
diagnostics = describe(
    "diagnostics", "The full trace and state", {200: Diagnostics}, parameters=[SESSION_ID]
)
live_text = describe(
    "live_text",
    "The reply the model is streaming now (empty when none); polled only while running",
    {200: LiveText},
    parameters=[SESSION_ID],
)
artifacts_list = describe(
    "artifacts_list", "Artifact pointers", {200: ArtifactList}, parameters=[SESSION_ID]
)
artifact_detail = describe(
    "artifact_detail",
    "One artifact with its payload",
    {200: Artifact},
    parameters=[SESSION_ID, OpenApiParameter("key", str, OpenApiParameter.PATH)],
)
tools_list = describe("tools_list", "The tools the user may use", {200: Tool(many=True)})
skills_list = describe("skills_list", "Skills", {200: CatalogItem(many=True)})
workflows_list = describe("workflows_list", "Workflows", {200: CatalogItem(many=True)})
token_stats = describe(
    "token_stats",
    "The user's daily token series, zero-filled, oldest first",
    {200: TokenSeries},
    parameters=[s.TokenStatsQuerySerializer],
)
