"""The MCP client seam: the one module that imports the ``mcp`` SDK.

Every request goes through the outbound-address policy (``orchestrator_app/outbound.py``):
the server's host is resolved and checked before the exchange, and every request of the
exchange goes to that checked address (``MCP_ALLOW_INSECURE_LOCAL`` also allows local
addresses, as ``OUTBOUND_ALLOW_PRIVATE`` does).

Two synchronous calls over Streamable HTTP, each its own connection run with ``asyncio.run``
(a worker step is synchronous and short-lived, so nothing is kept between calls):
``list_tools`` (``tools/list``, every page) and ``call_tool`` (``tools/call``). Both take the
bearer token to send, if any, and a timeout for the whole exchange. Every failure is an
``McpFailure`` with a stable code; the SDK's own exceptions never leave this module.

The token goes only into the ``Authorization`` header: never into a message, a log line or
an exception text.
"""

from __future__ import annotations

import asyncio
import ipaddress
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from sessions_app.conf import ahentic_settings

from .. import outbound, telemetry

UNAVAILABLE = "ahentic_mcp_unavailable"
TIMEOUT = "ahentic_mcp_timeout"
BAD_RESULT = "ahentic_mcp_bad_result"
AUTH_REQUIRED = "ahentic_mcp_auth_required"
INSECURE_URL = "ahentic_mcp_insecure_url"
# A server that never stops paginating cannot hold a step.
MAX_PAGES = 50
LOCAL_NAMES = ("localhost",)
# The MCP client's own setting that also allows non-public addresses (local development).
SETTING = "MCP_ALLOW_INSECURE_LOCAL"


class McpFailure(Exception):
    """A call that did not give a result: ``code`` is one of the constants above."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


def rule() -> outbound.Policy:
    """The outbound-address policy of the MCP client and its OAuth requests."""
    return outbound.policy(SETTING)


def url_problem(url: str) -> str | None:
    """Why the client refuses ``url``, or None: its scheme (``scheme_problem``), or a host
    that is ``localhost`` or a non-public address literal the outbound-address policy refuses
    (a name is checked when it is resolved, before each exchange)."""
    problem = scheme_problem(url)
    if problem:
        return problem
    if urlsplit(url).scheme == "https":
        return outbound.host_problem((urlsplit(url).hostname or "").lower(), rule())
    return None


def scheme_problem(url: str) -> str | None:
    """https always; http only with ``MCP_ALLOW_INSECURE_LOCAL`` and a host that is
    ``localhost`` or a loopback or private IP literal (a DNS name could resolve anywhere, so
    none is trusted)."""
    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
    except ValueError:
        return "The URL cannot be parsed."
    if not host:
        return "The URL has no host."
    if parts.scheme == "https":
        return None
    if parts.scheme != "http":
        return "The URL must start with https://."
    if not ahentic_settings.MCP_ALLOW_INSECURE_LOCAL:
        return "The URL must use https:// (http:// only for local development addresses)."
    if host in LOCAL_NAMES:
        return None
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return "http:// is allowed only for localhost or a loopback or private IP address."
    if address.is_loopback or address.is_private:
        return None
    return "http:// is allowed only for localhost or a loopback or private IP address."


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _failure(exc: BaseException, statuses: list[int], timeout: float) -> McpFailure:
    """The stable failure for what the SDK raised; ``statuses`` are the HTTP statuses the
    exchange received (the SDK folds a 401 into a generic JSON-RPC error)."""
    if any(status in (401, 403) for status in statuses):
        return McpFailure(AUTH_REQUIRED, "The server refused the credentials (HTTP 401/403).")
    leaves = _leaves(exc)
    for leaf in leaves:
        if isinstance(leaf, outbound.OutboundError):  # a request the policy refused
            return _outbound_failure(leaf)
    if any(isinstance(leaf, TimeoutError | httpx2.TimeoutException) for leaf in leaves):
        return McpFailure(TIMEOUT, f"The server did not answer within {timeout:g} s.")
    if any(isinstance(leaf, ValidationError) for leaf in leaves):
        return McpFailure(BAD_RESULT, "The server's answer is not a valid MCP result.")
    http = [status for status in statuses if status >= 400]
    if http:
        return McpFailure(UNAVAILABLE, f"The server answered HTTP {http[-1]}.")
    for leaf in leaves:
        if isinstance(leaf, MCPError):
            return McpFailure(UNAVAILABLE, f"The server answered an error: {leaf}"[:300])
        if isinstance(leaf, httpx2.HTTPError):
            return McpFailure(UNAVAILABLE, f"The server cannot be reached ({type(leaf).__name__}).")
    return McpFailure(UNAVAILABLE, f"The call failed ({type(leaves[0]).__name__}).")


def _outbound_failure(exc: outbound.OutboundError) -> McpFailure:
    if exc.code == outbound.REFUSED:
        return McpFailure(exc.code, exc.message)
    return McpFailure(UNAVAILABLE, f"The server cannot be reached: {exc.message}")


def _run(
    url: str, token: str | None, timeout: float, work, *, server: str, method: str, tool: str = ""
) -> Any:
    """``work`` in one exchange with the server, in the call's span (``telemetry.mcp_span``,
    labelled by ``server``: the server's slug, or the URL's host)."""
    with telemetry.mcp_span(server or urlsplit(url).hostname or "", method, tool) as failed:
        try:
            return _exchange(url, token, timeout, work)
        except McpFailure as exc:
            failed(exc.code)
            raise


def _exchange(url: str, token: str | None, timeout: float, work) -> Any:
    problem = scheme_problem(url)
    if problem:
        raise McpFailure(INSECURE_URL, problem)
    transport = outbound.AsyncPinnedTransport(rule())
    try:
        transport.pin_url(url)  # resolved and checked once: every request goes there
    except outbound.OutboundError as exc:
        raise _outbound_failure(exc) from None
    statuses: list[int] = []

    async def record(response: httpx2.Response) -> None:
        statuses.append(response.status_code)

    async def main() -> Any:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        with anyio.fail_after(timeout):
            async with outbound.async_client(
                transport, headers=headers, timeout=timeout, event_hooks={"response": [record]}
            ) as http:
                async with Client(streamable_http_client(url, http_client=http)) as client:
                    return await work(client)

    try:
        return asyncio.run(main())
    except McpFailure:
        raise
    except Exception as exc:  # every SDK, transport or protocol error is a stable failure
        raise _failure(exc, statuses, timeout) from None


def _dump(model: Any) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def list_tools(
    url: str, *, token: str | None = None, timeout: float = 30, server: str = ""
) -> list[dict]:
    """The server's tools as JSON (``name``, ``description``, ``inputSchema``,
    ``annotations`` ...), every page of ``tools/list``. ``server``: its slug, for telemetry."""

    async def work(client: Client) -> list[dict]:
        tools: list[dict] = []
        cursor = None
        for _ in range(MAX_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools += [_dump(tool) for tool in page.tools]
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    return _run(url, token, timeout, work, server=server, method="tools/list")


def call_tool(
    url: str,
    name: str,
    arguments: dict[str, Any],
    *,
    token: str | None = None,
    timeout: float,
    server: str = "",
) -> dict[str, Any]:
    """The ``tools/call`` result as JSON (``content``, ``structuredContent``, ``isError``).
    ``server``: its slug, for telemetry."""

    async def work(client: Client) -> dict[str, Any]:
        return _dump(await client.call_tool(name, arguments, read_timeout_seconds=timeout))

    return _run(url, token, timeout, work, server=server, method="tools/call", tool=name)
