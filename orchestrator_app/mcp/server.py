"""The site as an MCP server: Streamable HTTP in its stateless JSON-response mode.

``POST mcp`` takes one JSON-RPC message (or, for clients of the 2025-03-26 revision, a batch)
and answers ``application/json``; a notification or a response is ``202`` with no body. There
is no server-to-client stream (``GET`` and ``DELETE`` are ``405``) and no session
(``Mcp-Session-Id`` is neither issued nor required): every request carries its bearer token.
The messages are built and checked with the ``mcp`` SDK's types, for the protocol revision of
the request (the ``MCP-Protocol-Version`` header):

- the handshake revisions (2024-11-05 to 2025-11-25): ``initialize``, ``ping``,
  ``tools/list``, ``tools/call`` and the client's notifications;
- 2026-07-28, the newest the installed SDK speaks: no handshake, every request carries the
  per-request envelope (``params._meta``: protocol version, client capabilities; the
  ``Mcp-Method``/``Mcp-Name`` headers match the body, ``mcp.shared.inbound`` checks it):
  ``server/discover``, ``tools/list``, ``tools/call``.

Approvals asked in the client. A call that needs approval answers a client whose request
declares the elicitation capability (form mode) with an ``input_required`` result (the
multi round-trip requests of 2026-07-28, SEP-2322): one ``elicitation/create`` form (Allow
once / Deny) and a signed ``requestState``; the client asks its user and repeats the call
with the answer, which is recorded through the card's decision pipeline
(``mcp_calls.approval_answer``): whichever of the client and the sidebar's card answers first
wins. The server never waits for the user: between the two requests nothing is held open,
and the card waits meanwhile as it always does. The handshake revisions ask a server's
questions on an SSE stream of the POST; this endpoint has none, and a stateless server does
not keep the capability a client declared in ``initialize``: those clients, and clients
without the capability, get the answer "waiting for approval at <link>" and call again.

Authentication: ``Authorization: Bearer ahmcp_...``, a token the user made in the sidebar or
staff made in the admin (``mcp/tokens.py``), or an OAuth access token issued for this
endpoint (``oauth/``: its scopes name the agent and whether the tools that change data may be
listed and called). Without a usable token: ``401`` with
``WWW-Authenticate: Bearer resource_metadata=...`` (the MCP authorization spec), the document
served by ``resource_metadata`` below. A user who may not use the agent: ``403``. An OAuth
token whose scopes do not cover the request: ``403`` with ``error="insufficient_scope"`` and
the ``scope`` that would.

The tools are those a chat of the user's default agent (``?agent=<slug>``: another agent the
user may use) offers, run through the chat pipeline (``mcp/calls.py``). Errors never
become a 5xx: malformed JSON -32700, an invalid message -32600, an unknown method -32601,
invalid params or an unknown tool -32602, a body over the API's limit 413.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

import mcp.types as mcp_types
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import transaction
from django.http import HttpResponse, JsonResponse, UnreadablePostError
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext
from django.views.decorators.csrf import csrf_exempt
from mcp.shared.inbound import ERROR_CODE_HTTP_STATUS, InboundModernRoute, classify_inbound_request
from mcp.types import methods as mcp_methods
from mcp.types.version import (
    HANDSHAKE_PROTOCOL_VERSIONS,
    LATEST_HANDSHAKE_VERSION,
    MODERN_PROTOCOL_VERSIONS,
)
from pydantic import ValidationError

from sessions_app import agents
from sessions_app.conf import ahentic_settings

from .. import links
from ..api.parsers import nul_path
from ..api.permissions import may_use_agent
from ..api.throttles import RunStartThrottle, throttles_for
from ..api.views import MAX_BODY_BYTES
from ..json_limits import MAX_JSON_DEPTH, json_depth_exceeds
from ..oauth import services as oauth
from ..tools import Tool
from . import calls as mcp_calls
from . import tokens as mcp_tokens

SERVER_NAME = "django-ahentic"
SERVER_VERSION = "1"
# Without the header, the revision a client that predates it speaks (the transport's rule).
DEFAULT_PROTOCOL_VERSION = "2025-03-26"
MAX_BATCH = 20
INSTRUCTIONS = (
    "Tools of this site, run with your own permissions. A tool that changes something waits "
    "for your approval in the site's agent panel unless you granted it there; call it again "
    "with the same arguments once approved to get its result."
)
# A request the endpoint refuses before any method: the JSON-RPC code for its body.
AUTH_ERROR = -32001
SUPPORTED_VERSIONS = (*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS)
# The methods of each era (the client's notifications aside).
HANDSHAKE_METHODS = ("initialize", "ping", "tools/list", "tools/call")
MODERN_METHODS = ("server/discover", "tools/list", "tools/call")
# The key of the approval question in an ``input_required`` result and in the answers.
APPROVAL_INPUT = "approval"


def rpc_error(code: int, message: str, request_id: Any = None, data: Any = None) -> dict:
    """A JSON-RPC error; ``id`` null when the request's id could not be read."""
    error = mcp_types.ErrorData(code=code, message=message, data=data)
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": error.model_dump(by_alias=True, exclude_none=True, mode="json"),
    }


def rpc_result(request_id: Any, result: dict[str, Any]) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def refusal(status: int, code: int, message: str, **headers: str) -> JsonResponse:
    response = JsonResponse(rpc_error(code, message), status=status)
    for name, value in headers.items():
        response[name.replace("_", "-")] = value
    return response


def metadata_url(request) -> str:
    return request.build_absolute_uri(reverse("ahentic:mcp-resource-metadata"))


def unauthorized(request, message: str) -> JsonResponse:
    challenge = f'Bearer resource_metadata="{metadata_url(request)}"'
    return refusal(401, AUTH_ERROR, message, WWW_Authenticate=challenge)


def insufficient_scope(request, access: oauth.Access, *needed: str) -> JsonResponse:
    """403 for an OAuth token whose scopes miss ``needed``: the ``scope`` to ask for is the
    token's and those (a client steps up with it)."""
    scope = " ".join(sorted(access.scopes | set(needed)))
    challenge = (
        f'Bearer error="insufficient_scope", scope="{scope}", '
        f'resource_metadata="{metadata_url(request)}"'
    )
    return refusal(
        403,
        AUTH_ERROR,
        f"The token's scope does not cover this: {scope}.",
        WWW_Authenticate=challenge,
    )


def resource_metadata(request, resource_path: str | None = None):
    """OAuth 2.0 Protected Resource Metadata (RFC 9728) of the endpoint: the site's own
    authorization server (``oauth/``) unless ``MCP_OAUTH`` is off (then none is listed and the
    endpoint takes the users' personal tokens only). Also served at the root
    ``/.well-known/oauth-protected-resource`` forms (``oauth/urls.py``)."""
    if request.method not in ("GET", "HEAD"):
        return refusal(405, mcp_types.INVALID_REQUEST, "Use GET.", Allow="GET, HEAD")
    document = {
        "resource": oauth.resource_url(request),
        "authorization_servers": [],
        "bearer_methods_supported": ["header"],
        "resource_name": SERVER_NAME,
    }
    if ahentic_settings.MCP_OAUTH:
        document["authorization_servers"] = [oauth.issuer_url(request)]
        document["scopes_supported"] = [oauth.READ, oauth.WRITE]
    return JsonResponse(document)


def same_origin(request) -> bool:
    """A browser's request carries ``Origin``: it must be this site (the transport's defence
    against DNS rebinding); clients outside a browser send none. ``Origin: null`` (a sandboxed
    frame, a ``file:`` page, a redirect across sites) names no site, so it is refused: read as
    a URL it would be a relative path, which the host check lets through."""
    origin = request.headers.get("Origin")
    if not origin:
        return True
    if origin.strip().lower() == "null":
        return False
    return url_has_allowed_host_and_scheme(
        origin, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    )


@csrf_exempt  # bearer tokens, not cookies: a cross-site form cannot authenticate
def endpoint(request):
    """The MCP endpoint (see the module's docstring)."""
    if not ahentic_settings.MCP_SERVER:
        return refusal(404, mcp_types.METHOD_NOT_FOUND, "The MCP endpoint is off.")
    if not same_origin(request):
        return refusal(403, mcp_types.INVALID_REQUEST, "Cross-origin requests are refused.")
    scheme, _, secret = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not secret.strip():
        return unauthorized(request, "A bearer token is required.")
    access = None
    if secret.strip().startswith(mcp_tokens.TOKEN_PREFIX) or not ahentic_settings.MCP_OAUTH:
        token = mcp_tokens.token_authenticate(secret.strip())
    else:
        access = oauth.bearer_access(request)
        token = access.token if access is not None else None
    if token is None:
        return unauthorized(request, "The token is unknown, expired or revoked.")
    user = token.user
    if not user.is_active or not may_use_agent(user):
        return refusal(403, AUTH_ERROR, "You do not have permission to use the agent.")
    # The token's user is the request's (the throttles key on it; no session cookie is used).
    request.user = user
    if request.method != "POST":
        # No server-to-client stream and no session to end in the stateless mode.
        return refusal(405, mcp_types.INVALID_REQUEST, "Use POST.", Allow="POST")
    slug = request.GET.get("agent") or None
    if access is not None:
        if slug and slug != access.agent:
            return insufficient_scope(request, access, f"{oauth.AGENT}{slug}")
        if not access.reads:
            return insufficient_scope(request, access, oauth.READ)
        slug = access.agent
    try:
        version = agents.version_for_new_session(user, slug)
    except agents.AgentNotFound:
        return refusal(404, mcp_types.INVALID_PARAMS, "No such agent for you.")
    protocol = request.headers.get("MCP-Protocol-Version") or DEFAULT_PROTOCOL_VERSION
    if protocol not in SUPPORTED_VERSIONS:
        return JsonResponse(
            rpc_error(
                mcp_types.UNSUPPORTED_PROTOCOL_VERSION,
                f"Unsupported protocol version {protocol[:40]!r}.",
                data={"supported": list(SUPPORTED_VERSIONS), "requested": protocol[:40]},
            ),
            status=400,
        )
    content_type = request.content_type or ""
    if content_type != "application/json":
        return refusal(415, mcp_types.INVALID_REQUEST, "The body must be application/json.")
    body = read_body(request)
    if isinstance(body, HttpResponse):
        return body
    handler = Handler(request, token, version, protocol, access)
    if protocol in MODERN_PROTOCOL_VERSIONS:
        if handler.needs_write(body):
            return insufficient_scope(request, access, oauth.WRITE)
        return modern_message(request, handler, body)
    if isinstance(body, list):
        if not body or len(body) > MAX_BATCH:
            return JsonResponse(
                rpc_error(mcp_types.INVALID_REQUEST, f"A batch holds 1 to {MAX_BATCH} messages."),
                status=400,
            )
        needs_write = [m for m in body if handler.needs_write(m)]
        if needs_write:
            return insufficient_scope(request, access, oauth.WRITE)
        answers = [answer for answer in map(handler.message, body) if answer is not None]
        return JsonResponse(answers, safe=False) if answers else HttpResponse(status=202)
    if handler.needs_write(body):
        return insufficient_scope(request, access, oauth.WRITE)
    answer = handler.message(body)
    if answer is None:
        return HttpResponse(status=202)
    status = 400 if "error" in answer and answer.get("id") is None else 200
    return JsonResponse(answer, status=status)


def modern_message(request, handler: Handler, body: Any) -> HttpResponse:
    """One message of the 2026-07-28 wire: a single request (no batch) whose envelope matches
    the request's headers; an error's HTTP status is the transport's for its code."""
    if not isinstance(body, dict):
        return JsonResponse(
            rpc_error(mcp_types.INVALID_REQUEST, "A message is a JSON object."), status=400
        )
    route = None
    if "method" in body and "id" in body:
        headers = {name.lower(): value for name, value in request.headers.items()}
        route = classify_inbound_request(body, headers=headers)
        if not isinstance(route, InboundModernRoute):
            request_id = body["id"] if isinstance(body["id"], str | int) else None
            answer = rpc_error(route.code, route.message, request_id, route.data)
            return JsonResponse(answer, status=ERROR_CODE_HTTP_STATUS.get(route.code, 400))
    answer = handler.message(body, route)
    if answer is None:
        return HttpResponse(status=202)
    status = 200
    if "error" in answer:
        status = ERROR_CODE_HTTP_STATUS.get(answer["error"]["code"], 200)
    return JsonResponse(answer, status=status)


# A call commits its run before it waits for the worker's answer: never inside a transaction
# a host's ATOMIC_REQUESTS would hold open for the whole request.
for _alias in settings.DATABASES:
    endpoint = transaction.non_atomic_requests(using=_alias)(endpoint)


def read_body(request) -> Any:
    """The parsed body, or the error response: over the API's size limit 413, not JSON -32700
    (too deep or with a NUL character too: the API's parser refuses the same)."""
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    too_large = refusal(413, mcp_types.INVALID_REQUEST, f"The body is over {MAX_BODY_BYTES} bytes.")
    if length > MAX_BODY_BYTES:
        return too_large
    try:
        raw = request.body
    except RequestDataTooBig:  # over DATA_UPLOAD_MAX_MEMORY_SIZE
        return too_large
    except UnreadablePostError:  # the client hung up mid-body
        return refusal(400, mcp_types.PARSE_ERROR, "The body could not be read.")
    if len(raw) > MAX_BODY_BYTES:
        return too_large
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return refusal(400, mcp_types.PARSE_ERROR, "The body is not valid JSON.")
    if json_depth_exceeds(data):
        return refusal(400, mcp_types.PARSE_ERROR, f"JSON nests deeper than {MAX_JSON_DEPTH}.")
    if nul_path(data) is not None:
        return refusal(400, mcp_types.PARSE_ERROR, "NUL characters (\\u0000) are not accepted.")
    return data


class Handler:
    """Answers the messages of one HTTP request."""

    def __init__(self, request, token, version, protocol: str, access: oauth.Access | None = None):
        self.request = request
        self.token = token
        self.user = token.user
        self.version = version
        self.protocol = protocol
        self.access = access  # an OAuth token's scopes; None for a personal token
        self._tools: dict[str, Tool] | None = None

    def all_tools(self) -> dict[str, Tool]:
        if self._tools is None:
            self._tools = {t.name: t for t in mcp_calls.mcp_tools(self.user, self.version)}
        return self._tools

    def tools(self) -> dict[str, Tool]:
        """The tools the token may list and call: with ``tools:read`` only, those that change
        nothing."""
        tools = self.all_tools()
        if self.access is None or self.access.writes:
            return tools
        return {name: tool for name, tool in tools.items() if tool.readonly}

    def needs_write(self, data: Any) -> bool:
        """Whether ``data`` calls a tool that changes data with a token without ``tools:write``
        (answered 403 insufficient_scope, so the client can ask for it)."""
        if self.access is None or self.access.writes or not isinstance(data, dict):
            return False
        if data.get("method") != "tools/call" or not isinstance(data.get("params"), dict):
            return False
        tool = self.all_tools().get(data["params"].get("name"))
        return tool is not None and not tool.readonly

    def message(self, data: Any, route: InboundModernRoute | None = None) -> dict | None:
        """One message's answer; None for a notification or a response (nothing to say).
        ``route``: the checked envelope of a 2026-07-28 request."""
        if not isinstance(data, dict):
            return rpc_error(mcp_types.INVALID_REQUEST, "A message is a JSON object.")
        if "method" not in data:
            if "id" in data and ("result" in data or "error" in data):
                return None  # a response to a request this server never sends: ignored
            return rpc_error(mcp_types.INVALID_REQUEST, "Not a JSON-RPC request.")
        if "id" not in data:
            try:
                mcp_types.JSONRPCNotification.model_validate(data)
            except ValidationError:
                return rpc_error(mcp_types.INVALID_REQUEST, "Not a JSON-RPC notification.")
            return None
        try:
            message = mcp_types.JSONRPCRequest.model_validate(data)
        except ValidationError:
            request_id = data.get("id") if isinstance(data.get("id"), str | int) else None
            return rpc_error(mcp_types.INVALID_REQUEST, "Not a JSON-RPC request.", request_id)
        method = message.method
        params = message.params if isinstance(message.params, dict) else {}
        modern = route is not None
        if method not in (MODERN_METHODS if modern else HANDSHAKE_METHODS):
            return rpc_error(mcp_types.METHOD_NOT_FOUND, "Method not found.", message.id)
        version = route.protocol_version if route is not None else self.protocol
        if method == "initialize":
            offered = params.get("protocolVersion")
            version = (
                offered if offered in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION
            )
        try:
            mcp_methods.validate_client_request(method, version, message.params)
        except ValidationError as exc:
            problem = "; ".join(
                f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:3]
            )
            return rpc_error(mcp_types.INVALID_PARAMS, f"Invalid params: {problem}", message.id)
        if method == "initialize":
            result = self.initialize(version)
        elif method == "server/discover":
            result = self.discover()
        elif method == "ping":
            result = mcp_types.EmptyResult()
        elif method == "tools/list":
            result = self.tools_list()
        else:
            name = params.get("name")
            tool = self.tools().get(name)
            if tool is None:
                return rpc_error(mcp_types.INVALID_PARAMS, f"Unknown tool: {name}", message.id)
            arguments = params.get("arguments") or {}
            if modern and ("requestState" in params or "inputResponses" in params):
                result = self.approval_answered(tool, arguments, params)
                if isinstance(result, str):
                    return rpc_error(mcp_types.INVALID_PARAMS, result, message.id)
            else:
                asks = (
                    modern
                    and ahentic_settings.MCP_ELICITATION is True
                    and can_elicit(route.client_capabilities)
                )
                result = self.tools_call(tool, arguments, ask=asks)
        dumped = result.model_dump(by_alias=True, exclude_none=True, mode="json")
        return rpc_result(message.id, mcp_methods.serialize_server_result(method, version, dumped))

    def initialize(self, version: str) -> mcp_types.InitializeResult:
        return mcp_types.InitializeResult(
            protocol_version=version,
            capabilities=mcp_types.ServerCapabilities(
                tools=mcp_types.ToolsCapability(list_changed=False)
            ),
            server_info=mcp_types.Implementation(name=SERVER_NAME, version=SERVER_VERSION),
            instructions=INSTRUCTIONS,
        )

    def discover(self) -> mcp_types.DiscoverResult:
        return mcp_types.DiscoverResult(
            supported_versions=list(SUPPORTED_VERSIONS),
            capabilities=mcp_types.ServerCapabilities(
                tools=mcp_types.ToolsCapability(list_changed=False)
            ),
            instructions=INSTRUCTIONS,
        )

    def tools_list(self) -> mcp_types.ListToolsResult:
        return mcp_types.ListToolsResult(
            tools=[
                mcp_types.Tool(
                    name=tool.name,
                    description=tool.description,
                    input_schema=tool.input_schema,
                    annotations=mcp_types.ToolAnnotations(
                        read_only_hint=tool.readonly,
                        destructive_hint=None if tool.readonly else True,
                    ),
                )
                for tool in self.tools().values()
            ]
        )

    def tools_call(
        self, tool: Tool, arguments: Any, *, ask: bool = False
    ) -> mcp_types.CallToolResult | mcp_types.InputRequiredResult:
        """``ask``: the client can ask its user, so a call that waits for approval asks there
        (the module's docstring)."""
        if not isinstance(arguments, dict):
            return tool_result(
                {"ok": False, "error": "invalid_input", "message": "arguments must be an object."},
                False,
            )
        for throttle in throttles_for(RunStartThrottle):
            if not throttle.allow_request(self.request, None):
                wait = throttle.wait()
                return tool_result(
                    {
                        "ok": False,
                        "error": "ahentic_throttled",
                        "message": "Too many calls; try again later.",
                        "retryAfter": int(wait or 1),
                    },
                    False,
                )
        outcome = mcp_calls.call_tool(
            token=self.token, version=self.version, tool=tool, arguments=arguments
        )
        if ask and outcome.status == mcp_calls.Status.AWAITING_APPROVAL and outcome.call:
            return self.approval_question(tool, outcome)
        return self.call_result(tool, outcome)

    def call_result(self, tool: Tool, outcome: mcp_calls.CallOutcome) -> mcp_types.CallToolResult:
        answer = self.outcome_result(tool, outcome)
        if outcome.extra.get("already_decided"):
            # The client's answer came second: the first decision's outcome, said so.
            note = (
                f"This call of {tool.name} was already decided in the agent panel before your "
                "answer; the outcome of that decision follows."
            )
            answer.content.insert(0, mcp_types.TextContent(type="text", text=note))
            answer.meta = {**(answer.meta or {}), "ahentic/decision": "already_decided"}
        return answer

    def outcome_result(
        self, tool: Tool, outcome: mcp_calls.CallOutcome
    ) -> mcp_types.CallToolResult:
        status = outcome.status
        if status == mcp_calls.Status.DONE:
            return tool_result(outcome.result, outcome.ok, self.chat(outcome))
        if status == mcp_calls.Status.REFUSED:
            refused = {"ok": False, "error": outcome.code, "message": outcome.message}
            return tool_result(refused, False, self.chat(outcome))
        chat = self.chat(outcome)
        if status == mcp_calls.Status.AWAITING_APPROVAL:
            text = (
                f"Waiting for approval at {chat['link']} : {tool.name} changes something, so "
                f"it runs only once you allow it there (the agent panel's chat "
                f"{chat['title']!r}). Then call {tool.name} again with the same arguments to "
                "get its result; it will not run twice."
            )
        else:
            text = (
                f"{tool.name} is still running. Call it again with the same arguments to get "
                "its result; it will not run twice."
            )
        return mcp_types.CallToolResult(
            content=[mcp_types.TextContent(type="text", text=text)],
            is_error=False,
            meta={"ahentic/status": status, "ahentic/chat": chat},
        )

    def approval_question(
        self, tool: Tool, outcome: mcp_calls.CallOutcome
    ) -> mcp_types.InputRequiredResult:
        """Ask the client's user to allow the waiting call once or deny it (a form with one
        choice); the answer comes back with the retry (``approval_answered``)."""
        assert outcome.call is not None
        chat = self.chat(outcome)
        pending = outcome.session.pending_tool if outcome.session is not None else None
        summary = (pending or {}).get("summary") or tool.name
        message = gettext(
            "%(tool)s changes something on %(site)s: %(summary)s\n"
            "Allow it to run once? You can also answer in the agent panel: %(link)s"
        ) % {
            "tool": tool.name,
            "site": chat.get("site", ""),
            "summary": summary,
            "link": chat.get("link", ""),
        }
        schema = {
            "type": "object",
            "properties": {
                "decision": {
                    "type": "string",
                    "title": gettext("Decision"),
                    "oneOf": [
                        {"const": "allow_once", "title": gettext("Allow once")},
                        {"const": "deny", "title": gettext("Deny")},
                    ],
                }
            },
            "required": ["decision"],
        }
        return mcp_types.InputRequiredResult(
            input_requests={
                APPROVAL_INPUT: mcp_types.ElicitRequest(
                    params=mcp_types.ElicitRequestFormParams(
                        message=message, requested_schema=schema
                    )
                )
            },
            request_state=mcp_calls.approval_state(outcome.call),
        )

    def approval_answered(
        self, tool: Tool, arguments: Any, params: dict[str, Any]
    ) -> mcp_types.CallToolResult | str:
        """The retry of a call that asked: record the client's answer, then the call's
        outcome. A string: why the params are invalid (a -32602 error)."""
        if ahentic_settings.MCP_ELICITATION is not True:
            return "This site takes approvals in its agent panel only, not from MCP clients."
        if not isinstance(arguments, dict):
            return "arguments must be an object."
        call = mcp_calls.call_for_state(
            token=self.token,
            tool_name=tool.name,
            arguments=arguments,
            state=params.get("requestState"),
        )
        if call is None:
            return "requestState does not name a call of yours with these arguments."
        responses = params.get("inputResponses")
        answer = responses.get(APPROVAL_INPUT) if isinstance(responses, dict) else None
        try:
            result = mcp_types.ElicitResult.model_validate(answer)
        except ValidationError:
            return f"inputResponses.{APPROVAL_INPUT} must be the answer to the approval question."
        decision = None
        if result.action == "decline":
            decision = "deny"
        elif result.action == "accept":
            decision = (result.content or {}).get("decision")
            if decision not in mcp_calls.CLIENT_DECISIONS:
                return "The approval's decision must be allow_once or deny."
        outcome = mcp_calls.approval_answer(call=call, decision=decision)
        return self.call_result(tool, outcome)

    def chat(self, outcome: mcp_calls.CallOutcome) -> dict[str, Any]:
        session = outcome.session
        if session is None:
            return {}
        return {
            "id": str(session.pk),
            "title": session.title,
            "site": self.request.build_absolute_uri("/"),
            # Opens the chat in the sidebar (as the mails' links do).
            "link": (
                links.chat_url(session.pk)
                if ahentic_settings.SITE_URL
                else self.request.build_absolute_uri(
                    "/?" + urlencode({links.CHAT_PARAM: str(session.pk)})
                )
            ),
            "url": self.request.build_absolute_uri(
                reverse("ahentic:session-detail", args=[session.pk])
            ),
        }


def can_elicit(capabilities: Any) -> bool:
    """The client's capabilities include form elicitation (``elicitation: {}`` reads as form
    mode, as the 2025-06-18 revision declared it)."""
    if not isinstance(capabilities, dict):
        return False
    elicitation = capabilities.get("elicitation")
    if not isinstance(elicitation, dict):
        return False
    return not elicitation or isinstance(elicitation.get("form"), dict)


def tool_result(result: Any, ok: bool, chat: dict | None = None) -> mcp_types.CallToolResult:
    text = (
        result if isinstance(result, str) else json.dumps(result, ensure_ascii=False, default=str)
    )
    return mcp_types.CallToolResult(
        content=[mcp_types.TextContent(type="text", text=text)],
        is_error=not ok,
        meta={"ahentic/chat": chat} if chat else None,
    )
