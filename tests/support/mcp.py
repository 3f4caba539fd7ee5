"""MCP from the client side: the MCP SDK's session against the site, tool results read back,
the vault key the MCP settings use."""

import httpx2
from cryptography.fernet import Fernet
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.support.api import session_url

# The vault key the MCP tests' settings use.
KEY = Fernet.generate_key().decode()


def tool_result_event(client, session, call_id: str) -> dict:
    response = client.get(session_url(session, "messages") + "?view=debug&limit=100")
    [found] = [
        m
        for m in response.json()["messages"]
        if m["kind"] == "tool_response" and m["meta"]["callId"] == call_id
    ]
    return found


def llm_model() -> str:
    from sessions_app.conf import ahentic_settings

    return ahentic_settings.MODEL


async def mcp_client_session(url: str, secret: str | None, work):
    headers = {"Authorization": f"Bearer {secret}"} if secret else {}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as client:
                await client.initialize()
                return await work(client)


def text_of(result) -> str:
    return "".join(block.text for block in result.content)
