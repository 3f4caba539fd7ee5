"""Tests for orchestrator_app.testing.localapi, driven through the real anthropic SDK."""

from __future__ import annotations

import json
import os
import threading
import urllib.error
import urllib.request
from typing import Any

import anthropic
import pytest

from orchestrator_app.testing.localapi import (
    LocalMessagesServer,
    count_request_tokens,
    error_reply,
    reply,
    text_reply,
    tool_call,
    tool_reply,
)
from tests.support.paths import ROOT

MODEL = "claude-sonnet-4-6"
CC = {"type": "ephemeral"}
TOOLS: list[dict[str, Any]] = [
    {
        "name": "lookup",
        "description": "Look a word up in the project glossary.",
        "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}},
    }
]


@pytest.fixture(scope="module")
def server():
    with LocalMessagesServer() as srv:
        yield srv


@pytest.fixture(autouse=True)
def _reset(server: LocalMessagesServer):
    server.reset()
    yield


@pytest.fixture
def client(server: LocalMessagesServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key="test-key", base_url=server.url, max_retries=2)


def user(content: Any) -> dict[str, Any]:
    return {"role": "user", "content": content}


def assistant(content: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": content}


def tool_use(id: str, name: str = "lookup") -> dict[str, Any]:  # noqa: A002
    return {"type": "tool_use", "id": id, "name": name, "input": {"q": "x"}}


def tool_result(id: str) -> dict[str, Any]:  # noqa: A002
    return {"type": "tool_result", "tool_use_id": id, "content": "42"}


# --------------------------------------------------------------------------- basics


def test_text_reply(server: LocalMessagesServer, client: anthropic.Anthropic) -> None:
    server.enqueue(text_reply("Hello there"))
    msg = client.messages.create(model=MODEL, max_tokens=100, messages=[user("Hi")])
    assert msg.content[0].type == "text" and msg.content[0].text == "Hello there"
    assert msg.stop_reason == "end_turn" and msg.model == MODEL and msg.id.startswith("msg_")
    body = server.message_requests()[0]
    assert msg.usage.input_tokens == count_request_tokens(body) == 1 + 4
    assert msg.usage.cache_read_input_tokens == msg.usage.cache_creation_input_tokens == 0
    assert msg.usage.output_tokens == 10  # ceil(len('[{"text":"Hello there","type":"text"}]') / 4)
    entry = server.requests[0]
    assert entry["status"] == 200 and entry["headers"]["authorization"] == "Bearer test-key"


def test_default_reply_responder_and_fixed_output_tokens(
    server: LocalMessagesServer, client: anthropic.Anthropic
) -> None:
    msg = client.messages.create(model=MODEL, max_tokens=10, messages=[user("Hi")])
    assert msg.content[0].text == "Done."
    server.responder = lambda body: f"echo: {body['messages'][-1]['content']}"
    msg = client.messages.create(model=MODEL, max_tokens=10, messages=[user("ping")])
    assert msg.content[0].text == "echo: ping"
    server.enqueue(reply([{"type": "text", "text": "x"}], "max_tokens", output_tokens=10))
    msg = client.messages.create(model=MODEL, max_tokens=10, messages=[user("Hi")])
    assert msg.stop_reason == "max_tokens" and msg.usage.output_tokens == 10


def test_tool_round_trip(server: LocalMessagesServer, client: anthropic.Anthropic) -> None:
    server.enqueue(
        tool_reply(tool_call("lookup", {"q": "agent"}), text="Let me check."),
        text_reply("An agent acts."),
    )
    first = client.messages.create(
        model=MODEL, max_tokens=100, tools=TOOLS, messages=[user("What?")]
    )
    assert first.stop_reason == "tool_use"
    text, call = first.content
    assert text.type == "text" and call.type == "tool_use"
    assert call.id.startswith("toolu_") and call.name == "lookup" and call.input == {"q": "agent"}
    history = [
        user("What?"),
        assistant([block.model_dump(exclude_none=True) for block in first.content]),
        user([tool_result(call.id), {"type": "text", "text": "Thanks"}]),
    ]
    second = client.messages.create(model=MODEL, max_tokens=100, tools=TOOLS, messages=history)
    assert second.content[0].text == "An agent acts."
    assert len(server.message_requests()) == 2


def test_tool_use_of_unknown_tool_in_history_is_allowed(client: anthropic.Anthropic) -> None:
    history = [
        user("a"),
        assistant([tool_use("toolu_1", name="retired")]),
        user([tool_result("toolu_1")]),
    ]
    msg = client.messages.create(model=MODEL, max_tokens=10, tools=TOOLS, messages=history)
    assert msg.content[0].text == "Done."


# --------------------------------------------------------------------------- validation

REJECTIONS = [
    pytest.param({"messages": []}, "messages: at least one message is required", id="no-messages"),
    pytest.param(
        {"messages": [assistant("hi")]},
        'first message must use the "user" role',
        id="first-assistant",
    ),
    pytest.param(
        {"messages": [user("a"), user("b")]},
        'found multiple "user" roles in a row',
        id="no-alternation",
    ),
    pytest.param(
        {"messages": [user([])]}, "messages.0: all messages must have non-empty content", id="empty"
    ),
    pytest.param(
        {"messages": [user([{"type": "text", "text": ""}])]},
        "messages.0.content.0: text content blocks must be non-empty",
        id="empty-text",
    ),
    pytest.param(
        {"messages": [user("a"), assistant([tool_use("toolu_x")]), user("b")]},
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: "
        "toolu_x. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
        id="missing-result",
    ),
    pytest.param(
        {"messages": [user("a"), assistant("b"), user([tool_result("toolu_y")])]},
        "messages.2.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_y",
        id="unexpected-result",
    ),
    pytest.param(
        {
            "messages": [
                user("a"),
                assistant([tool_use("toolu_1")]),
                user([{"type": "text", "text": "first"}, tool_result("toolu_1")]),
            ]
        },
        "`tool_result` blocks must come before any other content",
        id="result-after-text",
    ),
    pytest.param(
        {
            "messages": [
                user("a"),
                assistant([tool_use("toolu_1")]),
                user([tool_result("toolu_1")]),
                assistant([tool_use("toolu_1")]),
                user([tool_result("toolu_1")]),
            ]
        },
        "messages.3.content.0: `tool_use` ids must be unique",
        id="duplicate-tool-id",
    ),
    pytest.param(
        {
            "tools": [{**TOOLS[0], "cache_control": CC}],
            "system": [
                {"type": "text", "text": "s1", "cache_control": CC},
                {"type": "text", "text": "s2"},
            ],
            "messages": [
                user([{"type": "text", "text": "a", "cache_control": CC}]),
                assistant([{"type": "text", "text": "b", "cache_control": CC}]),
                user([{"type": "text", "text": "c", "cache_control": CC}]),
            ],
        },
        "A maximum of 4 blocks with cache_control may be provided. Found 5.",
        id="too-many-breakpoints",
    ),
    pytest.param(
        {"tools": [{**TOOLS[0], "name": "bad name!"}], "messages": [user("a")]},
        "tools.0.name: String should match pattern '^[a-zA-Z0-9_-]{1,64}$'",
        id="bad-tool-name",
    ),
]


@pytest.mark.parametrize(("kwargs", "expected"), REJECTIONS)
def test_invalid_requests_are_rejected(
    server: LocalMessagesServer, client: anthropic.Anthropic, kwargs: dict[str, Any], expected: str
) -> None:
    server.enqueue(text_reply("must not be consumed"))
    with pytest.raises(anthropic.BadRequestError) as info:
        client.messages.create(model=MODEL, max_tokens=10, **kwargs)
    err = info.value
    assert err.status_code == 400 and err.type == "invalid_request_error"
    assert expected in (err.api_message or "")
    assert err.request_id and err.request_id.startswith("req_")
    assert err.body["type"] == "error" and err.body["request_id"] == err.request_id
    assert [e["status"] for e in server.requests] == [400]  # 400 is never retried
    assert server.message_requests() == []
    ok = client.messages.create(model=MODEL, max_tokens=10, messages=[user("a")])
    assert ok.content[0].text == "must not be consumed"


def test_missing_required_fields(client: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.BadRequestError, match="max_tokens: Field required"):
        client.post("/v1/messages", cast_to=object, body={"model": MODEL, "messages": [user("a")]})
    with pytest.raises(anthropic.BadRequestError, match="model: Field required"):
        client.post("/v1/messages", cast_to=object, body={"max_tokens": 5, "messages": [user("a")]})


def test_unknown_path_is_404(server: LocalMessagesServer) -> None:
    request = urllib.request.Request(f"{server.url}/v1/nope", data=b"{}", method="POST")
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request, timeout=5)
    body = json.loads(info.value.read())
    assert info.value.code == 404 and body["error"]["type"] == "not_found_error"
    assert info.value.headers["request-id"] == body["request_id"]


def test_api_key_is_enforced() -> None:
    with LocalMessagesServer(api_key="secret") as srv:
        bad = anthropic.Anthropic(api_key="wrong", base_url=srv.url, max_retries=2)
        with pytest.raises(anthropic.AuthenticationError) as info:
            bad.messages.create(model=MODEL, max_tokens=5, messages=[user("a")])
        assert info.value.status_code == 401 and info.value.type == "authentication_error"
        good = anthropic.Anthropic(api_key="secret", base_url=srv.url, max_retries=2)
        assert good.messages.create(model=MODEL, max_tokens=5, messages=[user("a")]).content
        headers = {"x-api-key": "secret", "content-type": "application/json"}
        body = json.dumps({"model": MODEL, "messages": [user("a")]}).encode()
        request = urllib.request.Request(
            f"{srv.url}/v1/messages/count_tokens", data=body, headers=headers, method="POST"
        )
        with urllib.request.urlopen(request, timeout=5) as response:
            assert json.loads(response.read()) == {"input_tokens": 5}
        assert [e["status"] for e in srv.requests] == [401, 200, 200]


# --------------------------------------------------------------------------- scripted errors


def test_overloaded_twice_then_success(
    server: LocalMessagesServer, client: anthropic.Anthropic
) -> None:
    server.enqueue(
        error_reply(529, "overloaded_error", "Overloaded", retry_after_ms=10),
        error_reply(529, "overloaded_error", "Overloaded", retry_after_ms=10),
        text_reply("finally"),
    )
    msg = client.messages.create(model=MODEL, max_tokens=10, messages=[user("a")])
    assert msg.content[0].text == "finally"
    assert [e["status"] for e in server.requests] == [529, 529, 200]
    assert server.requests[0]["response"]["error"]["type"] == "overloaded_error"


def test_overloaded_exhausts_retries(
    server: LocalMessagesServer, client: anthropic.Anthropic
) -> None:
    server.enqueue(*[error_reply(529, "overloaded_error", "Overloaded", retry_after_ms=10)] * 3)
    with pytest.raises(anthropic.OverloadedError) as info:
        client.messages.create(model=MODEL, max_tokens=10, messages=[user("a")])
    assert isinstance(info.value, anthropic.InternalServerError)
    assert info.value.status_code == 529 and info.value.type == "overloaded_error"
    assert len(server.requests) == 3


def test_rate_limit_and_server_error(
    server: LocalMessagesServer, client: anthropic.Anthropic
) -> None:
    server.enqueue(*[error_reply(429, "rate_limit_error", "Slow down", retry_after_ms=10)] * 3)
    with pytest.raises(anthropic.RateLimitError) as info:
        client.messages.create(model=MODEL, max_tokens=10, messages=[user("a")])
    assert info.value.api_message == "Slow down"
    assert server.requests[0]["response"]["error"]["type"] == "rate_limit_error"
    assert len(server.requests) == 3
    server.reset()
    server.enqueue(*[error_reply(500, "api_error", retry_after=0.01)] * 3)
    with pytest.raises(anthropic.InternalServerError) as info500:
        client.messages.create(model=MODEL, max_tokens=10, messages=[user("a")])
    assert info500.value.status_code == 500 and len(server.requests) == 3


# --------------------------------------------------------------------------- streaming


def test_streaming_matches_non_streaming(
    server: LocalMessagesServer, client: anthropic.Anthropic
) -> None:
    def script() -> None:
        server.enqueue(
            tool_reply(
                tool_call("lookup", {"q": "a longer query", "n": [1, 2]}, id="toolu_s"),
                text="I will look that up for you, one moment please.",
            )
        )

    request = {
        "model": MODEL,
        "max_tokens": 100,
        "tools": TOOLS,
        "messages": [user("Define agent")],
    }
    script()
    plain = client.messages.create(**request)
    script()
    with client.messages.stream(**request) as stream:
        streamed = stream.get_final_message()
    keys = ("type", "role", "model", "content", "stop_reason", "stop_sequence", "usage")
    assert {k: plain.to_dict()[k] for k in keys} == {k: streamed.to_dict()[k] for k in keys}

    script()
    events = list(client.messages.create(stream=True, **request))
    kinds = [e.type for e in events]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    assert kinds.count("content_block_start") == kinds.count("content_block_stop") == 2
    deltas = [e.delta for e in events if e.type == "content_block_delta"]
    assert sum(d.type == "text_delta" for d in deltas) >= 2
    partial = "".join(d.partial_json for d in deltas if d.type == "input_json_delta")
    assert json.loads(partial) == {"q": "a longer query", "n": [1, 2]}
    assert events[0].message.usage.output_tokens == 1
    assert events[-2].usage.output_tokens == plain.usage.output_tokens


# --------------------------------------------------------------------------- token and cache accounting


def test_cache_accounting(server: LocalMessagesServer, client: anthropic.Anthropic) -> None:
    tools = [{**TOOLS[0], "cache_control": CC}]
    system = [{"type": "text", "text": "You are a careful assistant. " * 20, "cache_control": CC}]

    def cached_last(text: str) -> dict[str, Any]:
        return user([{"type": "text", "text": text, "cache_control": CC}])

    first_messages = [cached_last("Tell me about agents. " * 10)]
    first = client.messages.create(
        model=MODEL, max_tokens=50, tools=tools, system=system, messages=first_messages
    )
    total1 = count_request_tokens(server.message_requests()[0])
    assert first.usage.cache_read_input_tokens == 0
    assert first.usage.cache_creation_input_tokens == total1  # the breakpoint ends the prompt
    assert first.usage.input_tokens == 0

    second_messages = [
        user("Tell me about agents. " * 10),
        assistant("Done."),
        cached_last("And tools?"),
    ]
    second = client.messages.create(
        model=MODEL, max_tokens=50, tools=tools, system=system, messages=second_messages
    )
    usage = second.usage
    total2 = count_request_tokens(server.message_requests()[1])
    # Look-back: the first request's whole prompt is a prefix of this one and is read back,
    # although this request has no breakpoint exactly at its end.
    assert usage.cache_read_input_tokens == total1 > 0
    assert usage.cache_creation_input_tokens == total2 - total1
    assert (
        usage.cache_read_input_tokens + usage.cache_creation_input_tokens + usage.input_tokens
        == total2
    )

    again = client.messages.create(
        model=MODEL, max_tokens=50, tools=tools, system=system, messages=second_messages
    )
    assert again.usage.cache_read_input_tokens == total2
    assert again.usage.cache_creation_input_tokens == again.usage.input_tokens == 0


def test_failed_requests_do_not_populate_the_cache(
    server: LocalMessagesServer, client: anthropic.Anthropic
) -> None:
    messages = [user([{"type": "text", "text": "hello", "cache_control": CC}])]
    server.enqueue(*[error_reply(529, retry_after_ms=10)] * 3)
    with pytest.raises(anthropic.OverloadedError):
        client.messages.create(model=MODEL, max_tokens=5, messages=messages)
    ok = client.messages.create(model=MODEL, max_tokens=5, messages=messages)
    assert ok.usage.cache_read_input_tokens == 0 and ok.usage.cache_creation_input_tokens == 6


def test_min_cacheable_tokens() -> None:
    with LocalMessagesServer(min_cacheable_tokens=1000) as srv:
        client = anthropic.Anthropic(api_key="k", base_url=srv.url)
        messages = [user([{"type": "text", "text": "short", "cache_control": CC}])]
        msg = client.messages.create(model=MODEL, max_tokens=5, messages=messages)
        assert msg.usage.cache_creation_input_tokens == 0 and msg.usage.input_tokens == 6


def test_count_tokens_matches_uncached_total(
    server: LocalMessagesServer, client: anthropic.Anthropic
) -> None:
    request: dict[str, Any] = {
        "model": MODEL,
        "tools": TOOLS,
        "system": "Be brief.",
        "messages": [
            user("Look up 'agent'."),
            assistant([{"type": "text", "text": "Sure."}, tool_use("toolu_c")]),
            user([tool_result("toolu_c")]),
        ],
    }
    counted = client.messages.count_tokens(**request)
    msg = client.messages.create(max_tokens=20, **request)
    assert counted.input_tokens == msg.usage.input_tokens == count_request_tokens(request)
    assert len(server.message_requests()) == 1  # count_tokens consumed nothing
    tool_json = json.dumps(TOOLS[0], sort_keys=True, separators=(",", ":"))
    expected = (
        -(-len(tool_json) // 4)  # tool definition
        + 3  # "Be brief." (9 bytes)
        + (4 + 4)  # "Look up 'agent'." (16 bytes) + role overhead
        + (2 + 4)  # "Sure." (5 bytes) + role overhead
        + 9  # tool_use as {"input":{"q":"x"},"name":"lookup"} (35 bytes)
        + (1 + 4)  # tool_result "42" + overhead
    )
    assert counted.input_tokens == expected


# --------------------------------------------------------------------------- in-flight calls


def test_gate_holds_a_call_in_flight(
    server: LocalMessagesServer, client: anthropic.Anthropic
) -> None:
    gate = threading.Event()
    server.enqueue(text_reply("released", gate=gate))
    result: dict[str, Any] = {}

    def call() -> None:
        result["msg"] = client.messages.create(model=MODEL, max_tokens=5, messages=[user("a")])

    worker = threading.Thread(target=call)
    worker.start()
    assert server.wait_for_requests(1)
    worker.join(0.2)
    assert worker.is_alive() and "msg" not in result
    assert server.requests[0]["status"] is None  # seen, not yet answered
    gate.set()
    worker.join(5)
    assert not worker.is_alive() and result["msg"].content[0].text == "released"
    assert server.requests[0]["status"] == 200


def test_gate_on_a_stream_sends_deltas_after_release(
    server: LocalMessagesServer, client: anthropic.Anthropic
) -> None:
    gate = threading.Event()
    server.enqueue(text_reply("streamed text", gate=gate, chunk_delay_s=0.001))
    with client.messages.stream(model=MODEL, max_tokens=5, messages=[user("a")]) as stream:
        events = iter(stream)
        assert next(events).type == "message_start"  # sent before the gate opens
        gate.set()
        assert stream.get_final_text() == "streamed text"


def test_look_back_reaches_only_20_pieces_before_a_breakpoint(
    server: LocalMessagesServer, client: anthropic.Anthropic
) -> None:
    first = [user([{"type": "text", "text": "start", "cache_control": CC}])]
    client.messages.create(model=MODEL, max_tokens=50, messages=first)
    history: list[dict[str, Any]] = [user("start")]
    for turn in range(11):  # 22 more pieces: the first prompt is out of look-back reach
        history += [assistant(f"reply {turn}"), user(f"question {turn}")]
    history[-1] = user([{"type": "text", "text": "question 10", "cache_control": CC}])
    far = client.messages.create(model=MODEL, max_tokens=50, messages=history)
    assert far.usage.cache_read_input_tokens == 0


def test_the_management_command_serves_the_offline_model_until_sigterm(tmp_path):
    """``manage.py ahentic_localapi --offline``: a host site's stand-in for the API. Started
    as the install docs say (no API key, no base URL yet), it prints no warning that the
    agent cannot answer, and its banner says what the docs do: the base URL, no key."""
    import signal
    import socket
    import subprocess
    import sys
    import urllib.request

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    root = ROOT
    server = subprocess.Popen(
        [sys.executable, "manage.py", "ahentic_localapi", "--offline", "--port", str(port)],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={
            key: value
            for key, value in os.environ.items()
            if key not in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")
        },
    )
    try:
        banner = server.stdout.readline()
        assert f"http://127.0.0.1:{port}" in banner and "offline demo model" in banner
        assert f"ANTHROPIC_BASE_URL=http://127.0.0.1:{port}" in banner
        assert "no API key is needed" in banner
        body = {
            "model": "claude-sonnet-5-5",
            "max_tokens": 100,
            "messages": [{"role": "user", "content": "Hello there"}],
        }
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/v1/messages",
            data=json.dumps(body).encode(),
            headers={"content-type": "application/json", "x-api-key": "any"},
        )
        # Generous bounds, not timings: a CI machine running several legs at once is slow.
        with urllib.request.urlopen(request, timeout=60) as response:
            reply = json.loads(response.read())
        assert reply["type"] == "message" and reply["content"][0]["type"] == "text"
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            returncode = server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
            raise
    assert returncode == 0, "the server did not exit cleanly on SIGTERM"
    warnings = server.stderr.read()
    assert "W001" not in warnings and "System check" not in warnings, warnings
