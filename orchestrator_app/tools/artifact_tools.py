"""Built-in artifact tools. They count as readonly: staging a draft changes nothing outside the
session, so Ask mode may stage drafts too."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext_lazy as _

from artifacts_app import store
from artifacts_app.models import Artifact

from . import ToolContext, tool

# An ArtifactError raised by the store reaches the model as it is: the pipeline converts every
# ModelFacingError into a tool result.


@tool(
    name="stage_artifact",
    label=_("Write a draft"),
    description="Stage a draft or payload in this session under a key, to apply later with "
    '{"from_memory": "<key>"} instead of repeating the body. For long drafts stage chunks with '
    "mode=append and complete=false, then finish with mode=append, complete=true.",
    input_schema={
        "type": "object",
        "properties": {
            "key": {"type": "string", "minLength": 1, "maxLength": 64},
            "kind": {"enum": list(Artifact.Kind.values)},
            "payload": {
                "description": "{content} for html/markdown/post_content, {blocks} for blocks, "
                "anything for json"
            },
            "title": {"type": "string", "maxLength": 255},
            "mode": {"enum": ["replace", "append"]},
            "complete": {"type": "boolean"},
        },
        "required": ["key", "kind"],
    },
    readonly=True,
    internal=True,
)
def stage_artifact(ctx: ToolContext, input: dict[str, Any]) -> dict[str, Any]:
    payload = input.get("payload")
    # Common model mistake: the body at the top level instead of inside payload.
    if payload is None and "content" in input:
        payload = {"content": input["content"]}
    if payload is None and "blocks" in input:
        payload = {"blocks": input["blocks"]}
    artifact = store.stage(
        session_id=ctx.session.pk,
        key=input["key"],
        kind=input["kind"],
        payload=payload,
        title=input.get("title"),
        mode=input.get("mode", "replace"),
        complete=input.get("complete", True),
        step=ctx.step,
        run=ctx.run,
    )
    message = (
        "Draft saved; keep appending, then finish with complete=true."
        if artifact.status == Artifact.Status.DRAFTING
        else f'Ready. Apply it with {{"from_memory": "{artifact.key}"}}.'
    )
    return {"ok": True, **store.pointer_json(artifact), "message": message}


@tool(
    name="list_artifacts",
    label=_("List the drafts"),
    description="List this session's artifacts (pointers only, no bodies).",
    readonly=True,
    internal=True,
)
def list_artifacts(ctx: ToolContext, input: dict[str, Any]) -> dict[str, Any]:
    items = [store.pointer_json(a) for a in store.pointers(ctx.session.pk)]
    return {"ok": True, "artifacts": items, "count": len(items)}


@tool(
    name="read_artifact",
    label=_("Read a draft"),
    description="Read one artifact's full body (only when you must revise it).",
    input_schema={"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]},
    readonly=True,
    internal=True,
)
def read_artifact(ctx: ToolContext, input: dict[str, Any]) -> dict[str, Any]:
    artifact = store.get(ctx.session.pk, input["key"])
    return {"ok": True, **store.pointer_json(artifact), "payload": artifact.payload}


@tool(
    name="delete_artifact",
    label=_("Delete a draft"),
    description="Delete an artifact from this session.",
    input_schema={"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]},
    readonly=True,
    internal=True,
)
def delete_artifact(ctx: ToolContext, input: dict[str, Any]) -> dict[str, Any]:
    store.delete(ctx.session.pk, input["key"])
    return {"ok": True, "deleted": input["key"]}
