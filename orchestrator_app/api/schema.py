"""The API's OpenAPI description (drf-spectacular): the ``extend_schema`` arguments of every
route (operation id, summary, request and response serializers, error responses), kept out of
the viewsets so they stay readable.

The shapes are the serializers in ``serializers.py``, the same classes that render the answers;
the document is the fuzzing leg's oracle (``.ci/fuzz-leg`` checks every response against it).
"""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema

from . import serializers as s

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
    return {
        **ok,
        **{
            code: OpenApiResponse(s.ErrorSerializer, description=ERROR_TEXT[code])
            for code in errors
        },
    }


def describe(operation_id: str, summary: str, ok: dict, errors=READ_ERRORS, **kwargs) -> dict:
    return {
        "operation_id": operation_id,
        "summary": summary,
        "responses": responses(ok, *errors),
        **kwargs,
    }


def described(description: dict):
    """``extend_schema(**description)`` based on drf-spectacular's ``AutoSchema`` whatever the
    host's ``DEFAULT_SCHEMA_CLASS`` (``extend_schema`` subclasses that setting unless the
    method names its schema class; DRF's own there made ``GET schema`` a 500)."""

    def decorate(view_method):
        view_method.schema = AutoSchema
        return extend_schema(**description)(view_method)

    return decorate


def postprocess(result, generator, request, public):
    """Postprocessing hook: paths as documented (``sessions/{session_id}``; both forms answer)."""
    result["paths"] = {path.rstrip("/") or "/": item for path, item in result["paths"].items()}
    return result


class SessionCookieScheme(OpenApiAuthenticationExtension):
    target_class = "orchestrator_app.api.permissions.SessionAuthentication401"
    name = "sessionCookie"

    def get_security_definition(self, auto_schema):
        return {"type": "apiKey", "in": "cookie", "name": "sessionid"}


PAYLOAD = {200: s.SessionPayloadSerializer}
SESSION_ID = OpenApiParameter(
    "session_id", str, OpenApiParameter.PATH, description="The session's UUID."
)

session_list = describe(
    "session_list",
    "List own root sessions, newest first",
    {200: s.SessionRowSerializer},
    parameters=[s.SessionListQuerySerializer],
)
session_create = describe(
    "session_create",
    "Create a session",
    {201: s.SessionPayloadSerializer},
    (*WRITE_ERRORS, 429),
    request=s.SessionCreateSerializer,
)
session_retrieve = describe(
    "session_retrieve",
    "The session payload (ETag; If-None-Match -> 304)",
    {
        200: s.SessionPayloadSerializer,
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
    {200: s.MessagePageSerializer},
    parameters=[SESSION_ID, s.MessagesQuerySerializer],
)
message_post = describe(
    "message_post",
    "Post a message: 202 a run started, 200 queued while busy",
    {202: s.SessionPayloadSerializer, 200: s.SessionPayloadSerializer},
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
    "Run one tool as a suggested action (idle sessions only; a write waits for approval)",
    {202: s.SessionPayloadSerializer},
    (*WRITE_ERRORS, 409, 429, 503),
    request=s.ActionSerializer,
    parameters=[SESSION_ID],
)
diagnostics = describe(
    "diagnostics",
    "The full trace and state",
    {200: s.DiagnosticsSerializer},
    parameters=[SESSION_ID],
)
live_text = describe(
    "live_text",
    "The reply the model is streaming now (empty when none); polled only while running",
    {200: s.LiveTextSerializer},
    parameters=[SESSION_ID],
)
artifacts_list = describe(
    "artifacts_list", "Artifact pointers", {200: s.ArtifactListSerializer}, parameters=[SESSION_ID]
)
artifact_detail = describe(
    "artifact_detail",
    "One artifact with its payload",
    {200: s.ArtifactSerializer},
    parameters=[SESSION_ID, OpenApiParameter("key", str, OpenApiParameter.PATH)],
)
ATTACHMENT_ID = OpenApiParameter(
    "attachment_id", str, OpenApiParameter.PATH, description="The attachment's UUID."
)
attachment_upload = describe(
    "attachment_upload",
    "Upload files to attach to a message (multipart, field file, one or several)",
    {201: s.AttachmentListSerializer},
    (*WRITE_ERRORS, 409, 429),
    request={"multipart/form-data": s.AttachmentUploadSerializer},
    parameters=[SESSION_ID],
    description=(
        "PNG, JPEG, GIF, WebP or PDF, typed from the bytes: anything else is a 400 "
        "ahentic_attachment_type; over the size limit a 413 ahentic_attachment_too_large; "
        "an image over 2000 px on a side is scaled down to fit, one of more pixels than "
        "ATTACHMENT_MAX_IMAGE_PIXELS a 413 ahentic_attachment_too_many_pixels; over the count "
        "limits a 400 ahentic_attachment_limit; a file name too long for the form a 400 "
        "ahentic_attachment_name; past the user's quota a 409 ahentic_attachment_quota."
    ),
)
attachment_content = describe(
    "attachment_content",
    "The bytes of an attachment (its owner only)",
    {
        (200, content_type): OpenApiResponse(
            bytes, description="The file, with the Content-Type detected from its bytes."
        )
        for content_type in (
            "image/png",
            "image/jpeg",
            "image/gif",
            "image/webp",
            "application/pdf",
        )
    },
    parameters=[SESSION_ID, ATTACHMENT_ID],
)
attachment_delete = describe(
    "attachment_delete",
    "Delete an unsent upload (409 once sent with a message)",
    {204: OpenApiResponse(description="Deleted.")},
    (*READ_ERRORS, 409),
    parameters=[SESSION_ID, ATTACHMENT_ID],
)
tools_list = describe("tools_list", "The tools the user may use", {200: s.ToolSerializer})
skills_list = describe("skills_list", "Skills", {200: s.CatalogItemSerializer})
workflows_list = describe("workflows_list", "Workflows", {200: s.CatalogItemSerializer})
token_stats = describe(
    "token_stats",
    "The user's daily token series, zero-filled, oldest first",
    {200: s.TokenSeriesSerializer},
    parameters=[s.TokenStatsQuerySerializer],
)
