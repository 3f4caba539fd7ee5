"""Tools the sidebar's browser tests give the agent (registered on import by that module)."""

from orchestrator_app.tools import tool

CALLS: list[dict] = []


@tool(
    name="sidebar_publish_note",
    label="Publish a note",
    description="Publish a note on the site.",
    input_schema={
        "type": "object",
        "properties": {"title": {"type": "string"}},
        "required": ["title"],
    },
    readonly=False,
    permission=lambda user: user.is_active,  # any active user with the agent permission
    summary=lambda input: f"Publish the note {input.get('title')!r}",
)
def sidebar_publish_note(ctx, input):
    CALLS.append({"tool": "sidebar_publish_note", "input": input})
    return {"ok": True, "published": input["title"]}


@tool(
    name="sidebar_wipe_notes",
    description="Delete every note. Always asks first.",
    readonly=False,
    permission=lambda user: user.is_active,  # any active user with the agent permission
    non_preallowable=True,
    summary=lambda input: "Delete every note",
)
def sidebar_wipe_notes(ctx, input):
    CALLS.append({"tool": "sidebar_wipe_notes", "input": input})
    return {"ok": True, "deleted": 0}


@tool(
    name="sidebar_read_status",
    description="Read the site's status.",
    readonly=True,
)
def sidebar_read_status(ctx, input):
    CALLS.append({"tool": "sidebar_read_status", "input": input})
    return {"ok": True, "status": "fine"}
