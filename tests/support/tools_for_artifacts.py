"""Tools the artifact, HITL and browser tests give the agent (registered on import).

``CALLS`` logs every server execution with the exact input the tool received, so a test can
tell what ``from_memory`` expanded to and how often a mutating tool really ran.
"""

from orchestrator_app.tools import tool

CALLS: list[dict] = []


@tool(
    name="publish_note",
    description="Publish a note with a title and a body (markdown or html).",
    input_schema={
        "type": "object",
        "properties": {"title": {"type": "string"}, "body": {"type": "string"}},
        "required": ["title", "body"],
    },
    readonly=False,
    permission=lambda user: user.is_active,  # any active user with the agent permission
    artifact_field="body",
    artifact_kinds=("markdown", "html"),
    summary=lambda input: f"Publish note {input.get('title')!r}",
)
def publish_note(ctx, input):
    CALLS.append({"tool": "publish_note", "input": input})
    return {"ok": True, "published": input["title"], "bytes": len(input["body"])}


@tool(
    name="wipe_site",
    description="Delete every page of the site. Asks for approval every single time.",
    input_schema={"type": "object", "properties": {"confirm": {"type": "string"}}},
    readonly=False,
    permission=lambda user: user.is_active,  # any active user with the agent permission
    non_preallowable=True,
    summary=lambda input: "Wipe the whole site",
)
def wipe_site(ctx, input):
    CALLS.append({"tool": "wipe_site", "input": input})
    return {"ok": True, "wiped": True}


@tool(
    name="site_stats",
    description="Read visitor statistics (read-only).",
    input_schema={"type": "object", "properties": {"page": {"type": "string"}}},
    readonly=True,
)
def site_stats(ctx, input):
    CALLS.append({"tool": "site_stats", "input": input})
    return {"ok": True, "page": input.get("page", "/"), "visits": 42}


@tool(
    name="editor_insert",
    description="Insert content into the editor open in the user's browser.",
    input_schema={
        "type": "object",
        "properties": {"content": {"type": "string"}, "position": {"type": "string"}},
        "required": ["content"],
    },
    # Writes into the open editor (so Ask mode refuses it) but saves nothing: no approval card.
    readonly=False,
    permission=lambda user: user.is_active,  # any active user with the agent permission
    requires_approval=False,
    runtime="browser",
    artifact_field="content",
    artifact_kinds=("markdown", "html"),
    summary=lambda input: "Insert content into the editor",
)
def editor_insert(ctx, input):  # runs in the browser
    raise NotImplementedError
