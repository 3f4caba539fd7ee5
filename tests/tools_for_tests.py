"""Tools the tests give the agent (registered on import)."""

from orchestrator_app.tools import ToolError, tool

CALLS: list[dict] = []


@tool(
    name="echo",
    description="Echo the text back.",
    input_schema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    readonly=True,
)
def echo(ctx, input):
    CALLS.append({"tool": "echo", "input": input})
    return {"ok": True, "echo": input["text"]}


@tool(
    name="notes_create",
    description="Create a note.",
    input_schema={"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]},
    readonly=False,
    summary=lambda input: f"Create note {input.get('title')!r}",
)
def notes_create(ctx, input):
    CALLS.append({"tool": "notes_create", "input": input})
    return {"ok": True, "id": len(CALLS)}


@tool(name="fails", description="Always fails.", readonly=True)
def fails(ctx, input):
    raise ToolError("nope", "This tool always fails.", hint="Do not call it again.")


@tool(name="crashes", description="Raises an unexpected exception.", readonly=True)
def crashes(ctx, input):
    raise RuntimeError("boom")
