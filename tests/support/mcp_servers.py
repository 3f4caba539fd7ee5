"""A real MCP server for the tests (the ``mcp`` SDK's ``MCPServer`` over Streamable HTTP, served
by uvicorn on a free local port in a thread), with switches, and a tiny OAuth authorization
server on the same origin (metadata, registration, authorize, token with refresh).

``TicketServer.state`` is what a test sets and reads: the calls the tools received, whether
POSTs answer HTTP 500 (``http_error``), whether a call hangs (``hang_s``), whether the list
comes reversed (``reverse``), the bearer tokens accepted (``tokens``; empty: none needed).
"""

import asyncio
import base64
import hashlib
import json
import secrets
import socket
import threading
import time
from typing import Any
from urllib.parse import parse_qs, urlencode

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import (
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
    ToolAnnotations,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route


def chart_png() -> str:
    """A small real PNG (base64), as a chart a server would send."""
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (8, 6), (200, 30, 30)).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def bound_socket() -> socket.socket:
    """A socket bound to a free port of 127.0.0.1, handed to the server as it is: a port probed
    free and bound later could be taken in between (by another pytest-xdist worker)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    return sock


class ReorderingServer(MCPServer):
    """Lists its tools in reverse when the state says so (a server that reorders its list)."""

    def __init__(self, state: dict[str, Any]):
        super().__init__("tickets")
        self.state = state

    async def list_tools(self):
        tools = await super().list_tools()
        if not self.state["extras"]:
            tools = [t for t in tools if t.name not in EXTRAS]
        return list(reversed(tools)) if self.state["reverse"] else tools


# Listed only when the state's ``extras`` is set: a tool with a huge result, one with a name no
# column holds.
LONG_NAME = "find_" + "tickets_by_a_very_long_name_" * 10 + "x" * 15
EXTRAS = ("huge_result", LONG_NAME)


def fresh_state() -> dict[str, Any]:
    return {
        "calls": [],
        "http_error": False,
        "garbage": False,
        "hang_s": 0,
        "reverse": False,
        "extras": False,
        "tokens": set(),
        "auth_seen": [],
        # OAuth: codes issued at /authorize, refresh tokens the token endpoint accepts.
        "codes": {},
        "refresh_tokens": set(),
        "refreshes": 0,
        "clients": {},
    }


def build_app(state: dict[str, Any]):
    server = ReorderingServer(state)

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    async def list_tickets(status: str = "open") -> str:
        """List the tickets with a status."""
        state["calls"].append(("list_tickets", {"status": status}))
        if state["hang_s"]:
            await asyncio.sleep(state["hang_s"])
        return f"#1 Printer on fire ({status})\n#2 Coffee machine empty ({status})"

    @server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False))
    async def create_ticket(title: str, body: str = "") -> str:
        """Create a ticket."""
        state["calls"].append(("create_ticket", {"title": title, "body": body}))
        if title == "fail":
            raise ToolError("Titles may not be 'fail'.")
        return f"Created ticket #3: {title}"

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    async def ticket_report() -> list:
        """A report: text, a chart, a link to a ticket and the notes as a resource."""
        state["calls"].append(("ticket_report", {}))
        return [
            TextContent(type="text", text="Two open tickets."),
            ImageContent(type="image", data=chart_png(), mime_type="image/png"),
            ResourceLink(type="resource_link", uri="https://tickets.example/1", name="Ticket 1"),
            EmbeddedResource(
                type="resource",
                resource=TextResourceContents(
                    uri="file:///notes.txt", text="Call the plumber.", mime_type="text/plain"
                ),
            ),
        ]

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    async def ticket_stats() -> CallToolResult:
        """Counts by status, as structured content only."""
        state["calls"].append(("ticket_stats", {}))
        return CallToolResult(content=[], structured_content={"open": 2, "closed": 1})

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    async def huge_result(chars: int = 5_000_000) -> str:
        """A result of ``chars`` characters."""
        state["calls"].append(("huge_result", {"chars": chars}))
        return ("0123456789" * (chars // 10 + 1))[:chars]

    @server.tool(name=LONG_NAME, annotations=ToolAnnotations(readOnlyHint=True))
    async def long_named(status: str = "open") -> str:
        """A tool whose name is 300 characters long."""
        state["calls"].append((LONG_NAME, {"status": status}))
        return f"#1 found by the long name ({status})"

    mcp_app = server.streamable_http_app()

    def metadata_resource(request: Request):
        base = str(request.base_url).rstrip("/")
        return JSONResponse(
            {"resource": f"{base}/mcp", "authorization_servers": [base], "scopes_supported": []}
        )

    def metadata_server(request: Request):
        base = str(request.base_url).rstrip("/")
        return JSONResponse(
            {
                "issuer": base,
                "authorization_endpoint": f"{base}/authorize",
                "token_endpoint": f"{base}/token",
                "registration_endpoint": f"{base}/register",
                "code_challenge_methods_supported": ["S256"],
            }
        )

    async def register(request: Request):
        body = await request.json()
        client_id = "client-" + secrets.token_hex(4)
        state["clients"][client_id] = body["redirect_uris"]
        return JSONResponse({"client_id": client_id, **body}, status_code=201)

    def authorize(request: Request):
        q = request.query_params
        if q.get("redirect_uri") not in state["clients"].get(q.get("client_id"), []):
            return Response("unknown client", status_code=400)
        code = secrets.token_hex(8)
        state["codes"][code] = q["code_challenge"]
        target = q["redirect_uri"] + "?" + urlencode({"code": code, "state": q["state"]})
        return RedirectResponse(target, status_code=302)

    def issue() -> dict[str, Any]:
        access, refresh = "at-" + secrets.token_hex(12), "rt-" + secrets.token_hex(12)
        state["tokens"].add(access)
        state["refresh_tokens"].add(refresh)
        return {"access_token": access, "refresh_token": refresh, "expires_in": 3600}

    async def token(request: Request):
        form = {k: v[0] for k, v in parse_qs((await request.body()).decode()).items()}
        if form.get("grant_type") == "refresh_token":
            if form.get("refresh_token") not in state["refresh_tokens"]:
                return JSONResponse({"error": "invalid_grant"}, status_code=400)
            state["refresh_tokens"].discard(form["refresh_token"])
            state["refreshes"] += 1
            return JSONResponse(issue())
        challenge = state["codes"].pop(form.get("code"), None)
        digest = hashlib.sha256(form.get("code_verifier", "").encode()).digest()
        if challenge is None or base64.urlsafe_b64encode(digest).rstrip(b"=").decode() != challenge:
            return JSONResponse({"error": "invalid_grant"}, status_code=400)
        return JSONResponse(issue())

    oauth_app = Starlette(
        routes=[
            Route("/.well-known/oauth-protected-resource/mcp", metadata_resource),
            Route("/.well-known/oauth-authorization-server", metadata_server),
            Route("/register", register, methods=["POST"]),
            Route("/authorize", authorize),
            Route("/token", token, methods=["POST"]),
        ]
    )

    async def answer_garbage(scope, receive, send):
        """Answer a tools/call with a result that is not an MCP result; any other message
        goes on (the returned ``receive`` replays its body), None when answered."""
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        try:
            request = json.loads(body)
        except ValueError:
            request = {}
        if isinstance(request, dict) and request.get("method") == "tools/call":
            state["calls"].append(("garbage", {}))
            answer = {"jsonrpc": "2.0", "id": request.get("id"), "result": {"content": "nope"}}
            await JSONResponse(answer)(scope, receive, send)
            return None
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return replay

    async def app(scope, receive, send):
        if scope["type"] == "http" and scope["path"].startswith("/mcp"):
            headers = dict(scope["headers"])
            sent = headers.get(b"authorization", b"").decode()
            state["auth_seen"].append(sent)
            if state["http_error"] and scope["method"] == "POST":
                await Response("boom", status_code=500)(scope, receive, send)
                return
            if state["garbage"] and scope["method"] == "POST":
                receive = await answer_garbage(scope, receive, send)
                if receive is None:
                    return
            if state["tokens"] and sent.removeprefix("Bearer ") not in state["tokens"]:
                await Response(
                    status_code=401,
                    headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
                )(scope, receive, send)
                return
            await mcp_app(scope, receive, send)
        elif scope["type"] == "http":
            await oauth_app(scope, receive, send)
        else:
            await mcp_app(scope, receive, send)

    return app


class TicketServer:
    """The server running in a thread until ``stop`` (``app``: another ASGI app to serve)."""

    def __init__(self, app=None):
        self.state = fresh_state()
        sock = bound_socket()
        self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        config = uvicorn.Config(
            app or build_app(self.state),
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
            lifespan="on",
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [sock]}, daemon=True
        )
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("The test MCP server did not start.")
            time.sleep(0.02)

    def reset(self) -> None:
        self.state.clear()
        self.state.update(fresh_state())

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
