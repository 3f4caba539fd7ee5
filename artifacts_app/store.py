"""The artifact store: stage drafts once, apply them later by key (``from_memory``).

Rules (SPEC section 8): keys are sanitized to ``[a-z0-9_-]{1,64}``; each kind has one payload
shape; ``complete=False`` stages a ``drafting`` item that ``append`` extends; caps on bytes and
items; placeholder text is refused. Every write leaves a short system event in the transcript
(never the body). Prompts only ever see pointers, never bodies.

Staleness policy: artifacts survive new goals untouched ("now put that draft in the editor"
must keep working); a later goal that restages the same key simply replaces it. ``stale`` is set
only explicitly (``set_status``), e.g. by staff in the admin.
"""

from __future__ import annotations

import json
import re
from typing import Any

from django.db import IntegrityError

from sessions_app import db
from sessions_app import services as session_services
from sessions_app.conf import ahentic_settings
from sessions_app.errors import ModelFacingError
from sessions_app.models import Event

from .models import Artifact

TEXT_KINDS = (Artifact.Kind.HTML, Artifact.Kind.MARKDOWN, Artifact.Kind.POST_CONTENT)
KEY_MAX = 64
EXCERPT_CHARS = 160
PLACEHOLDER_PATTERNS = [
    re.compile(p, re.IGNORECASE)
    for p in (
        r"\[\s*(full|complete|entire|whole|rest of( the)?)\s+(article|text|content|post|draft|body)[^\]]*\]",
        r"\b(content|article|text|body|draft)\s+(will|would)\s+be\s+(provided|added|inserted|written)\b",
        r"\b(full|complete)\s+(article|content|text)\s+(goes|will go)\s+here\b",
        r"^\s*(\.\.\.|…|tbd|todo|placeholder)\s*$",
    )
]


# The key a tool call uses to name a staged artifact instead of sending its body inline
# (``{"from_memory": "<key>"}``). ``apply_from_memory`` is the one place it is expanded.
FROM_MEMORY = "from_memory"


class ArtifactError(ModelFacingError):
    """A refused artifact operation (cap, placeholder, missing key...)."""


def sanitize_key(raw: Any) -> str:
    key = re.sub(r"[^a-z0-9_-]", "", str(raw or "").strip().lower())[:KEY_MAX]
    if not key:
        raise ArtifactError(
            "artifact_invalid_key", "Artifact keys use a-z, 0-9, _ and - (e.g. article_draft)."
        )
    return key


def encoded_bytes(payload: Any) -> int:
    return len(json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def count_blocks(blocks: list[Any]) -> int:
    total = 0
    for block in blocks:
        total += 1
        if isinstance(block, dict):
            total += count_blocks(block.get("innerBlocks") or block.get("inner_blocks") or [])
    return total


def _has_placeholder(text: str) -> bool:
    return any(p.search(text) for p in PLACEHOLDER_PATTERNS)


def _block_texts(blocks: list[Any]):
    for block in blocks:
        if not isinstance(block, dict):
            continue
        attrs = block.get("attributes") or block.get("attrs") or {}
        for name in ("content", "text", "caption", "citation"):
            value = attrs.get(name) if isinstance(attrs, dict) else None
            if isinstance(value, str):
                yield value
        yield from _block_texts(block.get("innerBlocks") or block.get("inner_blocks") or [])


def normalize_payload(
    kind: str, payload: Any, *, allow_empty: bool = False
) -> dict[str, Any] | Any:
    """Coerce a payload to its kind's stored shape, or raise ArtifactError."""
    if kind not in Artifact.Kind.values:
        raise ArtifactError(
            "artifact_invalid_kind", f"kind must be one of {', '.join(Artifact.Kind.values)}."
        )
    if kind == Artifact.Kind.JSON:
        if payload is None and not allow_empty:
            raise ArtifactError("artifact_empty", "A json artifact needs a non-null payload.")
        return payload
    if kind == Artifact.Kind.BLOCKS:
        blocks = payload.get("blocks") if isinstance(payload, dict) else payload
        if isinstance(blocks, str):
            try:
                blocks = json.loads(blocks)
            except ValueError:
                raise ArtifactError(
                    "artifact_invalid_payload", "blocks must be a list of block objects."
                ) from None
        if blocks in (None, []) and allow_empty:
            return {"blocks": []}
        if (
            not isinstance(blocks, list)
            or not blocks
            or not all(isinstance(b, dict) for b in blocks)
        ):
            raise ArtifactError(
                "artifact_invalid_payload", "A blocks artifact needs {blocks: [...]} (non-empty)."
            )
        if any(_has_placeholder(t) for t in _block_texts(blocks)):
            raise _placeholder_error()
        return {"blocks": blocks}
    content = payload.get("content") if isinstance(payload, dict) else payload
    if content is None and allow_empty:
        return {"content": ""}
    if not isinstance(content, str) or not content.strip():
        if allow_empty and content == "":
            return {"content": ""}
        raise ArtifactError(
            "artifact_empty", f'A {kind} artifact needs {{content: "..."}} (non-empty).'
        )
    if _has_placeholder(content):
        raise _placeholder_error()
    return {"content": content}


def _placeholder_error() -> ArtifactError:
    return ArtifactError(
        "artifact_placeholder_content",
        "The payload is a placeholder, not real content.",
        hint="Write the real content; for long drafts stage it in chunks with mode=append, complete=false.",
    )


def _is_empty(kind: str, payload: Any) -> bool:
    if kind == Artifact.Kind.BLOCKS:
        return not (payload or {}).get("blocks")
    if kind in TEXT_KINDS:
        return not (payload or {}).get("content")
    return payload is None


def _merge(kind: str, old: Any, new: Any) -> Any:
    if kind == Artifact.Kind.BLOCKS:
        return {"blocks": list(old.get("blocks", [])) + list(new.get("blocks", []))}
    if kind in TEXT_KINDS:
        parts = [p for p in (old.get("content", ""), new.get("content", "")) if p]
        return {"content": "\n\n".join(parts)}
    raise ArtifactError(
        "artifact_append_unsupported", "json artifacts cannot be appended to; replace them."
    )


def _title_for(kind: str, payload: Any, given: str | None, existing: str) -> str:
    if given:
        return given[:255]
    if existing:
        return existing
    if kind == Artifact.Kind.BLOCKS:
        for block in payload.get("blocks", []):
            if block.get("name") in ("core/heading", "heading"):
                text = (block.get("attributes") or {}).get("content", "")
                return re.sub(r"<[^>]+>", "", str(text))[:80]
    return ""


def stage(
    *,
    session_id,
    key: str,
    kind: str,
    payload: Any = None,
    title: str | None = None,
    mode: str = "replace",
    complete: bool = True,
    source: str = "stage_artifact",
    step: int = 0,
    run: int = 0,
) -> Artifact:
    """Stage (create, replace or append to) an artifact. Raises ArtifactError."""
    key = sanitize_key(key)
    if mode not in ("replace", "append"):
        raise ArtifactError("artifact_invalid_mode", "mode must be replace or append.")
    with db.atomic():
        existing = (
            Artifact.objects.select_for_update().filter(session_id=session_id, key=key).first()
        )
        drafting = existing is not None and existing.status == Artifact.Status.DRAFTING
        appending = mode == "append" and drafting
        if appending and existing.kind != kind:
            raise ArtifactError(
                "artifact_kind_mismatch", f"{key} is a {existing.kind} draft; append the same kind."
            )
        body = normalize_payload(kind, payload, allow_empty=appending and complete)
        if appending:
            if _is_empty(kind, body):  # finalize the draft without a new chunk
                body = existing.payload
            else:
                body = _merge(kind, existing.payload, body)
        size = encoded_bytes(body)
        if size > int(ahentic_settings.ARTIFACT_MAX_BYTES):
            raise ArtifactError(
                "artifact_too_large",
                f"{key} would be {size} bytes; the limit is {ahentic_settings.ARTIFACT_MAX_BYTES}.",
                hint="Split the content into several artifacts.",
            )
        if existing is None:
            count = Artifact.objects.filter(session_id=session_id).count()
            if count >= int(ahentic_settings.ARTIFACT_MAX_ITEMS):
                raise ArtifactError(
                    "artifact_limit",
                    f"This session already holds {count} artifacts (the limit).",
                    hint="Delete one you no longer need, or restage an existing key.",
                )
        fields = {
            "kind": kind,
            "payload": body,
            "status": Artifact.Status.READY if complete else Artifact.Status.DRAFTING,
            "title": _title_for(kind, body, title, existing.title if existing else ""),
            "source": source,
            "step": step,
            "run": run,
            "bytes": size,
            "block_count": count_blocks(body["blocks"]) if kind == Artifact.Kind.BLOCKS else 0,
        }
        try:
            if existing is None:
                artifact = Artifact.objects.create(session_id=session_id, key=key, **fields)
            else:
                for name, value in fields.items():
                    setattr(existing, name, value)
                existing.save(update_fields=[*fields, "updated_at"])
                artifact = existing
        except IntegrityError:  # a concurrent stage of the same new key
            raise ArtifactError(
                "artifact_conflict", f"{key} was staged concurrently; retry."
            ) from None
        verb = "appended to" if appending else "staged"
        action = "appended" if appending else ("staged" if complete else "drafting")
        _note(
            session_id,
            f"Artifact {key} {verb}: {pointer_line(artifact)}",
            action=action,
            key=key,
            title=artifact.title,
            kind=artifact.kind,
            bytes=artifact.bytes,
            blockCount=artifact.block_count,
        )
    return artifact


def run_staged_over(session_id, run: int, size: int) -> bool:
    """Whether run ``run`` staged an artifact larger than ``size`` bytes (the content-work
    rule)."""
    return Artifact.objects.filter(session_id=session_id, run=run, bytes__gt=size).exists()


def _note(session_id, text: str, **facts: Any) -> None:
    """A line in the transcript: ``text`` for the verbose and debug views; ``facts`` (the
    ``action`` and the artifact's key, title, size) let the basic view say it as a sentence
    ("Drafted “Coffee” (210 bytes)")."""
    session_services.event_append(
        session_id=session_id,
        kind=Event.Kind.SYSTEM_MESSAGE,
        content=text,
        payload={"meta": {"type": "artifact", **facts}},
    )


def _title(session_id, key: str) -> str:
    return (
        Artifact.objects.filter(session_id=session_id, key=key)
        .values_list("title", flat=True)
        .first()
        or ""
    )


def pointers(session_id) -> list[Artifact]:
    """The session's artifacts without their bodies (``payload`` deferred), oldest first."""
    return list(
        Artifact.objects.filter(session_id=session_id).defer("payload").order_by("created_at", "pk")
    )


def pointer_line(artifact: Artifact) -> str:
    size = (
        f"{artifact.block_count} blocks"
        if artifact.kind == Artifact.Kind.BLOCKS
        else f"{artifact.bytes} bytes"
    )
    title = f' · "{artifact.title}"' if artifact.title else ""
    return f"{artifact.key}: {artifact.status} · {artifact.kind}{title} · {size} · staged step {artifact.step}"


def pointer_json(artifact: Artifact) -> dict[str, Any]:
    return {
        "key": artifact.key,
        "kind": artifact.kind,
        "status": artifact.status,
        "title": artifact.title,
        "bytes": artifact.bytes,
        "blockCount": artifact.block_count,
        "step": artifact.step,
    }


def prompt_pointers(session_id) -> str:
    """The pointer block for the prompt: keys and sizes, never bodies."""
    items = pointers(session_id)
    if not items:
        return ""
    lines = ["Session artifacts (bodies omitted):"] + [f"- {pointer_line(a)}" for a in items]
    lines.append(
        'Apply a ready artifact with {"from_memory": "<key>"} in a tool that accepts it; do not '
        "apply while it is drafting. Staging is not publishing: still call the tool that writes."
    )
    return "\n".join(lines)


def get(session_id, key: str) -> Artifact:
    artifact = Artifact.objects.filter(session_id=session_id, key=sanitize_key(key)).first()
    if artifact is None:
        raise ArtifactError(
            "artifact_missing", f"No artifact {key!r} in this session.", hint="Stage it first."
        )
    return artifact


def delete(session_id, key: str) -> None:
    key = sanitize_key(key)
    with db.atomic():
        title = _title(session_id, key)
        deleted, _ = Artifact.objects.filter(session_id=session_id, key=key).delete()
        if not deleted:
            raise ArtifactError("artifact_missing", f"No artifact {key!r} in this session.")
        _note(session_id, f"Artifact {key} deleted.", action="deleted", key=key, title=title)


def set_status(session_id, key: str, status: str) -> None:
    if status not in Artifact.Status.values:
        raise ArtifactError("artifact_invalid_status", f"Unknown status {status!r}.")
    with db.atomic():
        if not Artifact.objects.filter(session_id=session_id, key=sanitize_key(key)).update(
            status=status
        ):
            raise ArtifactError("artifact_missing", f"No artifact {key!r} in this session.")
        _note(
            session_id,
            f"Artifact {key} marked {status}.",
            action="marked",
            status=status,
            key=sanitize_key(key),
            title=_title(session_id, sanitize_key(key)),
        )


def check_ready(session_id, key: Any, kinds: tuple[str, ...]) -> Artifact:
    """Validate a ``from_memory`` key when the call is made (the body is not loaded)."""
    artifact = (
        Artifact.objects.filter(session_id=session_id, key=sanitize_key(key))
        .defer("payload")
        .first()
    )
    if artifact is None:
        raise ArtifactError(
            "artifact_missing", f"No artifact {key!r} in this session.", hint="Stage it first."
        )
    if artifact.status != Artifact.Status.READY:
        hint = (
            "Finish it with stage_artifact(mode=append, complete=true)."
            if artifact.status == "drafting"
            else "Restage it first."
        )
        raise ArtifactError(
            "artifact_not_ready",
            f"Artifact {artifact.key} is {artifact.status}, not ready.",
            hint=hint,
            status=artifact.status,
        )
    if kinds and artifact.kind not in kinds:
        raise ArtifactError(
            "artifact_kind_mismatch",
            f"Artifact {artifact.key} is {artifact.kind}; this tool takes {', '.join(kinds)}.",
        )
    return artifact


def excerpt(artifact: Artifact) -> str:
    """A short plain-text start of the body, for approval cards (never the whole body)."""
    payload = artifact.payload
    if artifact.kind in TEXT_KINDS:
        text = payload.get("content", "")
    elif artifact.kind == Artifact.Kind.BLOCKS:
        text = " ".join(_block_texts(payload.get("blocks", [])))
    else:
        text = json.dumps(payload, ensure_ascii=False)
    text = " ".join(re.sub(r"<[^>]+>", " ", text).split())
    return text if len(text) <= EXCERPT_CHARS else text[: EXCERPT_CHARS - 1] + "…"


def memory_summary(session_id, key: str) -> dict[str, Any] | None:
    """Pointer fields plus a short excerpt for an approval card; None if the key is gone."""
    artifact = Artifact.objects.filter(session_id=session_id, key=key).first()
    if artifact is None:
        return None
    return {**pointer_json(artifact), "excerpt": excerpt(artifact)}


def body_for_field(artifact: Artifact) -> Any:
    """What a tool's artifact field receives: text for text kinds, the list for blocks."""
    payload = artifact.payload
    if artifact.kind in TEXT_KINDS:
        return payload.get("content", "")
    if artifact.kind == Artifact.Kind.BLOCKS:
        return payload.get("blocks", [])
    return payload


def apply_from_memory(
    session_id, tool_input: dict[str, Any], field: str, kinds: tuple[str, ...]
) -> tuple[dict[str, Any], str | None]:
    """Expand ``{"from_memory": key}`` into ``field`` (from_memory wins over inline content)."""
    if FROM_MEMORY not in tool_input:
        return tool_input, None
    artifact = check_ready(session_id, tool_input[FROM_MEMORY], kinds)
    artifact = Artifact.objects.get(pk=artifact.pk)
    expanded = {k: v for k, v in tool_input.items() if k != FROM_MEMORY}
    expanded[field] = body_for_field(artifact)
    return expanded, artifact.key


def mark_applied(session_id, key: str) -> None:
    with db.atomic():
        if Artifact.objects.filter(session_id=session_id, key=key).update(
            status=Artifact.Status.APPLIED
        ):
            _note(
                session_id,
                f"Artifact {key} applied.",
                action="applied",
                key=key,
                title=_title(session_id, key),
            )


def auto_stage(
    session_id,
    tool_input: dict[str, Any],
    field: str,
    kinds: tuple[str, ...],
    *,
    step: int,
    run: int,
) -> dict[str, Any]:
    """Stage an inline body over ``AUTO_STAGE_BYTES`` and rewrite the call to ``from_memory``.

    Staging failures leave the input as it was (the tool then gets the inline body).
    """
    body = tool_input.get(field)
    if (
        body is None
        or FROM_MEMORY in tool_input
        or encoded_bytes(body) <= int(ahentic_settings.AUTO_STAGE_BYTES)
    ):
        return tool_input
    if isinstance(body, list):
        kind = Artifact.Kind.BLOCKS
        payload: Any = {"blocks": body}
    else:
        kind = next((k for k in kinds if k in TEXT_KINDS), Artifact.Kind.POST_CONTENT)
        payload = {"content": body}
    if kinds and kind not in kinds:
        return tool_input
    import hashlib

    key = "auto_" + hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:10]
    try:
        stage(
            session_id=session_id,
            key=key,
            kind=kind,
            payload=payload,
            source="auto_stage",
            step=step,
            run=run,
        )
    except ArtifactError:
        return tool_input
    rewritten = {k: v for k, v in tool_input.items() if k != field}
    rewritten[FROM_MEMORY] = key
    return rewritten
