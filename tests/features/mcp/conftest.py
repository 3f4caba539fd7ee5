"""The MCP tests' ticket server: one per module, reset and registered for each test."""

import pytest

from orchestrator_app.models import McpServer
from tests.support.mcp import KEY
from tests.support.mcp_servers import TicketServer


@pytest.fixture(scope="module")
def tickets_server():
    server = TicketServer()
    yield server
    server.stop()


@pytest.fixture
def tickets(tickets_server, llm, settings, db):
    """The ticket server, reset, registered as ``tickets`` (no auth), used by the site's
    default agent; tool settings rows from a first listing."""
    tickets_server.reset()
    settings.AHENTIC = {
        **settings.AHENTIC,
        "MCP_SERVERS": ["tickets"],
        "MCP_ALLOW_INSECURE_LOCAL": True,
        "VAULT_KEYS": [KEY],
    }
    server = McpServer.objects.create(slug="tickets", name="Tickets", url=tickets_server.url)
    tickets_server.server_row = server
    return tickets_server
