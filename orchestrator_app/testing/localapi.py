"""A local stand-in for the Anthropic Messages API, for tests and the offline demo.

``LocalMessagesServer`` is a small threaded HTTP server bound to 127.0.0.1 that speaks
the Messages API wire format closely enough for the real ``anthropic`` SDK to talk to
it unchanged::

    with LocalMessagesServer() as server:
        server.enqueue(tool_reply(tool_call("search", {"q": "x"})), text_reply("Found it."))
        client = anthropic.Anthropic(api_key="test", base_url=server.url, max_retries=2)
        ...  # run the agent; inspect server.message_requests() afterwards

It uses only the standard library and the project's token-estimate rule (no Django models, no
``anthropic``); ``manage.py ahentic_localapi`` serves it for a manual demo.

Behaviour
---------
* Routes: ``POST /v1/messages`` (JSON or ``"stream": true`` SSE),
  ``POST /v1/messages/count_tokens``, and the Files API's ``POST /v1/files`` (multipart, field
  ``file``) and ``DELETE /v1/files/{id}`` (both want the beta header ``FILES_BETA``;
  ``fail_uploads`` scripts upload errors, ``files`` lists what is held). Anything else is a 404
  ``not_found_error``. A ``document`` block with a ``file`` source is taken only with the beta
  header and a file id the server holds, and counts as the same PDF sent as base64.
  Errors use the real body shape ``{"type": "error", "error": {"type", "message"},
  "request_id"}`` plus a ``request-id`` header.
* Requests are validated like the real API (roles, tool_use/tool_result pairing, empty
  content, cache_control limit, tool names...); a bad request gets a 400
  ``invalid_request_error`` and does not consume a scripted response.
* Each accepted ``/v1/messages`` call consumes the next scripted response (FIFO, see
  ``enqueue``); when the queue is empty ``server.responder(request_json)`` is asked,
  and without a responder the answer is ``text_reply("Done.")``.
* Thinking: ``thinking_block(text)`` is signed with an HMAC of its text (``with_thinking``
  prepends one to a response; ``redacted_thinking_block`` carries verifiable opaque data).
  A request is refused (400) when a thinking block is altered or lacks its signature, when
  ``thinking`` is on and the assistant turn a tool loop continues (the one before the final
  tool results, or a final assistant turn) does not open with a thinking block, and when
  ``budget_tokens`` is below 1024 or not below ``max_tokens``. Thinking streams as
  ``thinking_delta`` parts then a ``signature_delta``.
* Server tools: ``web_search``/``web_fetch`` definitions must carry a known ``type`` version
  (``SERVER_TOOLS``); ``web_search_blocks`` scripts a search (``server_tool_use`` and its
  ``web_search_tool_result`` in the same turn, as the API requires when they come back) and
  ``cited_text`` a text block citing it (streamed with ``citations_delta``). The reply's
  ``usage.server_tool_use`` counts the searches and fetches it holds. ``pause_turn`` is a
  stop_reason like any other. The memory tool (``memory_20250818``, named ``memory``) is a
  typed client tool: its definition carries no schema, and ``tool_call("memory", {...})``
  scripts its calls like any client tool's.
* Scripted responses can be delayed (``delay_s``) or held until a ``threading.Event``
  is set (``gate``), to keep a call in flight. A streamed response sends its headers
  and ``message_start`` at once, then waits, then sends the deltas.

In tests: start one server per module, call ``server.reset()`` before each test, script
answers with ``enqueue``, and assert on ``server.message_requests()`` (accepted bodies)
or ``server.requests`` (everything, with statuses). Give scripted errors
``retry_after_ms=10`` so the SDK's retries are instant, and hold a call in flight with
``gate=threading.Event()`` plus ``server.wait_for_requests(n)``.

Token and cache accounting (deterministic, so an estimator can reproduce it)
---------------------------------------------------------------------------
A request is cut into *pieces*, in the API's prefix order:

1. each tool definition: ``json.dumps(tool_without_cache_control, sort_keys=True,
   separators=(",", ":"))`` (default ``ensure_ascii``);
2. each system block's text (a string ``system`` is one block; ``""`` is no block);
3. each content block of each message (string content is one text block): text -> its
   text; tool_use -> the same JSON dump of ``{"name", "input"}``; tool_result -> its
   content if a string, else the JSON dump of its content list (blocks without
   cache_control); any other block -> the JSON dump of the block without cache_control.
   Images and PDFs count as the real API counts them (``sessions_app.media.media_tokens``):
   an image width x height / 750 after the API's downscaling, a PDF ``PDF_PAGE_TOKENS`` per
   page; an image inside a tool_result's content list counts the same way.

A piece costs ``max(1, ceil(len(text.encode("utf-8")) / 4))`` tokens. Every message
adds 4 tokens of role overhead, charged to its first piece (a message with an empty
content list is a 4-token piece). The request total is the sum; ``count_tokens``
returns exactly that total.

A block with ``cache_control`` is a breakpoint: it marks the prefix ending at that
piece (a top-level ``cache_control`` marks the last piece). A prefix is identified by
a running sha256 over the canonical JSON of its pieces (content without cache_control,
plus the message index and role), so it is not scoped by model. Breakpoints whose
prefix is below ``min_cacheable_tokens`` are ignored. At most 4 ``cache_control``
markers are allowed, counting tools, system blocks, message blocks, blocks nested in
tool_result content and the top-level one. Then, with C the set of prefixes
cached by earlier successful requests:

* ``cache_read_input_tokens`` = tokens of the longest prefix in C that ends at a
  breakpoint or at one of the ``LOOKBACK_BLOCKS`` (20) pieces before a breakpoint, as the
  real API looks back for earlier cache entries (else 0);
* ``cache_creation_input_tokens`` = tokens of the longest breakpoint prefix minus the
  read part if that prefix is not in C (else 0); in that case every breakpoint prefix
  of the request is added to C;
* ``input_tokens`` = total - read - creation.

So a conversation that moves its last-message breakpoint forward each step reads the
previous step's prefix, as with the real API. C is updated only for requests answered with
success: just before the JSON answer is sent, or when a stream starts.
``output_tokens`` = ``max(1, ceil(bytes of the compact sorted JSON of the reply content
/ 4))`` unless the scripted response sets it.
"""

from __future__ import annotations

import base64
import email.parser
import email.policy
import functools
import hashlib
import hmac
import json
import math
import re
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self, TypedDict, Unpack, cast

from sessions_app import media
from sessions_app.tokens import estimate_tokens, tool_result_tokens

JSON = dict[str, Any]
Files = dict[str, bytes] | None  # uploaded files' bytes by id, for a request that may name them

MAX_CACHE_BREAKPOINTS = 4
ROLE_OVERHEAD_TOKENS = 4
LOOKBACK_BLOCKS = 20  # pieces before a breakpoint checked for an earlier cache entry
GATE_TIMEOUT_S = 30.0
TEXT_CHUNK = 24  # characters per streamed text_delta
JSON_PARTS = 3  # a tool input is streamed as this many input_json_delta parts
_TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_REQUIRED_KEYS = {
    "text": ("text",),
    "tool_use": ("id", "name", "input"),
    "tool_result": ("tool_use_id",),
}
_ERROR_TYPES = {400: "invalid_request_error", 429: "rate_limit_error", 529: "overloaded_error"}
# Thinking blocks carry an HMAC of their text under this key as their signature, so the server
# can tell a block it sent from one altered on the way back. The key is fixed: history stored
# by the offline demo stays valid across restarts, as the real API's signatures do.
THINKING_KEY = b"ahentic-localapi-thinking"
THINKING_MIN_BUDGET = 1024
THINKING_DISPLAYS = ("summarized", "omitted")
EFFORTS = ("low", "medium", "high", "xhigh", "max")
# Server tool versions the server knows, by tool name.
SERVER_TOOLS = {
    "web_search": ("web_search_20250305", "web_search_20260209", "web_search_20260318"),
    "web_fetch": (
        "web_fetch_20250910",
        "web_fetch_20260209",
        "web_fetch_20260309",
        "web_fetch_20260318",
    ),
}
SERVER_TOOL_VERSIONS = {v: name for name, versions in SERVER_TOOLS.items() for v in versions}
# Typed client tools (the app runs them, like custom tools): type -> the name it must carry.
CLIENT_TOOL_TYPES = {"memory_20250818": "memory"}
TYPED_TOOLS = {**SERVER_TOOL_VERSIONS, **CLIENT_TOOL_TYPES}
THINKING_TYPES = ("thinking", "redacted_thinking")
_SERVER_RESULTS = ("web_search_tool_result", "web_fetch_tool_result")
FILES_BETA = "files-api-2025-04-14"
EXTENDED_THINKING_DOCS = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"


# --------------------------------------------------------------------------- responses


@dataclass
class LocalResponse:
    """One scripted answer. Build it with the helpers below rather than directly."""

    status: int = 200
    content: list[JSON] = field(default_factory=list)
    stop_reason: str | None = "end_turn"
    output_tokens: int | None = None
    error_type: str | None = None
    error_message: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    gate: threading.Event | None = None
    chunk_delay_s: float = 0.0


class Timing(TypedDict, total=False):
    """Timing options accepted by every response helper."""

    delay_s: float  # sleep before answering
    gate: threading.Event  # wait (at most GATE_TIMEOUT_S) until set before answering
    chunk_delay_s: float  # sleep between streamed deltas


Responder = Callable[[JSON], LocalResponse | str]


def _new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:24]}"


def reply(
    content_blocks: list[JSON],
    stop_reason: str | None = "end_turn",
    output_tokens: int | None = None,
    **timing: Unpack[Timing],
) -> LocalResponse:
    """A successful message with the given content blocks."""
    return LocalResponse(200, list(content_blocks), stop_reason, output_tokens, **timing)


def text_reply(text: str, stop_reason: str = "end_turn", **timing: Unpack[Timing]) -> LocalResponse:
    """A message holding one text block."""
    return reply([{"type": "text", "text": text}], stop_reason, **timing)


def tool_call(name: str, input: JSON, id: str | None = None) -> JSON:  # noqa: A002 - API names
    """A ``tool_use`` content block; the id defaults to a fresh ``toolu_<hex>``."""
    return {"type": "tool_use", "id": id or _new_id("toolu"), "name": name, "input": input}


def tool_reply(*calls: JSON, text: str | None = None, **timing: Unpack[Timing]) -> LocalResponse:
    """A ``stop_reason="tool_use"`` message: optional leading text, then the calls."""
    blocks = ([{"type": "text", "text": text}] if text else []) + list(calls)
    return reply(blocks, "tool_use", **timing)


def thinking_signature(thinking: str) -> str:
    """The signature the server gives a thinking block with this text."""
    digest = hmac.new(THINKING_KEY, thinking.encode("utf-8"), hashlib.sha256).digest()
    return base64.b64encode(digest).decode("ascii")


def thinking_block(thinking: str) -> JSON:
    """A signed ``thinking`` block (send it back unchanged, or the server refuses it)."""
    return {"type": "thinking", "thinking": thinking, "signature": thinking_signature(thinking)}


def redacted_thinking_block(secret: str = "redacted") -> JSON:
    """A ``redacted_thinking`` block: opaque ``data`` the server can verify."""
    raw = secret.encode("utf-8")
    mac = hmac.new(THINKING_KEY, raw, hashlib.sha256).hexdigest()
    return {
        "type": "redacted_thinking",
        "data": base64.b64encode(raw).decode("ascii") + "." + mac,
    }


def with_thinking(response: LocalResponse, thinking: str) -> LocalResponse:
    """``response`` with a signed thinking block before its content (as a thinking model's
    reply opens)."""
    response.content = [thinking_block(thinking), *response.content]
    return response


def web_search_blocks(query: str, results: list[JSON], id: str | None = None) -> list[JSON]:  # noqa: A002
    """A web search the server ran: its ``server_tool_use`` and ``web_search_tool_result``
    blocks. ``results``: ``{"url", "title"}`` dicts (``page_age`` optional)."""
    call_id = id or _new_id("srvtoolu")
    found = [
        {
            "type": "web_search_result",
            "url": r["url"],
            "title": r.get("title", r["url"]),
            "encrypted_content": base64.b64encode(r["url"].encode()).decode("ascii"),
            "page_age": r.get("page_age"),
        }
        for r in results
    ]
    return [
        {"type": "server_tool_use", "id": call_id, "name": "web_search", "input": {"query": query}},
        {"type": "web_search_tool_result", "tool_use_id": call_id, "content": found},
    ]


def cited_text(text: str, url: str, title: str, cited: str) -> JSON:
    """A text block citing a web search result."""
    citation = {
        "type": "web_search_result_location",
        "url": url,
        "title": title,
        "cited_text": cited,
        "encrypted_index": base64.b64encode(url.encode()).decode("ascii"),
    }
    return {"type": "text", "text": text, "citations": [citation]}


def error_reply(
    status: int,
    error_type: str | None = None,
    message: str = "Scripted error from the local Messages API.",
    retry_after: float | None = None,
    retry_after_ms: float | None = None,
    **timing: Unpack[Timing],
) -> LocalResponse:
    """An error answer, e.g. ``error_reply(529, "overloaded_error", retry_after_ms=10)``.

    ``error_type`` defaults from the status (429 rate_limit_error, 500 api_error, 529
    overloaded_error...). The SDK prefers ``retry-after-ms`` over ``retry-after``.
    """
    retry = {"retry-after": retry_after, "retry-after-ms": retry_after_ms}
    headers = {name: f"{value:g}" for name, value in retry.items() if value is not None}
    return LocalResponse(
        status=status,
        error_type=error_type or _ERROR_TYPES.get(status, "api_error"),
        error_message=message,
        headers=headers,
        stop_reason=None,
        **timing,
    )


# --------------------------------------------------------------------------- validation


def _content_blocks(content: Any) -> list[Any]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def _system_blocks(system: Any) -> list[JSON]:
    if not system:
        return []
    return [{"type": "text", "text": system}] if isinstance(system, str) else list(system)


def _validate_tools(tools: Any) -> str | None:
    if tools is None:
        return None
    if not isinstance(tools, list):
        return "tools: Input should be a valid list"
    names: set[str] = set()
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict):
            return f"tools.{i}: Input should be a valid dictionary"
        name = tool.get("name")
        if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
            return f"tools.{i}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"
        if name in names:
            return "tools: Tool names must be unique."
        names.add(name)
        # Custom (client) tools need a schema; server tools carry a versioned "type".
        kind = tool.get("type", "custom")
        if kind == "custom" and not isinstance(tool.get("input_schema"), dict):
            return f"tools.{i}.custom.input_schema: Field required"
        if kind != "custom":
            if kind not in TYPED_TOOLS:
                tags = ", ".join(f"'{v}'" for v in ("custom", *TYPED_TOOLS))
                return (
                    f"tools.{i}: Input tag '{kind}' found using 'type' does not match any of "
                    f"the expected tags: {tags}"
                )
            if name != TYPED_TOOLS[kind]:
                return f"tools.{i}.{kind}.name: Input should be '{TYPED_TOOLS[kind]}'"
            if kind in CLIENT_TOOL_TYPES:
                extra = sorted(set(tool) - {"type", "name", "cache_control"})
                if extra:
                    return f"tools.{i}.{kind}.{extra[0]}: Extra inputs are not permitted"
                continue
            uses = tool.get("max_uses")
            if uses is not None and (not isinstance(uses, int) or uses < 1):
                return f"tools.{i}.{kind}.max_uses: Input should be greater than 0"
            if tool.get("allowed_domains") and tool.get("blocked_domains"):
                return f"tools.{i}.{kind}: Cannot specify both allowed_domains and blocked_domains"
    return None


def _validate_system(system: Any) -> str | None:
    if system is None or isinstance(system, str):
        return None
    if not isinstance(system, list):
        return "system: Input should be a valid string or a list of text blocks"
    for i, block in enumerate(system):
        if not isinstance(block, dict) or block.get("type") != "text":
            return f"system.{i}.type: Input should be 'text'"
        if not isinstance(block.get("text"), str) or not block["text"]:
            return f"system.{i}.text: text content blocks must be non-empty"
    return None


def _validate_messages(messages: Any, files: Files = None) -> str | None:
    if not isinstance(messages, list):
        return "messages: Input should be a valid list"
    if not messages:
        return "messages: at least one message is required"
    all_tool_ids: set[str] = set()
    pending: list[str] = []  # tool_use ids of the previous assistant message
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict):
            return f"messages.{i}: Input should be a valid dictionary"
        role = msg.get("role")
        if role not in ("user", "assistant"):
            return f"messages.{i}.role: Input should be 'user' or 'assistant'"
        if i == 0 and role != "user":
            return 'messages: first message must use the "user" role'
        if i > 0 and role == messages[i - 1].get("role"):
            return (
                'messages: roles must alternate between "user" and "assistant", '
                f'but found multiple "{role}" roles in a row'
            )
        content = msg.get("content")
        if not isinstance(content, str | list):
            return f"messages.{i}.content: Input should be a valid string or list of content blocks"
        if not content and not (role == "assistant" and i == len(messages) - 1):
            return (
                f"messages.{i}: all messages must have non-empty content "
                "except for the optional final assistant message"
            )
        tool_ids: list[str] = []
        result_ids: list[str] = []
        server_ids: set[str] = set()  # server_tool_use ids of this message
        first_other: str | None = None  # type of the first non-tool_result block
        for j, block in enumerate(_content_blocks(content)):
            where = f"messages.{i}.content.{j}"
            if not isinstance(block, dict) or not isinstance(block.get("type"), str):
                return f"{where}.type: Field required"
            kind = block["type"]
            for key in _REQUIRED_KEYS.get(kind, ()):
                if key not in block:
                    return f"{where}.{key}: Field required"
            if kind == "text":
                if not isinstance(block["text"], str):
                    return f"{where}.text: Input should be a valid string"
                if not block["text"] and isinstance(content, list):
                    return f"{where}: text content blocks must be non-empty"
            elif kind == "tool_use":
                if role != "assistant":
                    return f"{where}: `tool_use` blocks can only be in `assistant` messages"
                if block["id"] in all_tool_ids:
                    return f"{where}: `tool_use` ids must be unique"
                all_tool_ids.add(block["id"])
                tool_ids.append(block["id"])
            elif kind in THINKING_TYPES or kind == "server_tool_use" or kind in _SERVER_RESULTS:
                problem = _check_assistant_block(where, role, block, server_ids)
                if problem:
                    return problem
            elif kind == "tool_result":
                if role != "user":
                    return f"{where}: `tool_result` blocks can only be in `user` messages"
                if not isinstance(block.get("content", ""), str | list):
                    return f"{where}.content: Input should be a valid string or list"
                if first_other is not None:
                    return (
                        f"{where}: `tool_result` blocks must come before any other content "
                        f"in a user message, but a `{first_other}` block comes first"
                    )
                if block["tool_use_id"] not in pending:
                    return (
                        f"{where}: unexpected `tool_use_id` found in `tool_result` blocks: "
                        f"{block['tool_use_id']}. Each `tool_result` block must have a "
                        "corresponding `tool_use` block in the previous message."
                    )
                result_ids.append(block["tool_use_id"])
                problem = _validate_result_content(block.get("content"), where, files)
                if problem:
                    return problem
            elif kind in ("image", "document"):
                problem = _validate_media(block, where, role, files)
                if problem:
                    return problem
            if kind != "tool_result" and first_other is None:
                first_other = kind
        if role == "user":
            missing = [tool_id for tool_id in pending if tool_id not in result_ids]
            if missing:
                return _missing_results(i - 1, missing)
        pending = tool_ids
    if pending:  # a final assistant message with tool_use has no answer at all
        return _missing_results(len(messages) - 1, pending)
    return None


def _validate_media(block: JSON, where: str, role: str, files: Files = None) -> str | None:
    """An image or document block, refused as the real API refuses it: in an assistant
    message, a media type it does not take, data that is not base64, bytes that are not the
    declared type, an image over 5 MB of base64, a file source without the Files API beta
    header (``files`` None) or naming a file the server does not hold."""
    kind = block["type"]
    if role != "user":
        return f"{where}: `{kind}` blocks can only be in `user` messages"
    source = block.get("source")
    if not isinstance(source, dict):
        return f"{where}.source: Field required"
    source_type = source.get("type")
    if source_type == "url":
        return None if isinstance(source.get("url"), str) else f"{where}.source.url: Field required"
    if source_type == "file" and kind == "document":
        file_id = source.get("file_id")
        if not isinstance(file_id, str):
            return f"{where}.source.file_id: Field required"
        if files is None:
            return (
                f"{where}.document.source.file: The file source requires the beta header "
                f"'anthropic-beta: {FILES_BETA}'."
            )
        if file_id not in files:
            return f"{where}.document.source.file: File not found: {file_id}"
        return None
    if source_type != "base64":
        return f"{where}.{kind}.source.type: Input should be 'base64', 'url' or 'file'"
    path = f"{where}.{kind}.source.base64"
    declared = source.get("media_type")
    allowed = (media.JPEG, media.PNG, media.GIF, media.WEBP) if kind == "image" else (media.PDF,)
    if declared not in allowed:
        quoted = [f"'{t}'" for t in allowed]
        listed = ", ".join(quoted[:-1]) + " or " + quoted[-1] if len(quoted) > 1 else quoted[0]
        return f"{path}.media_type: Input should be {listed}"
    data = media.decoded(source)
    if data is None or not data:
        return f"{path}.data: The {kind} data is not valid base64."
    if kind == "image" and len(source["data"]) > media.API_IMAGE_BASE64_BYTES:
        return (
            f"{path}: image exceeds 5 MB maximum: {len(source['data'])} bytes > "
            f"{media.API_IMAGE_BASE64_BYTES} bytes"
        )
    actual = media.sniff(data)
    if kind == "document" and actual != media.PDF:
        return f"{path}: The PDF specified was not valid."
    if kind == "image" and actual != declared:
        shown = actual if actual in media.IMAGE_TYPES else "unsupported"
        return f"{path}: Image does not match the provided media type {declared} ({shown})."
    return None


def _validate_result_content(content: Any, where: str, files: Files = None) -> str | None:
    """A tool_result's content list: text and image blocks (documents too)."""
    if not isinstance(content, list):
        return None
    for k, inner in enumerate(content):
        inner_where = f"{where}.content.{k}"
        kind = inner.get("type") if isinstance(inner, dict) else None
        if kind == "text":
            if not isinstance(inner.get("text"), str) or not inner["text"]:
                return f"{inner_where}: text content blocks must be non-empty"
        elif kind in ("image", "document"):
            problem = _validate_media(inner, inner_where, "user", files)
            if problem:
                return problem
        else:
            return f"{inner_where}.type: Input should be 'text', 'image' or 'document'"
    return None


def _check_assistant_block(where: str, role: str, block: JSON, server_ids: set[str]) -> str | None:
    """Thinking and server tool blocks: assistant only, sent back as the server sent them."""
    kind = block["type"]
    if role != "assistant":
        return f"{where}: `{kind}` blocks can only be in `assistant` messages"
    if kind == "thinking":
        thinking, signature = block.get("thinking"), block.get("signature")
        if not isinstance(thinking, str):
            return f"{where}.thinking.thinking: Field required"
        if not isinstance(signature, str) or not signature:
            return f"{where}.thinking.signature: Field required"
        if not hmac.compare_digest(signature, thinking_signature(thinking)):
            return f"{where}: Invalid `signature` in `thinking` block"
    elif kind == "redacted_thinking":
        data = block.get("data")
        if not isinstance(data, str):
            return f"{where}.redacted_thinking.data: Field required"
        raw, _, mac = data.partition(".")
        try:
            secret = base64.b64decode(raw.encode("ascii"), validate=True)
        except ValueError:
            secret = None
        expected = hmac.new(THINKING_KEY, secret or b"", hashlib.sha256).hexdigest()
        if secret is None or not hmac.compare_digest(mac, expected):
            return f"{where}: Invalid `data` in `redacted_thinking` block"
    elif kind == "server_tool_use":
        for key in ("id", "name", "input"):
            if key not in block:
                return f"{where}.server_tool_use.{key}: Field required"
        server_ids.add(block["id"])
    elif block.get("tool_use_id") not in server_ids:
        return (
            f"{where}: `{kind}` block(s) provided when `server_tool_use` with the same id "
            "was not found in the same message"
        )
    return None


def _validate_thinking(body: JSON) -> str | None:
    """The ``thinking`` and ``output_config`` parameters, and what thinking asks of history."""
    config = body.get("thinking")
    output = body.get("output_config")
    if output is not None:
        if not isinstance(output, dict):
            return "output_config: Input should be a valid dictionary"
        if "effort" in output and output["effort"] not in (None, *EFFORTS):
            return "output_config.effort: Input should be " + ", ".join(f"'{e}'" for e in EFFORTS)
    if config is None:
        return None
    if not isinstance(config, dict) or config.get("type") not in (
        "enabled",
        "disabled",
        "adaptive",
    ):
        return (
            "thinking: Input tag found using 'type' does not match any of the expected tags: "
            "'enabled', 'disabled', 'adaptive'"
        )
    kind = config["type"]
    if config.get("display") not in (None, *THINKING_DISPLAYS):
        return f"thinking.{kind}.display: Input should be 'summarized' or 'omitted'"
    if kind == "enabled":
        budget = config.get("budget_tokens")
        if not isinstance(budget, int) or isinstance(budget, bool):
            return "thinking.enabled.budget_tokens: Field required"
        if budget < THINKING_MIN_BUDGET:
            return (
                "thinking.enabled.budget_tokens: Input should be greater than or equal to "
                f"{THINKING_MIN_BUDGET}"
            )
        if "max_tokens" in body and budget >= body["max_tokens"]:
            return (
                "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our "
                f"documentation at {EXTENDED_THINKING_DOCS}#max-tokens-and-context-window-size"
            )
    if kind == "disabled":
        return None
    messages = body["messages"]
    last = messages[-1]
    turn: JSON | None = None
    if last.get("role") == "assistant":
        turn = last
    elif len(messages) > 1 and any(
        b.get("type") == "tool_result" for b in _content_blocks(last.get("content"))
    ):
        turn = messages[-2]
    if turn is not None:
        blocks = _content_blocks(turn.get("content"))
        if blocks and blocks[0].get("type") not in THINKING_TYPES:
            return (
                f"messages.{messages.index(turn)}.content.0.type: Expected `thinking` or "
                f"`redacted_thinking`, but found `{blocks[0].get('type')}`. When `thinking` is "
                "enabled, a final `assistant` message must start with a thinking block "
                "(preceeding the lastmost set of `tool_use` and `tool_result` blocks). We "
                "recommend you include thinking blocks from previous turns. To avoid this "
                "requirement, disable `thinking`. Please consult our documentation at "
                f"{EXTENDED_THINKING_DOCS}"
            )
    return None


def _missing_results(index: int, missing: list[str]) -> str:
    return (
        f"messages.{index}: `tool_use` ids were found without `tool_result` blocks "
        f"immediately after: {', '.join(missing)}. Each `tool_use` block must have a "
        "corresponding `tool_result` block in the next message."
    )


def _count_cache_controls(body: JSON) -> int:
    blocks: list[Any] = list(body.get("tools") or []) + _system_blocks(body.get("system"))
    for msg in body["messages"]:
        for block in _content_blocks(msg["content"]):
            blocks.append(block)
            if block.get("type") == "tool_result" and isinstance(block.get("content"), list):
                blocks.extend(block["content"])
    found = sum(1 for block in blocks if isinstance(block, dict) and block.get("cache_control"))
    return found + (1 if body.get("cache_control") else 0)


def _validate_images(messages: list[JSON]) -> str | None:
    """The API's rules for the images of one request (``media.API_MAX_IMAGES`` at most; a side
    over ``API_MAX_SIDE`` refused, over ``API_MANY_IMAGES_SIDE`` once there are more than
    ``API_MANY_IMAGES``), checked on the base64 images' headers."""
    found: list[tuple[str, tuple[int, int]]] = []
    for i, msg in enumerate(messages):
        for j, block in enumerate(_content_blocks(msg.get("content"))):
            inner = [(f"messages.{i}.content.{j}", block)]
            if block.get("type") == "tool_result" and isinstance(block.get("content"), list):
                inner = [
                    (f"messages.{i}.content.{j}.content.{k}", b)
                    for k, b in enumerate(block["content"])
                    if isinstance(b, dict)
                ]
            for where, item in inner:
                if (
                    item.get("type") == "image"
                    and (item.get("source") or {}).get("type") == "base64"
                ):
                    size = media.image_size(media.decoded(item["source"]) or b"") or (1, 1)
                    found.append((where, size))
    if len(found) > media.API_MAX_IMAGES:
        return f"messages: Too many images: {len(found)} > {media.API_MAX_IMAGES} per request."
    many = len(found) > media.API_MANY_IMAGES
    side = media.API_MANY_IMAGES_SIDE if many else media.API_MAX_SIDE
    for where, size in found:
        if max(size) > side:
            kind = " for many-image requests" if many else ""
            return (
                f"{where}.image.source.base64.data: At least one of the image dimensions exceed "
                f"max allowed size{kind}: {side} pixels"
            )
    return None


def validate_request(
    body: Any, *, require_max_tokens: bool = True, files: Files = None
) -> str | None:
    """Return the real API's style of error message for an invalid request, else None.
    ``files``: the uploaded files a ``file`` document source may name, by id (None: the
    request lacks the Files API beta header, and no file source is taken)."""
    if not isinstance(body, dict):
        return "Request body must be a JSON object"
    for name in (
        ("model", "max_tokens", "messages") if require_max_tokens else ("model", "messages")
    ):
        if name not in body:
            return f"{name}: Field required"
    if not isinstance(body["model"], str) or not body["model"]:
        return "model: Input should be a valid string"
    if require_max_tokens:
        max_tokens = body["max_tokens"]
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            return "max_tokens: Input should be an integer greater than or equal to 1"
    problem = (
        _validate_tools(body.get("tools"))
        or _validate_system(body.get("system"))
        or _validate_messages(body["messages"], files)
        or _validate_images(body["messages"])
        or _validate_thinking(body)
    )
    if problem:
        return problem
    found = _count_cache_controls(body)
    if found > MAX_CACHE_BREAKPOINTS:
        return f"A maximum of {MAX_CACHE_BREAKPOINTS} blocks with cache_control may be provided. Found {found}."
    return None


# --------------------------------------------------------------------------- token accounting


@dataclass(frozen=True)
class _Piece:
    key: str  # canonical JSON identifying the piece and its position in the prompt
    tokens: int
    breakpoint: bool


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _without_cc(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if k != "cache_control"}
    return value


def _block_text(block: JSON) -> str:
    kind = block.get("type")
    if kind == "text":
        return cast(str, block.get("text", ""))
    if kind == "tool_use":
        return _dumps({"name": block.get("name"), "input": block.get("input")})
    if kind == "tool_result":
        content = block.get("content") or ""
        return content if isinstance(content, str) else _dumps([_without_cc(b) for b in content])
    return _dumps(_without_cc(block))


def _block_tokens(block: JSON, files: Files = None) -> int:
    """A content block's tokens: its text (``_block_text``), except that images and documents
    count as the real API counts them (``media.media_tokens``: width x height / 750 for an
    image, pages for a PDF), never as their base64 text. A PDF named by its Files API id
    counts as the same PDF sent as base64."""
    if block.get("type") == "tool_result":
        return tool_result_tokens(block.get("content") or "")
    source = block.get("source")
    if block.get("type") == "document" and isinstance(source, dict) and files:
        data = files.get(source.get("file_id")) if source.get("type") == "file" else None
        if data is not None:
            return media.pdf_pages(data) * media.PDF_PAGE_TOKENS
    tokens = media.media_tokens(block)
    return estimate_tokens(_block_text(block)) if tokens is None else tokens


def _pieces(body: JSON, files: Files = None) -> list[_Piece]:
    pieces: list[_Piece] = []
    for tool in body.get("tools") or []:
        plain = _without_cc(tool)
        pieces.append(
            _Piece(
                _dumps(["tool", plain]),
                estimate_tokens(_dumps(plain)),
                bool(tool.get("cache_control")),
            )
        )
    for block in _system_blocks(body.get("system")):
        key = _dumps(["system", _without_cc(block)])
        pieces.append(_Piece(key, estimate_tokens(block["text"]), bool(block.get("cache_control"))))
    for i, msg in enumerate(body["messages"]):
        blocks = _content_blocks(msg["content"])
        if not blocks:
            pieces.append(
                _Piece(_dumps(["message", i, msg["role"], None]), ROLE_OVERHEAD_TOKENS, False)
            )
        for j, block in enumerate(blocks):
            tokens = _block_tokens(block, files) + (ROLE_OVERHEAD_TOKENS if j == 0 else 0)
            key = _dumps(["message", i, msg["role"], _without_cc(block)])
            pieces.append(_Piece(key, tokens, bool(block.get("cache_control"))))
    if body.get("cache_control") and pieces:  # top-level automatic caching: mark the last piece
        last = pieces[-1]
        pieces[-1] = _Piece(last.key, last.tokens, True)
    return pieces


def count_request_tokens(body: JSON, files: Files = None) -> int:
    """Total input tokens of a valid request under the module's counting rule (``files``: the
    bytes of the uploaded files it may name, by id)."""
    return sum(piece.tokens for piece in _pieces(body, files))


def output_token_count(content: list[JSON]) -> int:
    """Default ``output_tokens`` of a reply with these content blocks."""
    return estimate_tokens(_dumps(content))


# --------------------------------------------------------------------------- server


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True  # a call held on a gate must not block interpreter exit
    request_queue_size = 128  # the default listen backlog of 5 stalls bursts of parallel calls
    owner: LocalMessagesServer


class LocalMessagesServer:
    """Threaded local Messages API server; see the module docstring."""

    def __init__(
        self,
        port: int = 0,
        api_key: str | None = None,
        *,
        min_cacheable_tokens: int = 0,
        verbose: bool = False,
    ) -> None:
        self.api_key = api_key
        self.min_cacheable_tokens = min_cacheable_tokens
        self.verbose = verbose  # log each request to stderr (the CLI turns it on)
        self.responder: Responder | None = None
        self._cond = threading.Condition()  # guards _queue, _log and _cached
        self._queue: deque[LocalResponse] = deque()
        self._log: list[JSON] = []
        self._cached: set[str] = set()
        self._files: dict[str, JSON] = {}  # uploaded files: their metadata and "bytes"
        self._upload_errors: deque[LocalResponse] = deque()
        self._httpd = _HTTPServer(("127.0.0.1", port), _Handler)  # bound now so .url works
        self._httpd.owner = self
        self._thread: threading.Thread | None = None
        self._closed = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def start(self) -> Self:
        if self._thread is None:
            # A short poll interval keeps stop() fast (shutdown waits for the next poll).
            serve = functools.partial(self._httpd.serve_forever, poll_interval=0.05)
            self._thread = threading.Thread(target=serve, daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket (a stopped server cannot be restarted)."""
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join()
            self._thread = None
        if not self._closed:
            self._httpd.server_close()
            self._closed = True

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def enqueue(self, *responses: LocalResponse) -> None:
        """Queue answers for the next ``/v1/messages`` calls, first in first out."""
        with self._cond:
            self._queue.extend(responses)

    def fail_uploads(self, *errors: LocalResponse) -> None:
        """Answer the next ``POST /v1/files`` calls with these errors (``error_reply``), first
        in first out; then uploads succeed again."""
        with self._cond:
            self._upload_errors.extend(errors)

    @property
    def files(self) -> dict[str, JSON]:
        """The files uploaded and not deleted, by id: the API's metadata plus ``bytes``."""
        with self._cond:
            return {key: dict(value) for key, value in self._files.items()}

    def _file_bytes(self) -> dict[str, bytes]:
        with self._cond:
            return {key: value["bytes"] for key, value in self._files.items()}

    @property
    def requests(self) -> list[JSON]:
        """Every request received so far, in arrival order (a snapshot copy).

        Each entry: ``path``, ``headers`` (lower-cased names), ``json`` (parsed body or
        None), ``raw`` (the body's bytes as sent), ``status`` and ``response`` (None while
        the call is in flight; the full message for a stream) and ``accepted`` (passed auth
        and validation).
        """
        with self._cond:
            return list(self._log)

    def message_requests(self) -> list[JSON]:
        """Bodies of the ``/v1/messages`` calls that passed auth and validation."""
        return [e["json"] for e in self.requests if e["accepted"] and e["path"] == "/v1/messages"]

    def wait_for_requests(self, count: int, timeout: float = 5.0) -> bool:
        """Block until at least ``count`` requests have arrived; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: len(self._log) >= count, timeout)

    def reset(self) -> None:
        """Forget queued responses, the responder, the request log and the prompt cache."""
        with self._cond:
            self._queue.clear()
            self._log.clear()
            self._cached.clear()
            self._files.clear()
            self._upload_errors.clear()
            self.responder = None

    # -- helpers for _Handler (called on handler threads)
    def _record(self, entry: JSON) -> None:
        with self._cond:
            self._log.append(entry)
            self._cond.notify_all()

    def _update(self, entry: JSON, status: int, response: JSON) -> None:
        with self._cond:
            entry.update(status=status, response=response)

    def _next_response(self, body: JSON) -> LocalResponse:
        with self._cond:
            scripted: LocalResponse | str | None = self._queue.popleft() if self._queue else None
            responder = self.responder
        if scripted is None:  # called outside the lock: a responder may be slow
            scripted = responder(body) if responder else text_reply("Done.")
        return text_reply(scripted) if isinstance(scripted, str) else scripted

    def _authorized(self, headers: dict[str, str]) -> bool:
        if self.api_key is None:
            return True
        bearer = headers.get("authorization", "").removeprefix("Bearer ").strip()
        return self.api_key in (headers.get("x-api-key"), bearer)

    def _message(self, body: JSON, scripted: LocalResponse, files: Files = None) -> JSON:
        """The full response message; computing its usage commits the cache prefixes."""
        content = json.loads(json.dumps(scripted.content))  # private copy per answer
        output = scripted.output_tokens
        usage: JSON = self._account(body, files)
        usage["output_tokens"] = output_token_count(content) if output is None else output
        searches = sum(
            1
            for b in content
            if b.get("type") == "server_tool_use" and b.get("name") == "web_search"
        )
        fetches = sum(
            1
            for b in content
            if b.get("type") == "server_tool_use" and b.get("name") == "web_fetch"
        )
        if searches or fetches:
            usage["server_tool_use"] = {
                "web_search_requests": searches,
                "web_fetch_requests": fetches,
            }
        return {
            "id": _new_id("msg"),
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": scripted.stop_reason,
            "stop_sequence": None,
            "usage": usage,
        }

    def _account(self, body: JSON, files: Files = None) -> dict[str, int]:
        pieces = _pieces(body, files)
        hashes: list[str] = []
        totals: list[int] = []
        running, total = hashlib.sha256(), 0
        for piece in pieces:
            running.update(piece.key.encode("utf-8") + b"\n")
            total += piece.tokens
            hashes.append(running.hexdigest())
            totals.append(total)
        marks = [k for k, p in enumerate(pieces) if p.breakpoint]
        marks = [k for k in marks if totals[k] >= self.min_cacheable_tokens]
        read = creation = 0
        with self._cond:  # look up and commit atomically: concurrent calls see one cache
            if marks:
                candidates = {j for k in marks for j in range(max(0, k - LOOKBACK_BLOCKS), k + 1)}
                read = max((totals[j] for j in candidates if hashes[j] in self._cached), default=0)
                if hashes[marks[-1]] not in self._cached:
                    creation = totals[marks[-1]] - read
                    self._cached.update(hashes[k] for k in marks)
        return {
            "input_tokens": total - read - creation,
            "cache_creation_input_tokens": creation,
            "cache_read_input_tokens": read,
        }


class _Handler(BaseHTTPRequestHandler):
    """Handles one HTTP request; all shared state lives on the LocalMessagesServer."""

    entry: JSON
    raw: bytes = b""

    @property
    def owner(self) -> LocalMessagesServer:
        return cast(_HTTPServer, self.server).owner

    def do_POST(self) -> None:
        headers = {name.lower(): value for name, value in self.headers.items()}
        raw = self.rfile.read(int(headers.get("content-length") or 0))
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        path = self.path.split("?", 1)[0]
        self.raw = raw
        self.entry = {
            "method": self.command,
            "path": path,
            "headers": headers,
            "json": body,
            "raw": raw,
            "status": None,
            "response": None,
            "accepted": False,
        }
        self.owner._record(self.entry)
        try:
            self._dispatch(path, headers, body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went away (e.g. it closed a stream early)
        except Exception as exc:  # e.g. a responder bug: answer 500 rather than drop the socket
            message = f"localapi internal error: {exc!r}"
            self._send_error(500, "api_error", message, {"x-should-retry": "false"})

    do_GET = do_PUT = do_PATCH = do_DELETE = do_POST  # recorded, then answered with 404

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - base class name
        if self.owner.verbose:
            super().log_message(format, *args)

    def _dispatch(self, path: str, headers: dict[str, str], body: Any) -> None:
        owner = self.owner
        if not owner._authorized(headers):
            return self._send_error(401, "authentication_error", "invalid x-api-key")
        betas = [b.strip() for b in headers.get("anthropic-beta", "").split(",")]
        if path == "/v1/files" or path.startswith("/v1/files/"):
            return self._files_route(path, headers, FILES_BETA in betas)
        is_count = path == "/v1/messages/count_tokens"
        if self.command != "POST" or not (is_count or path == "/v1/messages"):
            return self._send_error(404, "not_found_error", "Not Found")
        if len(self.raw) > media.API_MAX_REQUEST_BYTES:
            return self._send_error(
                413,
                "request_too_large",
                f"Request exceeds the maximum size of {media.API_MAX_REQUEST_BYTES} bytes.",
            )
        files = owner._file_bytes() if FILES_BETA in betas else None
        problem = validate_request(body, require_max_tokens=not is_count, files=files)
        if problem:
            return self._send_error(400, "invalid_request_error", problem)
        if is_count:
            return self._send_json(200, {"input_tokens": count_request_tokens(body, files)})
        self.entry["accepted"] = True
        scripted = owner._next_response(body)
        if scripted.status >= 400:
            _wait(scripted)
            error_type = scripted.error_type or "api_error"
            message = scripted.error_message
            return self._send_error(scripted.status, error_type, message, scripted.headers)
        if body.get("stream"):
            return self._stream(body, scripted, files)
        _wait(scripted)
        self._send_json(200, owner._message(body, scripted, files))

    def _files_route(self, path: str, headers: dict[str, str], beta: bool) -> None:
        """``POST /v1/files`` (multipart, field ``file``) and ``DELETE /v1/files/{id}``, with
        the Files API beta header, as the real API answers them."""
        owner = self.owner
        file_id = path.removeprefix("/v1/files").strip("/")
        if not ((self.command == "POST" and not file_id) or (self.command == "DELETE" and file_id)):
            return self._send_error(404, "not_found_error", "Not Found")
        if not beta:
            return self._send_error(
                400,
                "invalid_request_error",
                f"The Files API requires the beta header 'anthropic-beta: {FILES_BETA}'.",
            )
        if self.command == "DELETE":
            with owner._cond:
                found = owner._files.pop(file_id, None)
            if found is None:
                return self._send_error(404, "not_found_error", f"File not found: {file_id}")
            self.entry["accepted"] = True
            return self._send_json(200, {"id": file_id, "type": "file_deleted"})
        part = _multipart_file(headers.get("content-type", ""), self.raw)
        if part is None:
            return self._send_error(400, "invalid_request_error", "file: Field required")
        name, declared, data = part
        self.entry["accepted"] = True
        with owner._cond:
            error = owner._upload_errors.popleft() if owner._upload_errors else None
        if error is not None:
            _wait(error)
            message = error.error_message
            error_type = error.error_type or "api_error"
            return self._send_error(error.status, error_type, message, error.headers)
        metadata: JSON = {
            "id": _new_id("file"),
            "type": "file",
            "filename": name.replace("\\", "/").rsplit("/", 1)[-1] or "unnamed",
            "mime_type": media.sniff(data) or declared or "application/octet-stream",
            "size_bytes": len(data),
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "downloadable": False,
        }
        with owner._cond:
            owner._files[metadata["id"]] = {**metadata, "bytes": data}
        self._send_json(200, metadata)

    def _send_json(self, status: int, payload: JSON, headers: dict[str, str] | None = None) -> None:
        self.owner._update(self.entry, status, payload)
        data = json.dumps(payload).encode()
        self.send_response(status, "Overloaded" if status == 529 else None)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", payload.get("request_id") or _new_id("req"))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_error(
        self, status: int, error_type: str, message: str, headers: dict[str, str] | None = None
    ) -> None:
        error = {"type": error_type, "message": message}
        payload = {"type": "error", "error": error, "request_id": _new_id("req")}
        self._send_json(status, payload, headers)

    def _stream(self, body: JSON, scripted: LocalResponse, files: Files = None) -> None:
        message = self.owner._message(body, scripted, files)
        self.owner._update(self.entry, 200, message)
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("request-id", _new_id("req"))
        self.end_headers()

        def send(event: str, **data: Any) -> None:
            payload = json.dumps({"type": event, **data})
            self.wfile.write(f"event: {event}\ndata: {payload}\n\n".encode())
            self.wfile.flush()

        usage = message["usage"]
        start = {**message, "content": [], "stop_reason": None}
        send("message_start", message={**start, "usage": {**usage, "output_tokens": 1}})
        send("ping")
        _wait(scripted)  # headers and message_start go out at once; the deltas wait
        for index, block in enumerate(message["content"]):
            first, deltas = _block_events(block)
            send("content_block_start", index=index, content_block=first)
            for delta in deltas:
                if scripted.chunk_delay_s:
                    time.sleep(scripted.chunk_delay_s)
                send("content_block_delta", index=index, delta=delta)
            send("content_block_stop", index=index)
        # message_delta usage is cumulative: the SDK overwrites its snapshot with it.
        delta = {"stop_reason": message["stop_reason"], "stop_sequence": None}
        send("message_delta", delta=delta, usage=usage)
        send("message_stop")


def _multipart_file(content_type: str, raw: bytes) -> tuple[str, str, bytes] | None:
    """The ``file`` part of a multipart/form-data body: its filename, type and bytes."""
    if not content_type.startswith("multipart/form-data"):
        return None
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode("latin-1")
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + raw)
    if not message.is_multipart():
        return None
    for part in message.iter_parts():
        if part.get_param("name", header="content-disposition") == "file":
            data = part.get_payload(decode=True) or b""
            return part.get_filename() or "", part.get_content_type(), data
    return None


def _wait(scripted: LocalResponse) -> None:
    if scripted.gate is not None:
        scripted.gate.wait(GATE_TIMEOUT_S)
    if scripted.delay_s:
        time.sleep(scripted.delay_s)


def _chunks(text: str, size: int) -> list[str]:
    return [text[k : k + size] for k in range(0, len(text), max(1, size))]


def _block_events(block: JSON) -> tuple[JSON, list[JSON]]:
    """The ``content_block_start`` payload and the deltas that rebuild ``block``."""
    if block.get("type") == "text":
        deltas = [{"type": "text_delta", "text": c} for c in _chunks(block["text"], TEXT_CHUNK)]
        return {**block, "text": ""}, deltas
    if block.get("type") == "text" and block.get("citations"):
        deltas = [{"type": "text_delta", "text": c} for c in _chunks(block["text"], TEXT_CHUNK)]
        deltas += [{"type": "citations_delta", "citation": c} for c in block["citations"]]
        return {"type": "text", "text": "", "citations": []}, deltas
    if block.get("type") == "thinking":
        deltas = [
            {"type": "thinking_delta", "thinking": c}
            for c in _chunks(block["thinking"], TEXT_CHUNK)
        ]
        deltas.append({"type": "signature_delta", "signature": block["signature"]})
        return {"type": "thinking", "thinking": "", "signature": ""}, deltas
    if block.get("type") == "tool_use":
        raw = json.dumps(block["input"])
        parts = _chunks(raw, math.ceil(len(raw) / JSON_PARTS))
        return {**block, "input": {}}, [
            {"type": "input_json_delta", "partial_json": p} for p in parts
        ]
    # Any other block (redacted thinking, server tool use and results) arrives whole in
    # content_block_start, as the real API sends it.
    return block, []
