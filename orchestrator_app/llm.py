"""The one seam to the Anthropic Messages API: the only module that imports ``anthropic``.

``call_model`` streams a request, calls ``on_progress`` as events arrive (the step uses it to
refresh its lease and to notice a cancel), and returns a small typed ``LLMResult``. SDK errors
that survive the SDK's own retries become ``LLMError`` with a stable code and a retryable flag.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import anthropic
import httpx2  # the SDK's HTTP client; its errors can escape a stream being read
from anthropic.lib.streaming import MessageStreamManager
from anthropic.types import Message, RawMessageStreamEvent

from sessions_app.conf import ahentic_settings
from sessions_app.tokens import compact_json, estimate_tokens

# The Files API's beta: uploads, deletions, and a Messages request that references a file.
FILES_BETA = "files-api-2025-04-14"
# The streaming callback runs at most this often; it writes to the database.
PROGRESS_INTERVAL_S = 2.0
# While reply text streams in, how often the caller sees it (the sidebar's live text).
LIVE_INTERVAL_S = 0.4
# A Messages request body as the SDK encodes one (UTF-8, compact, no NaN): the step encodes
# its request itself and hands the SDK the bytes, so the SDK does not copy the body first.
_REQUEST_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
# The headers the SDK's ``messages.stream`` helper adds, kept so the request is the same.
_STREAM_HEADERS = {"X-Stainless-Helper-Method": "stream", "X-Stainless-Stream-Helper": "messages"}


@dataclass
class LLMResult:
    content: list[dict[str, Any]]
    stop_reason: str
    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    duration_ms: int = 0
    request_id: str = ""
    # How long the model streamed thinking blocks, and the server tools it used in the call.
    thinking_ms: int = 0
    web_search_requests: int = 0
    web_fetch_requests: int = 0
    # tool_use ids whose input the SDK could not read (``_unreadable_input``): each is
    # in ``content`` with an empty input, and the caller answers it as an invalid input.
    unreadable_inputs: dict[str, str] = field(default_factory=dict)

    @property
    def text(self) -> str:
        texts = [b for b in self.content if b.get("type") == "text" and b["text"]]
        # Cited replies come as runs of text blocks split at each citation: one sentence.
        joiner = "" if any(b.get("citations") for b in texts) else "\n\n"
        return joiner.join(b["text"] for b in texts)

    @property
    def tool_uses(self) -> list[dict[str, Any]]:
        return [b for b in self.content if b.get("type") == "tool_use"]


@dataclass
class LLMError(Exception):
    code: str
    message: str
    retryable: bool = True
    status: int | None = None
    duration_ms: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    # The provider's raw words (error body, request id): for the trace and diagnostics only;
    # ``message`` is what users see.
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class Aborted(Exception):
    """``on_progress`` returned False: the caller lost its lease or the run was cancelled."""


_clients: dict[tuple, anthropic.Anthropic] = {}
_clients_lock = threading.Lock()


def llm_available() -> bool:
    return bool(ahentic_settings.API_KEY or ahentic_settings.BASE_URL)


def _client() -> anthropic.Anthropic:
    """One client per process and configuration (tests change the base URL per test)."""
    key = (
        ahentic_settings.API_KEY or "local",
        ahentic_settings.BASE_URL or None,
        float(ahentic_settings.LLM_TIMEOUT_S),
        int(ahentic_settings.LLM_MAX_RETRIES),
    )
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            client = anthropic.Anthropic(
                api_key=key[0], base_url=key[1], timeout=key[2], max_retries=key[3]
            )
            _clients[key] = client
        return client


def strip_nul(value: Any) -> Any:
    """``value`` with every NUL character removed from its strings and keys.

    PostgreSQL's ``text`` and ``jsonb`` refuse ``\\u0000`` (SQLite stores it), so a model reply or
    a tool result holding one would fail the write that persists it. The character carries no
    meaning in text; it is dropped, never escaped, so what is stored reads the same everywhere.
    """
    if isinstance(value, str):
        return value.replace("\x00", "") if "\x00" in value else value
    if isinstance(value, dict):
        return {strip_nul(k): strip_nul(v) for k, v in value.items()}
    if isinstance(value, list):
        return [strip_nul(item) for item in value]
    return value


def _block_dict(block: Any) -> dict[str, Any]:
    if block.type in ("thinking", "redacted_thinking"):
        # Sent back byte for byte with its signature: never altered (not even NULs dropped).
        return block.model_dump(mode="json", exclude_unset=True)
    # The fields the API sent, nulls included (server tool results go back exactly).
    data = strip_nul(block.model_dump(mode="json", exclude_unset=True))
    if data.get("type") == "text":
        text = {"type": "text", "text": data.get("text", "")}
        if data.get("citations"):
            text["citations"] = data["citations"]
        return text
    if data.get("type") == "tool_use":
        return {
            "type": "tool_use",
            "id": data["id"],
            "name": data["name"],
            "input": data.get("input") or {},
        }
    return data


def _stream(body: dict[str, Any], headers: dict[str, str]) -> MessageStreamManager:
    """``messages.stream`` for a body encoded here: the SDK's documented ``post`` with
    ``content`` bytes, read through the SDK's own ``MessageStreamManager``, so the events,
    the final message, the retries and the errors are the helper's own. The helper would
    first copy the whole body (``prepare_request_data``), half the step's own work on a long
    window; the blocks the step builds are plain JSON already (``loop.prompt.Request``)."""
    content = _REQUEST_JSON.encode(body).encode()
    request = partial(
        _client().post,
        "/v1/messages",
        content=content,
        cast_to=Message,
        options={"headers": headers},
        stream=True,
        stream_cls=anthropic.Stream[RawMessageStreamEvent],
    )
    return MessageStreamManager(request, output_format=anthropic.NOT_GIVEN)


def call_model(
    *,
    model: str,
    system: list[dict[str, Any]],
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
    max_tokens: int,
    on_progress: Callable[[str], bool] | None = None,
    thinking: dict[str, Any] | None = None,
    output_config: dict[str, Any] | None = None,
    files: bool | None = None,
) -> LLMResult:
    """Stream one Messages API call. Raises ``LLMError`` or ``Aborted``.

    ``on_progress(text)`` gets the reply's text streamed so far, at least every
    ``PROGRESS_INTERVAL_S`` and, while text arrives, every ``LIVE_INTERVAL_S``; it returns
    False to abandon the call (the caller lost its lease). Only ``text`` deltas are live text:
    thinking streams too but is never shown as the reply. ``thinking`` and ``output_config``
    are sent as given (``loop.prompt.request_options``). ``files``: whether the messages hold a
    Files API file, when the caller knows it from building them (the step does); None: they
    are looked over (``uses_files``)."""
    if not llm_available():
        raise _unavailable()
    started = time.monotonic()
    # The keys in the order the SDK's helper sends them.
    body: dict[str, Any] = {"max_tokens": max_tokens, "messages": messages, "model": model}
    if output_config:
        body["output_config"] = output_config
    body["system"] = system
    if tools:
        body["tools"] = tools
    if thinking:
        body["thinking"] = thinking
    body["stream"] = True
    headers = dict(_STREAM_HEADERS)
    if uses_files(messages) if files is None else files:
        # Only a request that references an uploaded file carries the beta header; any other
        # is sent exactly as before.
        headers["anthropic-beta"] = FILES_BETA
    last_progress = started
    thinking_started: float | None = None
    thinking_s = 0.0
    parts: list[str] = []
    reported = 0
    unreadable: dict[str, str] = {}
    try:
        with _stream(body, headers) as stream:
            events = iter(stream)
            while True:
                try:
                    event = next(events)
                except StopIteration:
                    break
                except ValueError as exc:  # the SDK could not parse a streamed tool input
                    unreadable = _unreadable_input(stream, exc)
                    break
                if event.type == "content_block_delta" and event.delta.type == "text_delta":
                    parts.append(event.delta.text)
                elif event.type == "content_block_start" and event.content_block.type in (
                    "thinking",
                    "redacted_thinking",
                ):
                    thinking_started = time.monotonic()
                elif event.type == "content_block_stop" and thinking_started is not None:
                    thinking_s += time.monotonic() - thinking_started
                    thinking_started = None
                if on_progress is None:
                    continue
                now = time.monotonic()
                due = PROGRESS_INTERVAL_S if len(parts) == reported else LIVE_INTERVAL_S
                if now - last_progress >= due:
                    last_progress, reported = now, len(parts)
                    if not on_progress(strip_nul("".join(parts))):
                        raise Aborted()
            # After an unreadable tool input the stream is abandoned: the message is what
            # arrived before it (``_unreadable_input`` put that block in its place).
            message = stream.current_message_snapshot if unreadable else stream.get_final_message()
            request_id = getattr(stream, "request_id", "") or ""
    except Aborted:
        raise
    except anthropic.APIError as exc:
        raise _map_error(exc, started) from exc
    except httpx2.TimeoutException as exc:
        # Raised by the transport mid-stream, after the SDK handed over the response.
        raise LLMError(
            "ahentic_llm_timeout",
            "The model stopped answering mid-reply.",
            True,
            None,
            _ms(started),
        ) from exc
    except httpx2.HTTPError as exc:
        raise _broken(exc, started) from exc
    usage = message.usage
    server = getattr(usage, "server_tool_use", None)
    content = [_block_dict(b) for b in message.content]
    output_tokens = usage.output_tokens or 0
    if unreadable:
        # The reply's final usage never arrived: input and cache counts are the API's own
        # (``message_start``), the output is estimated from what was received, at least.
        output_tokens = max(output_tokens, estimate_tokens(compact_json(content)))
    return LLMResult(
        content=content,
        stop_reason="tool_use" if unreadable else message.stop_reason or "",
        model=message.model,
        input_tokens=usage.input_tokens or 0,
        output_tokens=output_tokens,
        cache_read_tokens=getattr(usage, "cache_read_input_tokens", 0) or 0,
        cache_write_tokens=getattr(usage, "cache_creation_input_tokens", 0) or 0,
        duration_ms=int((time.monotonic() - started) * 1000),
        request_id=request_id,
        thinking_ms=int(thinking_s * 1000),
        web_search_requests=getattr(server, "web_search_requests", 0) or 0,
        web_fetch_requests=getattr(server, "web_fetch_requests", 0) or 0,
        unreadable_inputs=unreadable,
    )


# What the model reads when the SDK could not parse its tool input (``_unreadable_input``).
UNREADABLE_INPUT = (
    "The input could not be read: the SDK's JSON parser refused it ({reason}). Tool inputs "
    "nest at most about 200 levels deep; send a flatter input."
)


def _unreadable_input(stream: Any, exc: ValueError) -> dict[str, str]:
    """The SDK parses each tool input as it streams, and its JSON parser refuses one nested
    beyond about 200 levels (``ValueError``). The turn is cut at that tool_use: what arrived
    before it stays, the block itself keeps its id and name with an empty input, and the
    caller answers it as an invalid input, so the model can try again. Any other parse
    failure (no tool_use being read) is a model error. Returns ``{tool_use_id: message}``."""
    snapshot = getattr(stream, "current_message_snapshot", None)
    last = snapshot.content[-1] if snapshot is not None and snapshot.content else None
    if last is None or last.type != "tool_use":
        raise LLMError(
            "ahentic_llm_error",
            "The model's reply could not be read.",
            True,
            detail=f"{exc.__class__.__name__}: {exc}"[:2000],
        ) from exc
    last.input = {}
    cause = exc.__cause__ if exc.__cause__ is not None else exc
    reason = str(cause).split("\n", 1)[0][:200]
    return {last.id: UNREADABLE_INPUT.format(reason=reason)}


def uses_files(messages: list[dict[str, Any]]) -> bool:
    """Whether a request's messages hold a block whose source is a Files API file (at the top
    of a message's content or in a tool_result's)."""
    for message in messages:
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            inner = block.get("content") if block.get("type") == "tool_result" else None
            for item in inner if isinstance(inner, list) else (block,):
                source = item.get("source")
                if isinstance(source, dict) and source.get("type") == "file":
                    return True
    return False


def _unavailable() -> LLMError:
    return LLMError(
        "ahentic_ai_unavailable",
        "No Anthropic API key or base URL is configured.",
        retryable=False,
    )


def upload_file(name: str, data: bytes, media_type: str) -> str:
    """Upload a file to the Files API (beta ``FILES_BETA``); its ``file_id``. Raises
    ``LLMError`` (the same codes as a model call)."""
    if not llm_available():
        raise _unavailable()
    started = time.monotonic()
    try:
        uploaded = _client().beta.files.upload(file=(name, data, media_type), betas=[FILES_BETA])
    except anthropic.APIError as exc:
        raise _map_error(exc, started) from exc
    except httpx2.HTTPError as exc:
        raise _broken(exc, started) from exc
    return uploaded.id


def delete_file(file_id: str) -> None:
    """Delete an uploaded file from the Files API; a file already gone is not an error.
    Raises ``LLMError``."""
    if not llm_available():
        raise _unavailable()
    started = time.monotonic()
    try:
        _client().beta.files.delete(file_id, betas=[FILES_BETA])
    except anthropic.NotFoundError:
        return
    except anthropic.APIError as exc:
        raise _map_error(exc, started) from exc
    except httpx2.HTTPError as exc:
        raise _broken(exc, started) from exc


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def _broken(exc: Exception, started: float) -> LLMError:
    """An HTTP error of the SDK's client that escaped it (a stream or an upload cut off)."""
    return LLMError(
        "ahentic_llm_error",
        "The connection to the model broke.",
        True,
        None,
        _ms(started),
        detail=f"{exc.__class__.__name__}: {exc}",
    )


def _map_error(exc: anthropic.APIError, started: float) -> LLMError:
    duration_ms = int((time.monotonic() - started) * 1000)
    status = getattr(exc, "status_code", None)
    message = getattr(exc, "message", None) or str(exc)
    if isinstance(exc, anthropic.APITimeoutError):
        return LLMError(
            "ahentic_llm_timeout",
            "The model did not answer in time. Press Continue to try again.",
            True,
            None,
            duration_ms,
        )
    if isinstance(exc, anthropic.APIConnectionError):
        return LLMError(
            "ahentic_llm_error",
            "Could not reach the model. Press Continue to try again.",
            True,
            None,
            duration_ms,
            detail=message,
        )
    if status == 529:
        return LLMError(
            "ahentic_llm_overloaded",
            "The model is overloaded; try again shortly.",
            True,
            status,
            duration_ms,
        )
    if status == 429:
        return LLMError(
            "ahentic_llm_rate_limited",
            "The model's rate limit was hit; try again shortly.",
            True,
            status,
            duration_ms,
        )
    if status in (401, 403):
        return LLMError(
            "ahentic_llm_auth",
            "The model refused the site's credentials. Ask the site's administrator to check the "
            "API key.",
            False,
            status,
            duration_ms,
            detail=message,
        )
    return LLMError(
        "ahentic_llm_error",
        f"The model call failed (HTTP {status}). Press Continue to try again.",
        True,
        status,
        duration_ms,
        detail=message,
    )
