"""Remote MCP servers' tools as tools of the registry (docs/howto/mcp-client.md).

A server's tools are listed (``tools_refresh``, through the seam ``mcp_client``), kept on its
row for ``MCP_TOOLS_TTL_S`` and offered to a session whose agent lists the server
(``MCP_SERVERS``) as ``Tool`` objects named ``mcp__<slug>__<tool>``: they pass the same
pipeline as site tools (Ask mode, approval and grants by that name, the ledger and trace).
They are never in the registry itself: ``get_tool`` resolves an ``mcp__`` name here.

Stable requests: the tools go after the site's, sorted by name, with their schemas' keys
sorted, so a server that reorders its list does not move the cached prefix.

Names: ``mcp__<slug>__<tool>`` when it matches the Messages API's ``^[a-zA-Z0-9_-]{1,64}$``;
otherwise (a long name, other characters) the tool part becomes its allowed characters cut
to fit, then ``_`` and the first 8 hex digits of the SHA-256 of the server's tool name: the
same name every time, and two long names that share a beginning stay apart.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from datetime import timedelta
from typing import Any

import jsonschema
from django.utils import timezone

from sessions_app import agents
from sessions_app.attachments import ToolImage
from sessions_app.conf import ahentic_settings

from ..models import McpServer, McpTool
from ..tools import (
    MCP_PREFIX,
    NAME_RE,
    RESULT_CHARS,
    Summary,
    Tool,
    ToolContext,
    ToolError,
    ToolSource,
    add_source,
)
from . import client
from .credentials import access_token, connect_hint, has_credential, note_used

# Seconds a call may take besides the server's timeout before the pipeline's own limit fires
# (the seam's limit answers first, with ahentic_mcp_timeout).
TIMEOUT_MARGIN_S = 10
DESCRIPTION_MAX = 2000
TOOL_ERROR = "ahentic_mcp_tool_error"
INPUT_SHOWN_MAX = 300
MODULE = __name__


def tool_name(slug: str, name: str) -> str:
    """The name the model sees for the server's tool ``name`` (module docstring)."""
    full = f"{MCP_PREFIX}{slug}__{name}"
    if NAME_RE.match(full):
        return full
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    prefix = f"{MCP_PREFIX}{slug}__"
    room = 64 - len(prefix) - len(digest) - 1
    safe = re.sub(r"[^a-zA-Z0-9_-]", "_", name)[: max(room, 0)]
    return f"{prefix}{safe}_{digest}"


def setting_name(name: str) -> str:
    """The server's tool ``name`` as its settings row (``McpTool.name``) holds it: the name
    itself when it fits the column, else its start, ``_`` and the first 8 hex digits of its
    SHA-256 (stable, and two long names that share a beginning stay apart). A server may name a
    tool with any number of characters; no database column has to hold more than this."""
    limit = McpTool._meta.get_field("name").max_length
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[: limit - len(digest) - 1]}_{digest}"


def slug_of(name: str) -> str | None:
    """The server slug an ``mcp__`` name names (slugs have no ``__``)."""
    if not name.startswith(MCP_PREFIX):
        return None
    slug, sep, _ = name[len(MCP_PREFIX) :].partition("__")
    return slug if sep and slug else None


def timeout_of(server: McpServer) -> float:
    return float(server.timeout_s or ahentic_settings.MCP_CALL_TIMEOUT_S)


def sorted_json(value: Any) -> Any:
    """``value`` with every object's keys sorted: the same bytes whatever order the server
    sent."""
    return json.loads(json.dumps(value, sort_keys=True))


def usable_listing(listed: Any) -> list[dict[str, Any]]:
    """The listed tools the model can be given: a name, an object schema that is a valid JSON
    Schema; sorted by name, keys sorted."""
    kept = {}
    for item in listed if isinstance(listed, list) else []:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            continue
        schema = item.get("inputSchema")
        if not isinstance(schema, dict) or schema.get("type") != "object":
            continue
        try:
            jsonschema.Draft202012Validator.check_schema(schema)
        except jsonschema.SchemaError:
            continue
        annotations = item.get("annotations") if isinstance(item.get("annotations"), dict) else {}
        kept[item["name"]] = {
            "name": item["name"],
            "description": str(item.get("description") or "")[:DESCRIPTION_MAX],
            "inputSchema": schema,
            "readOnly": annotations.get("readOnlyHint") is True,
        }
    return [sorted_json(kept[name]) for name in sorted(kept)]


# --- listing --------------------------------------------------------------------------------


def tools_refresh(server: McpServer, *, user=None, timeout: float | None = None) -> str | None:
    """List the server's tools now and keep them; a tool seen for the first time gets its
    settings row (policy ``always_allow`` for a read-only tool when the server says so,
    ``always_ask`` otherwise). Returns the failure message, or None. The listing runs before
    any write; the writes are one UPDATE and one insert. ``timeout``: seconds for the listing
    (the server's call timeout by default)."""
    now = timezone.now()
    try:
        token = access_token(server, user)
        listed = usable_listing(
            client.list_tools(
                server.url,
                token=token,
                timeout=timeout or timeout_of(server),
                server=server.slug,
            )
        )
    except client.McpFailure as exc:
        McpServer.objects.filter(pk=server.pk).update(
            tools_fetched_at=now, tools_error=exc.message[:300]
        )
        server.tools_fetched_at, server.tools_error = now, exc.message[:300]
        return exc.message
    McpServer.objects.filter(pk=server.pk).update(
        tool_list=listed, tools_fetched_at=now, tools_error=""
    )
    server.tool_list, server.tools_fetched_at, server.tools_error = listed, now, ""
    allow = McpTool.Policy.ALWAYS_ALLOW
    McpTool.objects.bulk_create(
        [
            McpTool(
                server=server,
                name=setting_name(item["name"]),
                policy=allow
                if item["readOnly"] and server.readonly_default_allow
                else McpTool.Policy.ALWAYS_ASK,
            )
            for item in listed
        ],
        ignore_conflicts=True,  # rows staff already have keep their settings
    )
    return None


def stale(server: McpServer) -> bool:
    fetched = server.tools_fetched_at
    ttl = timedelta(seconds=float(ahentic_settings.MCP_TOOLS_TTL_S))
    return fetched is None or timezone.now() - fetched >= ttl


# --- tools ----------------------------------------------------------------------------------


def shown(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= INPUT_SHOWN_MAX else text[: INPUT_SHOWN_MAX - 1] + "…"


def build_tool(server: McpServer, item: dict[str, Any], policy: str) -> Tool:
    """The registry's view of one listed tool of ``server`` with staff's ``policy``."""
    remote = item["name"]
    label = f"{server.name} · {remote}"

    def preview(ctx: ToolContext, tool_input: dict[str, Any]) -> str:
        # A call that cannot authenticate is answered at once, before any approval card.
        if not has_credential(server, ctx.user):
            raise ToolError(client.AUTH_REQUIRED, connect_hint(server))
        changes = [
            {"field": key, "before": None, "after": shown(value)}
            for key, value in sorted(tool_input.items())
        ]
        return Summary(label, changes)

    def run(ctx: ToolContext, tool_input: dict[str, Any]) -> dict[str, Any]:
        return call(server.pk, remote, ctx.user, tool_input)

    return Tool(
        name=tool_name(server.slug, remote),
        label=label,
        description=f"[{server.name}] {item['description']}".strip(),
        input_schema=item["inputSchema"],
        func=run,
        # readOnlyHint is the server's word: it lets the tool run in Ask mode; whether it asks
        # the user is staff's policy.
        readonly=bool(item["readOnly"]),
        requires_approval=policy != McpTool.Policy.ALWAYS_ALLOW,
        timeout=timeout_of(server) + TIMEOUT_MARGIN_S,
        summary=lambda tool_input: label,
        preview=preview,
        module=MODULE,
    )


def offered(servers: list[McpServer]) -> list[Tool]:
    """The enabled tools of ``servers`` (not ``never``), sorted by name."""
    if not servers:
        return []  # an agent without servers: no query to build
    settings = {
        (row.server_id, row.name): row
        for row in McpTool.objects.filter(server__in=[s.pk for s in servers])
    }
    tools = []
    for server in servers:
        for item in server.tool_list or []:
            row = settings.get((server.pk, setting_name(item.get("name") or "")))
            if row is None or not row.enabled or row.policy == McpTool.Policy.NEVER:
                continue
            tools.append(build_tool(server, item, row.policy))
    return sorted(tools, key=lambda t: t.name)


def session_servers(session) -> list[McpServer]:
    """The active servers the session's agent lists (``MCP_SERVERS``)."""
    slugs = list(agents.settings_for(session).MCP_SERVERS or [])
    if not slugs:
        return []
    return list(McpServer.objects.filter(slug__in=slugs, active=True).order_by("slug"))


def session_tools(session) -> list[Tool]:
    """The MCP tools ``session`` offers the model; lists a server again when its list is older
    than ``MCP_TOOLS_TTL_S`` (with the owner's credential for a per-user server; a failure
    keeps the last list)."""
    servers = session_servers(session)
    for server in servers:
        if stale(server):
            # The step holds a short lease and no heartbeat runs here: a slow listing gives up
            # well within it (the last list is used meanwhile).
            limit = min(timeout_of(server), float(ahentic_settings.RUN_LEASE_S) / 3)
            tools_refresh(server, user=session.owner, timeout=limit)
    return offered(servers)


def offered_to(session, name: str) -> bool:
    """Whether the session's agent lists the server an ``mcp__`` name belongs to."""
    slug = slug_of(name)
    return slug is not None and slug in (agents.settings_for(session).MCP_SERVERS or [])


def resolve(name: str) -> Tool | None:
    """The tool an ``mcp__`` name names, when its server is active and the tool enabled."""
    slug = slug_of(name)
    if slug is None:
        return None
    server = McpServer.objects.filter(slug=slug, active=True).first()
    if server is None:
        return None
    found = [t for t in offered([server]) if t.name == name]
    return found[0] if found else None


def connect() -> None:
    """Add the remote servers' tools to the registry as a tool source, and the servers to the
    agent form's choices (the app's ``ready``)."""
    add_source(
        ToolSource(
            prefix=MCP_PREFIX,
            resolve=resolve,
            session_tools=session_tools,
            offered_to=offered_to,
            setting="MCP_SERVERS",
        )
    )
    agents.add_choices("MCP_SERVERS", server_choices)


def server_choices() -> list[tuple[str, str]]:
    """(slug, name) of every registered MCP server, for the agent form."""
    return list(McpServer.objects.order_by("name").values_list("slug", "name"))


# --- calling --------------------------------------------------------------------------------


def call(server_id: int, remote: str, user, tool_input: dict[str, Any]) -> dict[str, Any]:
    """Run the tool ``remote`` on the server as ``user``; a failure is a ``ToolError`` with a
    stable code (never an exception the run fails on)."""
    server = McpServer.objects.filter(pk=server_id, active=True).first()
    if server is None:
        raise ToolError(client.UNAVAILABLE, "This MCP server is no longer available.")
    try:
        token = access_token(server, user)
        raw = client.call_tool(
            server.url,
            remote,
            tool_input,
            token=token,
            timeout=timeout_of(server),
            server=server.slug,
        )
    except client.McpFailure as exc:
        hint = connect_hint(server) if exc.code == client.AUTH_REQUIRED else None
        if hint and hint in exc.message:
            hint = None  # the message says it already
        raise ToolError(exc.code, f"{server.name}: {exc.message}", hint=hint) from None
    note_used(server, user)
    return result_of(raw, remote)


IMAGE_EXTENSIONS = {
    "image/png": "png",
    "image/jpeg": "jpg",
    "image/gif": "gif",
    "image/webp": "webp",
}


def result_of(raw: Any, remote: str) -> dict[str, Any]:
    """A ``tools/call`` result as the tool result the model reads: its text blocks, resource
    links and embedded resources as text (with their URIs), images as image blocks,
    ``structuredContent`` as JSON text when there is no text; ``isError`` is a tool error."""
    content = raw.get("content") if isinstance(raw, dict) else None
    if not isinstance(content, list):
        raise ToolError(client.BAD_RESULT, f"{remote}: the result has no content list.")
    texts: list[str] = []
    images: list[ToolImage] = []
    for block in content:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            texts.append(str(block.get("text", "")))
        elif kind == "image":
            try:
                data = base64.b64decode(str(block.get("data", "")), validate=True)
            except (binascii.Error, ValueError):
                texts.append("[an image the server sent could not be decoded]")
                continue
            extension = IMAGE_EXTENSIONS.get(str(block.get("mimeType")), "png")
            name = f"{setting_name(remote)}-{len(images) + 1}.{extension}"
            images.append(ToolImage(data, name))
        elif kind == "resource_link":
            line = f"Resource link: {block.get('name') or ''} <{block.get('uri', '')}>"
            if block.get("description"):
                line += f" {block['description']}"
            texts.append(line.strip())
        elif kind == "resource" and isinstance(block.get("resource"), dict):
            resource = block["resource"]
            uri = resource.get("uri", "")
            if "text" in resource:
                texts.append(f"Resource <{uri}>:\n{resource['text']}")
            else:
                texts.append(f"Resource <{uri}> ({resource.get('mimeType', 'binary')}, not shown)")
        else:
            texts.append(f"[a {kind or 'malformed'} block was left out]")
    structured = raw.get("structuredContent")
    if not texts and structured is not None:
        texts.append(json.dumps(structured, ensure_ascii=False, sort_keys=True))
    text = "\n\n".join(texts)
    if raw.get("isError") is True:
        raise ToolError(TOOL_ERROR, text[:4000] or f"{remote} reported an error.")
    result = bounded(text)
    if images:
        result["images"] = images
    return result


def bounded(text: str) -> dict[str, Any]:
    """The result kept for a text of any size: whole when its JSON fits the cut the model reads
    of a tool result (``RESULT_CHARS``), else as much of its start as fits with a note
    saying it was cut, and ``fullChars``, its full length. What is stored is then what the
    model sees: a 5 MB answer never reaches the database, the API or the trace."""

    def size(value: dict[str, Any]) -> int:
        return len(json.dumps(value, ensure_ascii=False))

    if size({"text": text}) <= RESULT_CHARS:
        return {"text": text}
    note = (
        f"\n\n[Cut: the result has {len(text):,} characters; only its start is shown. Ask "
        "for less (a filter, a page, a smaller range) to see the rest.]"
    )
    shown = text[:RESULT_CHARS]
    while True:
        result = {"text": shown + note, "fullChars": len(text)}
        excess = size(result) - RESULT_CHARS
        if excess <= 0:
            return result
        # Each character dropped shortens the JSON by at least one (escapes by more).
        shown = shown[: len(shown) - excess]


def servers_for_user(user) -> list[McpServer]:
    """The active servers any agent the user may use lists (the site's default agent by its
    settings), for the sidebar's Connections."""
    slugs = set(ahentic_settings.MCP_SERVERS or [])
    for agent in agents.usable_agents(user):
        version = agents.latest_version(agent)
        if version is not None:
            slugs |= set(agents.AgentSettings(version.config).MCP_SERVERS or [])
    if not slugs:
        return []
    return list(McpServer.objects.filter(slug__in=slugs, active=True).order_by("name"))
