"""The API's OpenAPI description (drf-spectacular): the ``extend_schema`` arguments of every
route (operation id, summary, request and response serializers, error responses), kept out of
the viewsets so they stay readable.

The shapes are the serializers in ``serializers.py``, the same classes that render the answers;
the document is the fuzzing leg's oracle (``.ci/fuzz-leg`` checks every response against it).
"""

from __future__ import annotations

import copy

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema

from . import serializers as s

# --- error responses --------------------------------------------------------------------------

ERROR_TEXT = {
    400: "Invalid input or JSON (ahentic_invalid_input, ahentic_invalid_json, ...).",
    401: "Not logged in (ahentic_unauthenticated).",
    403: "No permission to use the agent, or a CSRF failure (ahentic_forbidden).",
    404: (
        "Not found (ahentic_session_not_found, ahentic_agent_not_found, "
        "ahentic_pending_not_found, ahentic_message_not_found, artifact_missing)."
    ),
    405: "Method not allowed (ahentic_method_not_allowed).",
    409: "Conflict with the session's state (busy, queue full, not awaiting, ...).",
    410: "Deleted too long ago to be restored (ahentic_restore_expired).",
    413: "Body over 2 MiB (ahentic_body_too_large).",
    415: "Body is not JSON (ahentic_unsupported_media_type).",
    429: "Throttled (ahentic_throttled, Retry-After) or the daily token limit.",
    503: "No model configured (ahentic_ai_unavailable), or no credential vault key.",
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


# The shared choice sets, named (drf-spectacular would otherwise name a collision after a hash).
ENUM_NAME_OVERRIDES = {
    "SessionStatusEnum": "sessions_app.models.Session.Status",
    "SessionModeEnum": "sessions_app.models.Session.Mode",
    "ViewModeEnum": "sessions_app.models.Session.ViewMode",
    "GoalStatusEnum": "sessions_app.models.Goal.Status",
    "EventKindEnum": "sessions_app.models.Event.Kind",
    "McpServerAuthEnum": "orchestrator_app.models.McpServer.Auth",
}
# Text the API takes: DRF refuses a NUL character in any string; ``NON_BLANK`` also needs a
# character that is not whitespace (the API trims it).
NO_NUL = "^[^\\u0000]*$"
NON_BLANK = "^[^\\u0000]*[^\\s\\u0000][^\\u0000]*$"


def postprocess(result, generator, request, public):
    """Postprocessing hook: paths as documented (``sessions/{session_id}``; both forms answer),
    and the rules a request body's fields cannot state alone, so that the schema allows
    exactly what the API takes (the fuzzing leg checks both ways)."""
    result["paths"] = {path.rstrip("/") or "/": item for path, item in result["paths"].items()}
    schemas = result.get("components", {}).get("schemas", {})
    for name, component in schemas.items():
        if name.endswith("Request"):
            _no_nul(component)
    _strict_requests(schemas)
    return result


def _scalar(depth: int) -> dict:
    """Any JSON value without a NUL character in a string or key, nested up to ``depth``
    levels (the API takes deeper, up to the parser's bound; documented this far)."""
    options: list[dict] = [
        {"type": "string", "pattern": NO_NUL},
        {"type": "number"},
        {"type": "boolean"},
    ]
    if depth:
        inner = _scalar(depth - 1)
        options += [
            {"type": "array", "items": inner},
            {"type": "object", "additionalProperties": inner},
        ]
    return {"anyOf": options, "nullable": True}


def json_object(nullable: bool = True) -> dict:
    """A JSON object as the API's parser takes it: no NUL character in any key or string
    (OpenAPI 3.0 has no ``propertyNames``: the description says it for the keys)."""
    return {
        "type": "object",
        "additionalProperties": _scalar(2),
        "nullable": nullable,
        "description": "A JSON object; no key or string may hold a NUL character.",
    }


def _no_nul(node) -> None:
    """A request body: strings without a NUL character (DRF and the parser refuse it), and no
    keys besides its fields (documented as closed: the API ignores other keys, but refuses a
    NUL character in them too). A free-form object (``additionalProperties: true``) is any
    JSON object without a NUL character."""
    if not isinstance(node, dict):
        return
    if node.get("type") == "string" and "format" not in node and "enum" not in node:
        node.setdefault("pattern", NO_NUL)
    if node.get("type") == "object":
        if node.get("additionalProperties") is True:
            node.update(json_object(node.get("nullable", False)))
            return
        if "properties" in node:
            node.setdefault("additionalProperties", False)
    for value in node.get("properties", {}).values():
        _no_nul(value)
    _no_nul(node.get("items"))
    for key in ("anyOf", "oneOf", "allOf"):
        for value in node.get(key, []):
            _no_nul(value)


def _oas30(node):
    """A tool's JSON Schema as OpenAPI 3.0 says it: a list of types becomes ``anyOf`` (with
    ``nullable`` for "null"), ``const`` a one-value ``enum``; nested schemas likewise."""
    if isinstance(node, list):
        return [_oas30(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {
        key: value
        if key == "enum"
        else {name: _oas30(field) for name, field in value.items()}
        if key == "properties" and isinstance(value, dict)
        else _oas30(value)
        for key, value in node.items()
    }
    node.pop("$schema", None)
    if "const" in node:
        node["enum"] = [node.pop("const")]
    kinds = node.get("type")
    if isinstance(kinds, list):
        del node["type"]
        named = [kind for kind in kinds if kind != "null"]
        if "null" in kinds:
            node["nullable"] = True
        if len(named) == 1:
            node["type"] = named[0]
        elif named:
            node["anyOf"] = [{"type": kind} for kind in named]
    return node


def _strict_requests(schemas: dict) -> None:
    from sessions_app.conf import ahentic_settings

    from .. import skills
    from ..tools import all_tools

    message = schemas.get("MessageCreateRequest")
    if message:
        content = message["properties"]["content"]
        content["maxLength"] = int(ahentic_settings.MAX_MESSAGE_CHARS)
        # Text, or at least one attachment.
        message["anyOf"] = [
            {"properties": {"content": {"pattern": NON_BLANK}}},
            {"required": ["attachments"], "properties": {"attachments": {"minItems": 1}}},
        ]
    edit = schemas.get("MessageEditRequest")
    if edit:
        content = edit["properties"]["content"]
        content["maxLength"] = int(ahentic_settings.MAX_MESSAGE_CHARS)
        content["pattern"] = NON_BLANK
    browser = schemas.get("BrowserResultRequest")
    if browser:
        browser["anyOf"] = [
            {"required": ["result"]},
            {"required": ["error"], "properties": {"error": {"type": "string"}}},
        ]
    update = schemas.get("PatchedSessionUpdateRequest")
    if update:
        update["additionalProperties"] = False  # an unknown or read-only key is a 400
        update["properties"]["title"]["pattern"] = NON_BLANK
        update["properties"]["activeSkills"]["items"] = {"enum": sorted(skills.skills())}
        workflow = update["properties"]["activeWorkflow"]
        workflow.pop("maxLength", None)
        workflow.pop("pattern", None)
        workflow["enum"] = ["", *sorted(skills.workflows()), None]
    action = schemas.get("ActionRequest")
    if action:
        # A tool the catalog has, with an input its schema takes.
        choices = []
        for tool in all_tools():
            tool_input = _oas30(copy.deepcopy(tool.input_schema or {"type": "object"}))
            _no_nul(tool_input)
            choices.append(
                {
                    "properties": {"name": {"enum": [tool.name]}, "input": tool_input},
                    "required": ["name", "input"],
                }
            )
        action["oneOf"] = choices
    token = schemas.get("McpTokenCreateRequest")
    if token:
        token["additionalProperties"] = False  # an unknown key is a 400
        token["properties"]["name"]["pattern"] = NON_BLANK
    upload = schemas.get("AttachmentUploadRequest")
    if upload:
        files = upload["properties"]["file"]
        files["minItems"] = 1
        files["maxItems"] = int(ahentic_settings.ATTACHMENT_MAX_PER_MESSAGE)


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
    "Create a session with an agent (absent: the site's default agent), at its latest version "
    "or the one named",
    {201: s.SessionPayloadSerializer},
    (*WRITE_ERRORS, 429),
    request=s.SessionCreateSerializer,
    description=(
        "An agent or version that does not exist, is inactive, or the user may not use "
        "(its permission, its groups) is a 404 ahentic_agent_not_found."
    ),
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
    description="The chat is gone from every route at once and restorable with POST "
    "sessions/{session_id}/restore for HISTORY_UNDO_S seconds, then purged with all it holds.",
)
session_restore = describe(
    "session_restore",
    "Restore a chat deleted less than HISTORY_UNDO_S seconds ago",
    PAYLOAD,
    (*WRITE_ERRORS, 410),
    request=None,
    parameters=[SESSION_ID],
    description="Answers the chat's payload (also for a chat that is not deleted). 410 "
    "ahentic_restore_expired once the undo window is over; 404 once it is purged.",
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
    "run_cancel",
    "Cancel the run; the reply being streamed is kept up to `shown` when given",
    PAYLOAD,
    WRITE_ERRORS,
    request=s.CancelSerializer,
    parameters=[SESSION_ID],
)
message_retry = describe(
    "message_retry",
    "Retry: run the user's last message again; what followed it stays as an earlier attempt "
    "(messages' meta.supersededBy)",
    {202: s.SessionPayloadSerializer},
    (*WRITE_ERRORS, 409, 429, 503),
    request=None,
    parameters=[SESSION_ID],
)
message_edit = describe(
    "message_edit",
    "Edit and resend a message of the user's (the last or an earlier one); it and what "
    "followed stay as an earlier attempt, the new message's meta.editOf names it",
    {202: s.SessionPayloadSerializer},
    (*WRITE_ERRORS, 409, 429, 503),
    request=s.MessageEditSerializer,
    parameters=[
        SESSION_ID,
        OpenApiParameter("seq", str, OpenApiParameter.PATH, description="The message's seq."),
    ],
)
run_continue = describe(
    "run_continue",
    "Continue: resume a resumable job or a stalled run (no-op otherwise); past the chat's "
    "spend cap only with sessions_app.exceed_spend_cap (409 ahentic_spend_cap otherwise)",
    PAYLOAD,
    (*WRITE_ERRORS, 409, 429, 503),
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
agent_latest = describe(
    "agent_latest",
    "What moving the chat to its agent's latest version would change",
    {200: s.AgentMoveSerializer},
    parameters=[SESSION_ID],
    description="404 ahentic_agent_not_found when the chat pins no agent, or one the user may "
    "no longer use.",
)
agent_latest_move = describe(
    "agent_latest_move",
    "Move the chat to its agent's latest version (not while a run is live)",
    PAYLOAD,
    (*WRITE_ERRORS, 409),
    request=None,
    parameters=[SESSION_ID],
    description="Answers the payload with changes: the settings that differ, before and after "
    "(empty when the chat was at the latest version already). 409 ahentic_session_busy while a "
    "run is live; 404 ahentic_agent_not_found as for GET.",
)
AGENT_SLUG = OpenApiParameter("slug", str, OpenApiParameter.PATH, description="The agent's slug.")
agents_list = describe(
    "agents_list",
    "The agents the user may use",
    {200: s.AgentSerializer},
    parameters=[s.AgentListQuerySerializer],
)
agent_retrieve = describe(
    "agent_retrieve",
    "One agent the user may use (any other is a 404 ahentic_agent_not_found)",
    {200: s.AgentSerializer},
    parameters=[AGENT_SLUG],
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
