"""Background work for the brain model (``BRAIN_MODEL``): session names and memory snapshots.

Both run as django-q2 tasks after the step that triggered them, never inside a step. When the
model is unavailable they degrade instead of failing: names keep the provisional title and
memory falls back to an extractive summary.
"""

from __future__ import annotations

import logging

from sessions_app import agents, runstate
from sessions_app import services as session_services
from sessions_app.conf import ahentic_settings
from sessions_app.models import Event, Session, Snapshot

from .. import llm, telemetry
from ..ledger import usage

log = logging.getLogger("ahentic")

TITLE_MAX = 60
FOLD_AT = 5  # level-1 snapshots folded into one level-2
SNAPSHOT_MAX_CHARS = 2400
CONVERSATION_KINDS = (Event.Kind.USER_MESSAGE, Event.Kind.AGENT_MESSAGE)


def ask_brain(
    session: Session, *, purpose: str, instruction: str, text: str, max_tokens: int
) -> str:
    """One brain call, recorded in the ledger. Raises llm.LLMError."""
    model = agents.settings_for(session).BRAIN_MODEL
    if not model:
        raise llm.LLMError("ahentic_ai_unavailable", "No BRAIN_MODEL is configured.", False)
    request = {
        "system": [{"type": "text", "text": instruction}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": text}]}],
    }
    with telemetry.chat_span(model, session.pk, lambda: request) as chat:
        result = llm.call_model(model=model, max_tokens=max_tokens, **request)
        chat.result(result)
    usage.usage_record_call(session=session, run=session.run_seq, purpose=purpose, result=result)
    return result.text.strip()


def conversation_count(session_id) -> int:
    return Event.objects.filter(session_id=session_id, kind__in=CONVERSATION_KINDS).count()


def naming_due(session: Session) -> bool:
    """After the first exchange, then every NAME_REFRESH_INTERVAL conversation messages, while
    the user has not set a title. ``NAME_REFRESH_INTERVAL = 0`` turns naming off."""
    interval = int(ahentic_settings.NAME_REFRESH_INTERVAL or 0)
    if not interval or session.title_source == Session.TitleSource.USER:
        return False
    count = conversation_count(session.pk)
    if session.named_at_messages == 0:
        return count >= 2
    return count - session.named_at_messages >= interval


def name_session(session_id) -> None:
    session = Session.objects.filter(pk=session_id).first()
    if session is None or not naming_due(session):
        return
    recent = Event.objects.filter(session_id=session_id, kind__in=CONVERSATION_KINDS).order_by(
        "-seq"
    )[:6]
    transcript = "\n".join(f"{e.kind.split('_')[0]}: {e.content[:400]}" for e in reversed(recent))
    count = conversation_count(session_id)
    try:
        title = ask_brain(
            session,
            purpose="brain",
            instruction="Name this conversation in at most 6 words. Reply with the title only, "
            "no quotes, no punctuation at the end.",
            text=transcript,
            max_tokens=30,
        )
    except llm.LLMError as exc:
        log.info("ahentic naming skipped for %s: %s", session_id, exc)
        return
    title = " ".join(title.strip().strip("\"'").split())
    if not title:
        return
    if len(title) > TITLE_MAX:
        title = title[: TITLE_MAX - 1] + "…"
    # Conditional: a title the user set meanwhile always wins.
    runstate.session_rename_auto(session_id=session_id, title=title, named_at_messages=count)


def attached_note(event: Event) -> str:
    """The files an event carried, by name, for memory (the summary keeps that they were
    there once the event leaves the window)."""
    names = [a.get("name", "file") for a in (event.payload or {}).get("attachments") or []]
    return f" [attached: {', '.join(names)}]" if names else ""


def extractive_summary(events: list[Event]) -> str:
    lines = []
    for event in events:
        note = attached_note(event)
        if event.kind in CONVERSATION_KINDS and (event.content.strip() or note):
            who = "User" if event.kind == Event.Kind.USER_MESSAGE else "Agent"
            lines.append(f"- {who}: {' '.join(event.content.split())[:200]}{note}")
        elif event.kind == Event.Kind.TOOL_CALL:
            lines.append(f"- Agent used {event.payload.get('tool')}")
    text = "\n".join(lines)
    return text if len(text) <= SNAPSHOT_MAX_CHARS else text[: SNAPSHOT_MAX_CHARS - 1] + "…"


def summarize(session: Session, events_text: str, fallback: str) -> str:
    try:
        summary = ask_brain(
            session,
            purpose="memory",
            instruction="Summarize this part of an agent conversation for the agent's own memory: "
            "decisions, facts learned, what was done (tools and outcomes), open questions. "
            "At most 200 words, plain bullet points.",
            text=events_text,
            max_tokens=500,
        )
    except llm.LLMError as exc:
        log.info("ahentic memory falls back to an extractive summary for %s: %s", session.pk, exc)
        return fallback
    return summary or fallback


def remember(session_id) -> None:
    """Summarize events that left the window into a level-1 snapshot; fold five into a level-2."""
    session = Session.objects.filter(pk=session_id).first()
    if session is None or session.viewport_start_event_id is None:
        return
    covered = Snapshot.objects.filter(session_id=session_id).order_by("-to_event_id").first()
    after = covered.to_event_id if covered else 0
    events = list(
        Event.objects.filter(
            session_id=session_id,
            pk__gt=after,
            pk__lt=session.viewport_start_event_id,
            superseded_by__isnull=True,  # an earlier attempt is not the model's to remember
        ).order_by("seq")
    )
    if events:
        fallback = extractive_summary(events)
        text = summarize(
            session,
            "\n".join(f"{e.kind}: {e.content[:1500]}{attached_note(e)}" for e in events),
            fallback,
        )
        added = session_services.snapshot_add(
            session_id=session_id,
            level=1,
            from_event_id=events[0].pk,
            to_event_id=events[-1].pk,
            text=text,
        )
        if added is None:
            return  # a concurrent task covered these events
        session_services.trace_record(
            session_id=session_id,
            type="memory_snapshot",
            summary=f"Level-1 memory of {len(events)} events",
            data={"from_event_id": events[0].pk, "to_event_id": events[-1].pk},
        )
    fold(session)


def fold(session: Session) -> None:
    """Five level-1 snapshots fold into a level-2; five level-2 snapshots fold into one again,
    so memory in the system prompt stays bounded however long the session runs."""
    for level in (1, 2):
        snapshots = list(
            Snapshot.objects.filter(session_id=session.pk, level=level).order_by("from_event_id")
        )
        if len(snapshots) >= FOLD_AT:
            fold_into_level_two(session, snapshots)


def fold_into_level_two(session: Session, level_one: list[Snapshot]) -> None:
    joined = "\n\n".join(s.text for s in level_one)
    fallback = (
        joined if len(joined) <= SNAPSHOT_MAX_CHARS else joined[: SNAPSHOT_MAX_CHARS - 1] + "…"
    )
    text = summarize(session, joined, fallback)
    if not session_services.snapshots_fold(
        session_id=session.pk, snapshot_ids=[s.pk for s in level_one], text=text
    ):
        return
    session_services.trace_record(
        session_id=session.pk,
        type="memory_fold",
        summary=f"{len(level_one)} snapshots folded into level 2",
    )
