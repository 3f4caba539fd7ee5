"""Fuzz the site's MCP endpoint (JSON-RPC, which schemathesis cannot describe) on a live server.

Sends a seeded stream of malformed and odd requests: bytes that are not JSON or not UTF-8,
JSON of every type, JSON-RPC messages with unknown methods, ids and params of the wrong types,
``tools/call`` with unknown tools and random arguments, batches, deep nesting, bodies over the
size limit, wrong content types, protocol versions and tokens, other HTTP methods, and
2026-07-28 requests with the per-request envelope and headers, answers to approval questions
(``inputResponses``, ``requestState``) among them. Fails on any
5xx, on a status outside what the endpoint documents, on an error body that is not JSON, and
when the server stops answering a plain ``ping``.

    python .ci/fuzz_mcp.py --url http://127.0.0.1:8614/ahentic/v1/mcp --token ahmcp_... \\
        --seed 14 --cases 400
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import socket
import sys
import time
from urllib.parse import urlsplit

ALLOWED = {200, 202, 400, 401, 403, 404, 405, 413, 415}
METHODS = [
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "notifications/initialized",
    "notifications/cancelled",
    "resources/list",
    "prompts/get",
    "server/discover",
    "",
    "tools/",
    "x" * 300,
    "\u00e9\u4e2d",
]
VERSIONS = ["2025-06-18", "2025-03-26", "2025-11-25", "2024-11-05", "2026-07-28", "nope", ""]


class Fuzzer:
    def __init__(self, url: str, token: str, seed: int):
        parts = urlsplit(url)
        self.host, self.port, self.path = parts.hostname, parts.port or 80, parts.path
        self.token = token
        self.rng = random.Random(seed)
        self.tools: list[str] = []
        self.failures: list[str] = []
        self.sent = 0

    # --- transport --------------------------------------------------------------------------

    def send(self, body: bytes, *, method="POST", headers=None, label="") -> tuple[int, bytes]:
        connection = http.client.HTTPConnection(self.host, self.port, timeout=60)
        sent_headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "Authorization": f"Bearer {self.token}",
            "MCP-Protocol-Version": "2025-06-18",
        }
        sent_headers.update(headers or {})
        sent_headers = {k: v for k, v in sent_headers.items() if v is not None}
        try:
            connection.request(method, self.path, body=body, headers=sent_headers)
            response = connection.getresponse()
            status, data = response.status, response.read()
            content_type = response.getheader("Content-Type") or ""
        except (OSError, http.client.HTTPException) as exc:
            self.failures.append(f"{label}: no answer ({exc.__class__.__name__}: {exc})")
            return 0, b""
        finally:
            connection.close()
        self.sent += 1
        if status >= 500 or status not in ALLOWED:
            self.failures.append(f"{label}: status {status}: {data[:300]!r} for {body[:200]!r}")
        elif status not in (202,) and data:
            if "application/json" not in content_type:
                self.failures.append(f"{label}: {status} with {content_type!r}")
            else:
                try:
                    json.loads(data)
                except ValueError:
                    self.failures.append(f"{label}: {status} body is not JSON: {data[:200]!r}")
        return status, data

    def post(self, message, label: str, **kwargs) -> tuple[int, bytes]:
        body = message if isinstance(message, bytes) else json.dumps(message).encode()
        return self.send(body, label=label, **kwargs)

    # --- values -------------------------------------------------------------------------------

    def value(self, depth: int = 0):
        kinds = ["int", "float", "str", "bool", "null", "list", "dict", "big"]
        if depth > 3:
            kinds = kinds[:5]
        kind = self.rng.choice(kinds)
        if kind == "int":
            return self.rng.randint(-(2**31), 2**31)
        if kind == "big":
            return self.rng.choice([2**70, -(2**64), 1e308, -0.0])
        if kind == "float":
            return self.rng.uniform(-1e6, 1e6)
        if kind == "str":
            alphabet = "abc xyz_-/\\\"'{}[]<>\u00e9\u4e2d\U0001f600\t\n"
            return "".join(self.rng.choice(alphabet) for _ in range(self.rng.randint(0, 40)))
        if kind == "bool":
            return self.rng.choice([True, False])
        if kind == "null":
            return None
        if kind == "list":
            return [self.value(depth + 1) for _ in range(self.rng.randint(0, 4))]
        return {str(self.value(4)): self.value(depth + 1) for _ in range(self.rng.randint(0, 4))}

    def message(self) -> dict:
        message: dict = {}
        if self.rng.random() < 0.9:
            message["jsonrpc"] = self.rng.choice(["2.0", "2.0", "2.0", "1.0", 2, None])
        if self.rng.random() < 0.85:
            message["id"] = self.rng.choice([1, "a", None, 1.5, [], {}, True, 2**70, self.value()])
        if self.rng.random() < 0.95:
            method = self.rng.choice(METHODS + [self.value()])
            message["method"] = method
        if self.rng.random() < 0.8:
            if message.get("method") == "tools/call" and self.rng.random() < 0.8:
                name = self.rng.choice(self.tools + ["no_such_tool", "", self.value()])
                params = {"name": name}
                if self.rng.random() < 0.9:
                    params["arguments"] = self.rng.choice([self.value(), {"text": self.value()}])
                message["params"] = params
            elif message.get("method") == "initialize" and self.rng.random() < 0.7:
                message["params"] = {
                    "protocolVersion": self.rng.choice(VERSIONS + [self.value()]),
                    "capabilities": self.rng.choice([{}, self.value()]),
                    "clientInfo": self.rng.choice([{"name": "f", "version": "1"}, self.value()]),
                }
            else:
                message["params"] = self.value()
        if self.rng.random() < 0.05:
            message["result"] = self.value()
        return message

    def modern(self) -> tuple[dict, dict]:
        """A 2026-07-28 request: the envelope in ``params._meta`` and the headers matching it
        (most of the time), ``tools/call`` with answers to an approval question or junk."""
        method = self.rng.choice(["server/discover", "tools/list", "tools/call", "initialize"])
        capabilities = self.rng.choice([{}, {"elicitation": {}}, {"elicitation": {"url": {}}}])
        meta = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": capabilities,
        }
        params: dict = {"_meta": meta if self.rng.random() < 0.9 else self.value()}
        headers = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method}
        if method == "tools/call":
            name = self.rng.choice(self.tools + ["no_such_tool"])
            params["name"] = name
            params["arguments"] = self.rng.choice([{}, {"text": self.value()}, self.value()])
            headers["Mcp-Name"] = name
            if self.rng.random() < 0.6:
                answer = self.rng.choice(
                    [
                        {"action": "accept", "content": {"decision": "allow_once"}},
                        {"action": "accept", "content": {"decision": self.value()}},
                        {"action": self.rng.choice(["decline", "cancel", "maybe"])},
                        self.value(),
                    ]
                )
                params["inputResponses"] = self.rng.choice([{"approval": answer}, self.value()])
                params["requestState"] = self.rng.choice(["x", "a:b:c", self.value()])
        if self.rng.random() < 0.15:
            headers["Mcp-Method"] = self.rng.choice([m for m in METHODS if m.isascii()])
        message = {"jsonrpc": "2.0", "id": self.rng.choice([1, "m"]), "method": method}
        message["params"] = params
        return message, headers

    # --- cases --------------------------------------------------------------------------------

    def wait_for_server(self, seconds: float = 60) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                socket.create_connection((self.host, self.port), timeout=2).close()
                return
            except OSError:
                time.sleep(0.5)

    def discover(self) -> None:
        status, data = self.post({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, "tools/list")
        if status == 200:
            self.tools = [tool["name"] for tool in json.loads(data)["result"]["tools"]]

    def case(self, number: int) -> None:
        kind = self.rng.choice(
            ["message"] * 6
            + ["modern"] * 2
            + ["batch", "raw", "json", "headers", "http", "deep", "huge"]
        )
        label = f"case {number} ({kind})"
        if kind == "message":
            self.post(self.message(), label)
        elif kind == "modern":
            message, headers = self.modern()
            self.post(message, label, headers=headers)
        elif kind == "batch":
            size = self.rng.choice([0, 1, 2, 5, 21, 30])
            self.post([self.message() for _ in range(size)], label)
        elif kind == "raw":
            raw = self.rng.choice(
                [
                    b"",
                    b"{",
                    b'{"jsonrpc": "2.0", "id": 1, "method": "ping"',
                    b"\xff\xfe\x00",
                    b'{"a": "\\ud800"}',
                    b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": "\\u0000"}}',
                    b"null",
                    b"NaN",
                    b'"\xc3\x28"',
                    bytes(self.rng.randrange(256) for _ in range(self.rng.randint(1, 200))),
                ]
            )
            self.post(raw, label)
        elif kind == "json":
            self.post(self.value(), label)
        elif kind == "headers":
            headers = self.rng.choice(
                [
                    {"Authorization": None},
                    {"Authorization": "Bearer ahmcp_nope"},
                    {"Authorization": "Basic Zm9vOmJhcg=="},
                    {"Authorization": "Bearer " + "x" * 5000},
                    {"Content-Type": "text/plain"},
                    {"Content-Type": None},
                    {"MCP-Protocol-Version": self.rng.choice(VERSIONS)},
                    {"Origin": "https://evil.example"},
                    {"Content-Length": "-1"},
                ]
            )
            self.post(self.message(), label, headers=headers)
        elif kind == "http":
            method = self.rng.choice(["GET", "DELETE", "PUT", "PATCH", "OPTIONS", "HEAD"])
            self.send(b"", method=method, label=label)
        elif kind == "deep":
            depth = self.rng.choice([33, 200, 5000])
            self.post(
                ("[" * depth + "]" * depth).encode()
                if self.rng.random() < 0.5
                else (
                    '{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": '
                    + '{"a":' * depth
                    + "1"
                    + "}" * depth
                    + "}"
                ).encode(),
                label,
            )
        else:
            size = self.rng.choice([2 * 1024 * 1024 + 1, 3 * 1024 * 1024])
            self.post(
                {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": "a" * size}}, label
            )

    def alive(self) -> bool:
        status, data = self.post({"jsonrpc": "2.0", "id": 99, "method": "ping"}, "final ping")
        return status == 200 and json.loads(data).get("result") == {}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--cases", type=int, default=400)
    args = parser.parse_args()
    fuzzer = Fuzzer(args.url, args.token, args.seed)
    fuzzer.wait_for_server()
    fuzzer.discover()
    for number in range(args.cases):
        fuzzer.case(number)
        if len(fuzzer.failures) >= 50:
            break
    alive = fuzzer.alive()
    print(f"MCP fuzz: {fuzzer.sent} requests, seed {args.seed}, {len(fuzzer.tools)} tools")
    for failure in fuzzer.failures[:50]:
        print("FAIL", failure, file=sys.stderr)
    if not alive:
        print("FAIL the server no longer answers a ping", file=sys.stderr)
    return 1 if fuzzer.failures or not alive else 0


if __name__ == "__main__":
    sys.exit(main())
