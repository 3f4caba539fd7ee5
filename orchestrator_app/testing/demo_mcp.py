"""The demo's MCP server: a tiny ticket tracker over Streamable HTTP (the ``mcp`` SDK's
``MCPServer``), started by ``manage.py ahentic_demo`` beside the site on a free local port and
registered for the Editor agent as ``tickets``.

Two tools: ``list_tickets`` (``readOnlyHint``: it runs without asking, the demo server lets
read-only tools run) and ``create_ticket`` (not read-only: an approval card first). Tickets
live in this process's memory.

    python -m orchestrator_app.testing.demo_mcp --port 8765   # then http://127.0.0.1:8765/mcp
"""

from __future__ import annotations

import argparse

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

TICKETS: list[dict] = [
    {"id": 1, "title": "The printer is on fire", "status": "open"},
    {"id": 2, "title": "Coffee machine empty", "status": "open"},
    {"id": 3, "title": "Welcome page typo", "status": "closed"},
]


def build_server() -> MCPServer:
    server = MCPServer("Demo tickets")

    @server.tool(annotations=ToolAnnotations(title="List tickets", readOnlyHint=True))
    def list_tickets(status: str = "open") -> str:
        """List the tickets with a status: "open", "closed" or "all"."""
        rows = [t for t in TICKETS if status == "all" or t["status"] == status]
        if not rows:
            return f"No {status} tickets."
        return "\n".join(f"#{t['id']} {t['title']} ({t['status']})" for t in rows)

    @server.tool(
        annotations=ToolAnnotations(
            title="Create a ticket", readOnlyHint=False, destructiveHint=False
        )
    )
    def create_ticket(title: str, body: str = "") -> str:
        """Create an open ticket with a title and an optional body."""
        ticket = {"id": len(TICKETS) + 1, "title": title[:200], "status": "open"}
        TICKETS.append(ticket)
        return f"Created ticket #{ticket['id']}: {ticket['title']}"

    return server


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description="The django-ahentic demo's MCP server.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    app = build_server().streamable_http_app()
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
