"""The API's serializers: input (validation) first, then output (camelCase through
``source=``), which both render the answers and document them (drf-spectacular reads them)."""

from __future__ import annotations

from datetime import UTC
from typing import Any

from django.urls import reverse
from django.utils.translation import gettext
from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import ISO_8601, serializers

from sessions_app import agents
from sessions_app import services as session_services
from sessions_app.conf import ahentic_settings
from sessions_app.models import Agent, Event, Goal, Session

from ..loop.decisions import DECISIONS
from ..tools import label_for
from . import words
from .errors import ApiError, agent_not_found


class StrictCharField(serializers.CharField):
    """A CharField that refuses numbers and booleans instead of coercing them to text."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    def to_internal_value(self, data):
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


@extend_schema_field({"type": "object", "additionalProperties": True, "nullable": True})
class JSONObjectField(serializers.JSONField):
    """A JSON object (dict) or null."""

    default_error_messages = {"not_object": "Expected a JSON object or null."}

    def to_internal_value(self, data):
        if data is not None and not isinstance(data, dict):
            self.fail("not_object")
        return data


# A version number beyond a database integer would overflow the query (a 500 on PostgreSQL).
VERSION_MAX = 2**31 - 1


class SessionCreateSerializer(serializers.Serializer):
    """POST sessions: validation resolves the agent version the chat pins
    (``agents.version_for_new_session``: 404 ``ahentic_agent_not_found`` for an agent or
    version the user may not use); ``save(owner=...)`` creates it through the service."""

    title = StrictCharField(required=False, allow_blank=True, max_length=255)
    mode = serializers.ChoiceField(choices=Session.Mode.choices, required=False)
    agent = StrictCharField(
        required=False,
        max_length=64,
        help_text="The agent's slug (GET agents); absent: the site's default agent.",
    )
    agentVersion = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=VERSION_MAX,
        help_text="A version number of that agent; absent: its latest.",
    )

    def validate(self, attrs):
        try:
            attrs["agent_version"] = agents.version_for_new_session(
                self.context["request"].user, attrs.get("agent"), attrs.get("agentVersion")
            )
        except agents.AgentNotFound:
            raise agent_not_found() from None
        return attrs

    def create(self, validated_data):
        return session_services.session_create(
            owner=validated_data["owner"],
            title=validated_data.get("title"),
            mode=validated_data.get("mode"),
            agent_version=validated_data["agent_version"],
        )


class SessionUpdateSerializer(serializers.Serializer):
    """PATCH a session: ``validated_data`` holds the model's field names (``source=``), ready
    for ``runstate.session_update``."""

    title = StrictCharField(required=False, allow_blank=False, max_length=255)
    mode = serializers.ChoiceField(choices=Session.Mode.choices, required=False)
    viewMode = serializers.ChoiceField(
        source="view_mode", choices=Session.ViewMode.choices, required=False
    )
    pageContext = JSONObjectField(source="page_context", required=False, allow_null=True)
    activeSkills = serializers.ListField(
        source="active_skills", child=StrictCharField(max_length=128), required=False, max_length=32
    )
    activeWorkflow = StrictCharField(
        source="active_workflow",
        required=False,
        allow_blank=True,
        allow_null=True,
        max_length=128,
    )

    def validate_activeSkills(self, value: list[str]) -> list[str]:
        from .. import skills

        unknown = sorted(set(value) - set(skills.skills()))
        if unknown:
            raise ApiError(
                "ahentic_unknown_skill",
                f"Unknown skill(s): {', '.join(unknown)}. See GET skills.",
                fields={"activeSkills": unknown},
            )
        return list(dict.fromkeys(value))

    def validate_activeWorkflow(self, value: str | None) -> str:
        from .. import skills

        workflow = value or ""
        if workflow and workflow not in skills.workflows():
            raise ApiError(
                "ahentic_unknown_workflow",
                f"Unknown workflow {workflow!r}. See GET workflows.",
                fields={"activeWorkflow": [workflow]},
            )
        return workflow

    def validate(self, attrs):
        if "title" in attrs:  # a title the user set is never replaced by an automatic one
            attrs["title_source"] = Session.TitleSource.USER
        return attrs


# Cursors beyond a database integer would overflow the query (a 500 on PostgreSQL).
SEQ_MAX = 2**63 - 1


class MessagesQuerySerializer(serializers.Serializer):
    before = serializers.IntegerField(
        required=False, min_value=0, max_value=SEQ_MAX, help_text="Events with seq below this."
    )
    after = serializers.IntegerField(
        required=False, min_value=0, max_value=SEQ_MAX, help_text="Events with seq above this."
    )
    limit = serializers.IntegerField(required=False, min_value=1, max_value=100, default=50)
    view = serializers.ChoiceField(choices=Session.ViewMode.choices, required=False)


class SessionListQuerySerializer(serializers.Serializer):
    limit = serializers.IntegerField(required=False, min_value=1, max_value=100, default=50)
    status = serializers.ChoiceField(choices=Session.Status.choices, required=False)
    agent = StrictCharField(
        required=False, max_length=64, help_text="Only the chats with this agent (its slug)."
    )
    cursor = StrictCharField(
        required=False,
        allow_blank=True,
        max_length=200,
        help_text="nextCursor of the previous page (older); blank: the first page.",
    )
    q = StrictCharField(
        required=False,
        allow_blank=True,
        max_length=200,
        help_text="Only the chats whose title or a message (the user's or the agent's) holds "
        "this text, case-insensitively; blank: all.",
    )


class AgentListQuerySerializer(serializers.Serializer):
    place = serializers.ChoiceField(
        choices=[Agent.Place.SITE, Agent.Place.ADMIN],
        required=False,
        help_text="Only the agents shown there (site pages or the admin); absent: all.",
    )


class TokenStatsQuerySerializer(serializers.Serializer):
    days = serializers.IntegerField(required=False, min_value=1, max_value=120, default=30)


class MessageCreateSerializer(serializers.Serializer):
    content = StrictCharField(allow_blank=True, trim_whitespace=True)
    mode = serializers.ChoiceField(choices=Session.Mode.choices, required=False)
    pageContext = JSONObjectField(required=False, allow_null=True)
    ifBusy = serializers.ChoiceField(choices=["enqueue", "reject"], required=False)
    # Ids of this session's unsent uploads (POST attachments), sent with the message; at most
    # ATTACHMENT_MAX_PER_MESSAGE (``get_fields``: the setting as it is now).
    attachments = serializers.ListField(child=serializers.UUIDField(format="hex_verbose"))

    def get_fields(self):
        fields = super().get_fields()
        fields["attachments"] = serializers.ListField(
            child=serializers.UUIDField(format="hex_verbose"),
            required=False,
            max_length=int(ahentic_settings.ATTACHMENT_MAX_PER_MESSAGE),
            help_text="Ids of this session's unsent uploads (POST attachments).",
        )
        return fields

    def validate_attachments(self, value):
        return [str(key) for key in value]


class DecisionField(serializers.ChoiceField):
    """The approval's decision: one of ``decisions.DECISIONS``; anything else is the stable
    400 ``ahentic_bad_decision`` (not a field error)."""

    def __init__(self, **kwargs):
        super().__init__(choices=DECISIONS, **kwargs)

    def to_internal_value(self, data):
        if not isinstance(data, str) or data not in DECISIONS:
            raise ApiError(
                "ahentic_bad_decision", f"decision must be one of {', '.join(DECISIONS)}."
            )
        return data


class ApprovalSerializer(serializers.Serializer):
    decision = DecisionField()
    reason = StrictCharField(required=False, allow_blank=True, max_length=2000)
    input = JSONObjectField(required=False, allow_null=True)


class BrowserResultSerializer(serializers.Serializer):
    callId = StrictCharField(max_length=128)
    result = serializers.JSONField(required=False, allow_null=True)
    error = StrictCharField(required=False, allow_blank=True, max_length=10000, allow_null=True)

    def validate(self, attrs):
        if "result" not in attrs and attrs.get("error") is None:
            raise serializers.ValidationError("Send either result or error.")
        return attrs


class ActionSerializer(serializers.Serializer):
    name = StrictCharField(max_length=64)
    input = JSONObjectField(required=False, allow_null=True)


class MessageEditSerializer(serializers.Serializer):
    content = StrictCharField(
        allow_blank=True, trim_whitespace=True, help_text="The message's new text."
    )


class CancelSerializer(serializers.Serializer):
    # Stop keeps what the user saw: the reply being streamed is kept up to this text (its
    # common start with what was streamed), not whatever the model streamed after it.
    shown = StrictCharField(
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        max_length=1_000_000,
        help_text="The streamed reply's text the client showed when Stop was pressed.",
    )


# --- output: what the routes answer, rendered and documented by the same classes -----------------
#
# Every timestamp is ISO 8601 in UTC with a ``Z`` and every policy is explicit, so a host's
# REST_FRAMEWORK (DATETIME_FORMAT) or TIME_ZONE cannot change the payload's bytes.


class IsoDateTimeField(serializers.DateTimeField):
    def __init__(self, **kwargs):
        super().__init__(format=ISO_8601, default_timezone=UTC, **kwargs)


class ErrorSerializer(serializers.Serializer):
    """Every error body (``errors.exception_handler`` builds it)."""

    code = serializers.CharField(help_text="Stable code, for example ahentic_invalid_input.")
    detail = serializers.CharField(help_text="Human text.")
    fields = serializers.DictField(
        required=False, help_text="Field errors of a 400 (camelCase field names)."
    )

    class Meta:
        ref_name = "Error"


ROLE_BY_KIND = {
    Event.Kind.USER_MESSAGE: "user",
    Event.Kind.AGENT_MESSAGE: "assistant",
    Event.Kind.TOOL_CALL: "assistant",
    Event.Kind.TOOL_RESPONSE: "tool",
    Event.Kind.SYSTEM_MESSAGE: "event",
    Event.Kind.SUBAGENT_MESSAGE: "user",
}
ROLES = ["user", "assistant", "tool", "event"]
# Tool calls and results longer than this are cut in the verbose view.
VERBOSE_CUT = 500
TOOL_RESULT_META_KEYS = (
    "ok",
    "error",
    "failure",
    "browser",
    "approved",
    "artifactKey",
    "denied",
    "skipped",
    "reason",
    "unchanged",
)


class MessageSerializer(serializers.Serializer):
    """One transcript event as the sidebar shows it in ``context["view_mode"]``."""

    id = serializers.IntegerField(source="pk")
    seq = serializers.IntegerField()
    role = serializers.SerializerMethodField()
    kind = serializers.ChoiceField(choices=Event.Kind.choices)
    content = serializers.SerializerMethodField()
    createdAt = IsoDateTimeField(source="created_at")
    meta = serializers.SerializerMethodField()

    class Meta:
        ref_name = "Message"

    @extend_schema_field(serializers.ChoiceField(choices=ROLES))
    def get_role(self, event: Event) -> str:
        return ROLE_BY_KIND.get(event.kind, "event")

    def get_content(self, event: Event) -> str:
        view_mode = self.context["view_mode"]
        if view_mode == Session.ViewMode.BASIC and event.kind == Event.Kind.TOOL_RESPONSE:
            return ""  # a decision line: the result itself is tool traffic
        if (
            view_mode == Session.ViewMode.VERBOSE
            and event.kind in (Event.Kind.TOOL_CALL, Event.Kind.TOOL_RESPONSE)
            and len(event.content) > VERBOSE_CUT
        ):
            return event.content[:VERBOSE_CUT] + "…"
        if event.kind == Event.Kind.AGENT_MESSAGE and (event.payload or {}).get("blocks"):
            return turn_content(event.payload["blocks"], event.content)
        if view_mode == Session.ViewMode.BASIC and event.kind == Event.Kind.SYSTEM_MESSAGE:
            meta = (event.payload or {}).get("meta") or {}
            if meta.get("type") == "artifact":
                return words.artifact_sentence(meta) or event.content
        return event.content

    def get_meta(self, event: Event) -> dict[str, Any]:
        meta = self.kind_meta(event)
        attached = (event.payload or {}).get("attachments")
        if attached:
            meta["attachments"] = attachments_json(self, attached, event.session_id)
        if event.superseded_by is not None:
            # An earlier attempt, set aside by the retry or edit that started this run.
            meta["supersededBy"] = event.superseded_by
        return meta

    def kind_meta(self, event: Event) -> dict[str, Any]:
        payload = event.payload or {}
        if event.kind == Event.Kind.TOOL_CALL:
            return {
                "tool": payload.get("tool"),
                "label": label_for(payload.get("tool") or ""),
                "callId": event.tool_use_id,
                "input": payload.get("input"),
            }
        if event.kind == Event.Kind.TOOL_RESPONSE:
            meta = {
                "tool": payload.get("tool"),
                "label": label_for(payload.get("tool") or ""),
                "callId": event.tool_use_id,
            }
            meta.update({k: payload[k] for k in TOOL_RESULT_META_KEYS if k in payload})
            return meta
        if event.kind == Event.Kind.SUBAGENT_MESSAGE:
            return {
                "source": "subagent",
                "name": payload.get("name", ""),
                **payload.get("meta", {}),
            }
        meta = dict(payload.get("meta", {}))
        if event.kind == Event.Kind.AGENT_MESSAGE and payload.get("blocks"):
            meta.update(turn_meta(payload["blocks"], self.context["view_mode"]))
        return meta


SAFE_LINK_SCHEMES = ("http://", "https://")


def turn_sources(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pages a reply's text cites, numbered from 1 in order of first citation (links with
    another scheme than http(s) are left out)."""
    sources: dict[str, dict[str, Any]] = {}
    for block in blocks:
        for citation in block.get("citations") or [] if block.get("type") == "text" else []:
            url = str(citation.get("url") or "")
            if url.lower().startswith(SAFE_LINK_SCHEMES) and url not in sources:
                sources[url] = {
                    "index": len(sources) + 1,
                    "url": url,
                    "title": citation.get("title") or url,
                    "citedText": citation.get("cited_text", ""),
                }
    return list(sources.values())


def turn_content(blocks: list[dict[str, Any]], content: str) -> str:
    """A stored turn's reply text with a ``[n]`` marker after each cited passage (``n`` the
    source's number in ``meta.citations``); the stored text when nothing is cited."""
    numbers = {s["url"]: s["index"] for s in turn_sources(blocks)}
    if not numbers:
        return content
    parts = []
    for block in blocks:
        if block.get("type") != "text":
            continue
        cited = sorted(
            {numbers[c["url"]] for c in block.get("citations") or [] if c.get("url") in numbers}
        )
        parts.append(block["text"] + "".join(f"[{n}]" for n in cited))
    return "".join(parts)


def turn_meta(blocks: list[dict[str, Any]], view_mode: str) -> dict[str, Any]:
    """What an assistant turn stored whole shows besides its text: its thinking (the summary
    the model streamed; ``redacted`` counts the blocks it withheld), the sources its text
    cites, the web searches and fetches it ran, and in the debug view every block as sent."""
    meta: dict[str, Any] = {}
    thoughts = [b.get("thinking", "") for b in blocks if b.get("type") == "thinking"]
    redacted = sum(1 for b in blocks if b.get("type") == "redacted_thinking")
    if thoughts or redacted:
        meta["thinking"] = {"text": "\n\n".join(t for t in thoughts if t), "redacted": redacted}
    sources = turn_sources(blocks)
    if sources:
        meta["citations"] = sources
    searches = [
        {"tool": b.get("name"), "input": b.get("input") or {}}
        for b in blocks
        if b.get("type") == "server_tool_use"
    ]
    if searches:
        meta["serverTools"] = searches
    if view_mode == Session.ViewMode.DEBUG:
        meta["blocks"] = blocks
    return meta


class MessagePageSerializer(serializers.Serializer):
    messages = MessageSerializer(many=True)
    hasMore = serializers.BooleanField(source="has_more")

    class Meta:
        ref_name = "MessagePage"


def attachment_url(session_id, attachment_id) -> str:
    """Where the owner reads an attachment's bytes (``GET sessions/{id}/attachments/{id}``)."""
    return reverse(
        "ahentic:session-attachment",
        kwargs={"session_id": str(session_id), "attachment_id": str(attachment_id)},
    )


class AttachmentSerializer(serializers.Serializer):
    """An attachment as the upload route and the transcript show it (from an attachment ref,
    ``sessions_app.attachments.ref``, and its session's id in ``context["session_id"]``)."""

    id = serializers.CharField()
    name = serializers.CharField()
    contentType = serializers.CharField()
    size = serializers.IntegerField()
    width = serializers.IntegerField(allow_null=True)
    height = serializers.IntegerField(allow_null=True)
    pages = serializers.IntegerField()
    url = serializers.SerializerMethodField()

    class Meta:
        ref_name = "Attachment"

    def get_url(self, item) -> str:
        return attachment_url(self.context["session_id"], item["id"])


def attachments_json(parent: serializers.Serializer, refs: list, session_id) -> list:
    """``refs`` rendered by ``AttachmentSerializer``: one list serializer per ``parent`` and
    session, built on first use (not one per row: building a serializer copies its fields)."""
    built = parent.__dict__.setdefault("_attachment_serializers", {})
    serializer = built.get(session_id)
    if serializer is None:
        serializer = built[session_id] = AttachmentSerializer(
            many=True, context={"session_id": session_id}
        )
    return serializer.to_representation(refs)


class AttachmentListSerializer(serializers.Serializer):
    attachments = AttachmentSerializer(many=True)

    class Meta:
        ref_name = "AttachmentList"


class AttachmentUploadSerializer(serializers.Serializer):
    """The upload route's multipart body (documented; the view reads ``request.FILES``)."""

    file = serializers.ListField(child=serializers.FileField())

    class Meta:
        ref_name = "AttachmentUpload"


class PendingMessageSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    content = serializers.CharField()
    sourceType = serializers.CharField(source="source_type")
    createdAt = IsoDateTimeField(source="created_at")
    attachments = serializers.SerializerMethodField()

    class Meta:
        ref_name = "PendingMessage"

    @extend_schema_field(AttachmentSerializer(many=True))
    def get_attachments(self, pending) -> list:
        refs = getattr(pending, "attachments", None) or []
        return attachments_json(self, refs, pending.session_id) if refs else []


class TraceEnvelopeSerializer(serializers.Serializer):
    """A trace row without its data (the payload's window: ``values()`` rows). The diagnostics
    export, which the admin serves without the REST layer, builds the same envelope with
    ``data`` (``diagnostics.trace_envelope``)."""

    id = serializers.IntegerField()
    at = IsoDateTimeField()
    ms = serializers.IntegerField()
    run = serializers.IntegerField()
    type = serializers.CharField()
    step = serializers.IntegerField()
    summary = serializers.CharField(allow_blank=True)

    class Meta:
        ref_name = "TraceEnvelope"


class ChatTitleField(serializers.CharField):
    """A chat's title; the default one ("New Agent", as stored) in the reader's language."""

    def to_representation(self, value):
        title = super().to_representation(value)
        return gettext(title) if title == session_services.DEFAULT_TITLE else title


class ChildSessionSerializer(serializers.Serializer):
    """A sub-agent session (a ``values()`` row with ``tokens_used``)."""

    id = serializers.UUIDField()
    title = ChatTitleField(allow_blank=True)
    status = serializers.ChoiceField(choices=Session.Status.choices)
    tokensUsed = serializers.IntegerField(source="tokens_used")

    class Meta:
        ref_name = "ChildSession"


class AgentRefSerializer(serializers.Serializer):
    """The agent a chat is with, and the version it pins."""

    slug = serializers.CharField()
    name = serializers.CharField()
    colour = serializers.CharField(allow_blank=True, help_text="#rrggbb, or blank.")
    version = serializers.IntegerField(help_text="The version number the chat pins.")

    class Meta:
        ref_name = "AgentRef"


class SessionAgentSerializer(AgentRefSerializer):
    latestVersion = serializers.IntegerField(
        source="latest_version",
        help_text=(
            "The agent's latest version number when this payload version was rendered (a "
            "new agent version does not move the session's ETag; GET agents has the current "
            "one). Above version: POST agent/latest moves the chat to it."
        ),
    )

    class Meta:
        ref_name = "SessionAgent"


class AgentChangeSerializer(serializers.Serializer):
    """A setting that differs between two versions of an agent (a key a version leaves out
    reads as the site's AHENTIC value)."""

    key = serializers.CharField(help_text="The AHENTIC key, for example MODEL or SOUL.")
    before = serializers.JSONField(allow_null=True)
    after = serializers.JSONField(allow_null=True)

    class Meta:
        ref_name = "AgentChange"


class AgentMoveSerializer(serializers.Serializer):
    """GET agent/latest: what moving the chat to its agent's latest version changes."""

    version = serializers.IntegerField(help_text="The version the chat pins now.")
    latestVersion = serializers.IntegerField(source="latest_version")
    changes = AgentChangeSerializer(many=True)

    class Meta:
        ref_name = "AgentMove"


class AgentSerializer(serializers.Serializer):
    """An agent the user may use (an ``Agent`` with ``latest_number``)."""

    slug = serializers.CharField()
    name = serializers.CharField()
    description = serializers.CharField(allow_blank=True)
    colour = serializers.CharField(allow_blank=True, help_text="#rrggbb, or blank.")
    showsOn = serializers.ChoiceField(source="shows_on", choices=Agent.Place.choices)
    isDefault = serializers.BooleanField(
        source="is_default", help_text="The agent of a chat that names none."
    )
    version = serializers.IntegerField(
        source="latest_number", allow_null=True, help_text="Its latest version number."
    )

    class Meta:
        ref_name = "Agent"


def agent_ref(row: dict[str, Any]) -> dict[str, Any] | None:
    """The ``AgentRef`` of a session list row (its ``agent_version__...`` values)."""
    if row.get("agent_version__number") is None:
        return None
    return {
        "slug": row["agent_version__agent__slug"],
        "name": row["agent_version__agent__name"],
        "colour": row["agent_version__agent__colour"],
        "version": row["agent_version__number"],
    }


class SessionRowSerializer(serializers.Serializer):
    """A row of the session list (a ``values()`` row with ``tokens_used``)."""

    id = serializers.UUIDField()
    title = ChatTitleField(allow_blank=True)
    status = serializers.ChoiceField(choices=Session.Status.choices)
    mode = serializers.ChoiceField(choices=Session.Mode.choices)
    tokensUsed = serializers.IntegerField(source="tokens_used")
    parentId = serializers.UUIDField(source="parent_id", allow_null=True)
    modifiedAt = IsoDateTimeField(
        source="updated_at", help_text="The last visible change: the chat's last activity."
    )
    createdAt = IsoDateTimeField(source="created_at")
    agent = serializers.SerializerMethodField(
        help_text="The agent and version the chat pins; null for a chat pinned to none."
    )
    match = serializers.SerializerMethodField(
        help_text="With ?q: the text around it in the newest message holding it; null when "
        "only the title matched, or without ?q."
    )

    class Meta:
        ref_name = "SessionRow"

    def get_match(self, row) -> str | None:
        text = row.get("match")
        return " ".join(text.split()) if text else None

    @extend_schema_field(AgentRefSerializer(allow_null=True))
    def get_agent(self, row) -> dict | None:
        return agent_ref(row)


class ArtifactPointerSerializer(serializers.Serializer):
    """An artifact without its body: ``store.pointer_json`` plus ``updatedAt``."""

    key = serializers.CharField()
    kind = serializers.CharField()
    status = serializers.CharField()
    title = serializers.CharField(allow_blank=True)
    bytes = serializers.IntegerField()
    blockCount = serializers.IntegerField(source="block_count")
    step = serializers.IntegerField(allow_null=True)
    updatedAt = IsoDateTimeField(source="updated_at")

    class Meta:
        ref_name = "ArtifactPointer"


class ArtifactSerializer(ArtifactPointerSerializer):
    payload = serializers.JSONField()
    source = serializers.CharField(allow_blank=True)
    createdAt = IsoDateTimeField(source="created_at")

    class Meta:
        ref_name = "Artifact"


class ArtifactListSerializer(serializers.Serializer):
    artifacts = ArtifactPointerSerializer(many=True)

    class Meta:
        ref_name = "ArtifactList"


class GoalSerializer(serializers.Serializer):
    """A goal and its shown sub-goals (``context["sub_goals"]``: parent id -> goals)."""

    id = serializers.IntegerField(source="pk")
    description = serializers.CharField()
    status = serializers.ChoiceField(choices=Goal.Status.choices)
    subGoals = serializers.SerializerMethodField()

    class Meta:
        ref_name = "Goal"

    @extend_schema_field(serializers.ListField(child=serializers.DictField()))
    def get_subGoals(self, goal: Goal) -> list:
        children = self.context["sub_goals"].get(goal.pk, [])
        if not children:
            return []
        # One list serializer per level, built on first use (not one per goal).
        if "_sub_serializer" not in self.__dict__:
            self._sub_serializer = GoalSerializer(many=True, context=self.context)
        return self._sub_serializer.to_representation(children)


class ChangeSerializer(serializers.Serializer):
    """A field the pending call changes (the approval card's before -> after diff)."""

    field = serializers.CharField()
    label = serializers.CharField(
        required=False, help_text="The field as people read it (its verbose_name)."
    )
    before = serializers.CharField(
        allow_null=True, help_text="The value now, for display; null when creating."
    )
    after = serializers.CharField(allow_null=True, help_text="The value the call saves.")
    hidden = serializers.BooleanField(
        required=False, help_text="A field the user may not read: named, values null."
    )

    class Meta:
        ref_name = "Change"


class PendingToolSerializer(serializers.Serializer):
    """The call a paused run waits on (documentation of ``pendingTool``; the payload passes
    the dict ``payload.pending_tool_json`` builds)."""

    name = serializers.CharField()
    label = serializers.CharField(help_text="The tool as people read it (not its registry name).")
    input = serializers.DictField()
    summary = serializers.CharField(allow_blank=True, help_text="What the call does, for people.")
    callId = serializers.CharField()
    runtime = serializers.CharField()
    approved = serializers.CharField(allow_null=True)
    nonPreallowable = serializers.BooleanField()
    artifactKey = serializers.CharField(allow_null=True)
    memory = serializers.DictField(allow_null=True)
    memoryError = serializers.CharField(required=False)
    changes = ChangeSerializer(
        many=True,
        allow_null=True,
        help_text="The fields the call changes, before -> after (tools with a preview that "
        "computes them, such as admin_save); null otherwise.",
    )

    class Meta:
        ref_name = "PendingTool"


@extend_schema_field(PendingToolSerializer)
class PendingToolField(serializers.DictField):
    pass


@extend_schema_field(TraceEnvelopeSerializer(many=True))
class TraceWindowField(serializers.ReadOnlyField):
    """The trace window, rendered ahead by ``TraceEnvelopeSerializer`` and cached by the
    session's trace count (``payload.trace_window``): passed through as it is."""


@extend_schema_field(MessageSerializer(many=True))
class MessageWindowField(serializers.ReadOnlyField):
    """The payload's messages, rendered ahead by ``MessageSerializer`` and cached by the
    session's edit version and last seq (``payload.messages_window``): passed through as
    they are."""


class ProgressField(serializers.DictField):
    """The worker's progress ``{label, at}``. Workers write the label in English (they serve
    no request); the run's own labels are shown here in the reader's language, a tool's
    summary inside them as the tool wrote it."""

    def to_representation(self, value):
        progress = super().to_representation(value)
        if isinstance(progress, dict) and isinstance(progress.get("label"), str):
            progress["label"] = progress_label(progress["label"])
        return progress


def progress_label(label: str) -> str:
    fixed = {
        "Thinking…": gettext("Thinking…"),
        "Resuming…": gettext("Resuming…"),
        "Recovering after the browser timed out…": gettext(
            "Recovering after the browser timed out…"
        ),
    }
    if label in fixed:
        return fixed[label]
    head, colon, summary = label.partition(": ")
    if colon and head == "Waiting for your approval":
        return gettext("Waiting for your approval: %(summary)s") % {"summary": summary}
    if colon and head == "Running in your browser":
        return gettext("Running in your browser: %(summary)s") % {"summary": summary}
    return label


class SessionPayloadSerializer(serializers.Serializer):
    """The session payload (the sidebar's poll target): a ``payload.PayloadSource``, whose
    ``session`` is the row and whose other attributes are the bounded windows read with it."""

    id = serializers.UUIDField(source="session.pk")
    title = ChatTitleField(source="session.title", allow_blank=True)
    autoTitle = serializers.BooleanField(source="session.auto_title")
    status = serializers.ChoiceField(source="session.status", choices=Session.Status.choices)
    mode = serializers.ChoiceField(source="session.mode", choices=Session.Mode.choices)
    viewMode = serializers.ChoiceField(source="session.view_mode", choices=Session.ViewMode.choices)
    parentId = serializers.UUIDField(source="session.parent_id", allow_null=True)
    agent = SessionAgentSerializer(
        allow_null=True,
        help_text="The agent and version the chat pins; null for a chat pinned to none.",
    )
    children = ChildSessionSerializer(many=True)
    messages = MessageWindowField(help_text="The last MESSAGES_WINDOW events of the view.")
    hasMore = serializers.BooleanField(source="has_more")
    pendingMessages = PendingMessageSerializer(source="pending_messages", many=True)
    trace = TraceWindowField(help_text="The last TRACE_POLL_WINDOW trace rows, without data.")
    traceCount = serializers.IntegerField(source="session.trace_count")
    progress = ProgressField(allow_null=True)
    heartbeatAt = IsoDateTimeField(source="session.heartbeat_at", allow_null=True)
    claimed = serializers.SerializerMethodField(
        help_text=(
            "Whether a worker holds the run's lease. Running and not claimed: the step waits "
            "in the queue for a worker (since heartbeatAt). Bookkeeping that does not move "
            "the version: polls carry the current value in the X-Ahentic-Claimed header."
        )
    )
    plan = serializers.DictField(allow_null=True)
    pendingTool = PendingToolField(source="pending_tool", allow_null=True)
    artifacts = ArtifactPointerSerializer(
        many=True, help_text="Pointers; with ?include=artifacts, each Artifact with its body."
    )
    goals = GoalSerializer(
        many=True, help_text="Active goals and the most recent completed ones (bounded)."
    )
    activeSkills = serializers.ListField(source="active_skills", child=serializers.CharField())
    activeWorkflow = serializers.CharField(source="active_workflow", allow_null=True)
    tokensIn = serializers.IntegerField(source="session.tokens_in")
    tokensOut = serializers.IntegerField(source="session.tokens_out")
    tokensUsed = serializers.IntegerField(source="session.tokens_used")
    cacheReadTokens = serializers.IntegerField(source="session.cache_read_tokens")
    cacheWriteTokens = serializers.IntegerField(source="session.cache_write_tokens")
    costUsd = serializers.FloatField(source="session.cost_usd", allow_null=True)
    contextUsage = serializers.DictField(source="context_usage")
    stepCount = serializers.IntegerField(source="session.step_count")
    runSeq = serializers.IntegerField(source="session.run_seq")
    lastError = serializers.CharField(source="session.last_error", allow_blank=True)
    lastErrorCode = serializers.CharField(source="session.last_error_code", allow_blank=True)
    jobResumable = serializers.BooleanField(source="session.job_resumable")
    contentWork = serializers.BooleanField(source="session.content_work")
    browserPausedAt = IsoDateTimeField(source="session.browser_paused_at", allow_null=True)
    version = serializers.IntegerField(source="session.version")
    createdAt = IsoDateTimeField(source="session.created_at")
    modifiedAt = IsoDateTimeField(source="session.updated_at")
    # Only in a 200 answer to POST messages, which sets it (absent elsewhere, so skipped).
    pendingMessage = PendingMessageSerializer(
        source="pending_message",
        required=False,
        help_text="Only in a 200 answer to POST messages: the queued message.",
    )
    # Only in the answer to POST agent/latest (absent elsewhere, so skipped).
    changes = AgentChangeSerializer(
        many=True,
        required=False,
        help_text="Only in the answer to POST agent/latest: what the move changed.",
    )

    class Meta:
        ref_name = "SessionPayload"

    @extend_schema_field(serializers.BooleanField())
    def get_claimed(self, source) -> bool:
        return bool(source.session.lease_token)

    def get_fields(self):
        fields = super().get_fields()
        if self.context.get("include_artifacts"):
            fields["artifacts"] = ArtifactSerializer(many=True)
        return fields


# The keys every payload has (``pendingMessage`` is the message route's addition).
PAYLOAD_KEYS = tuple(
    name
    for name in SessionPayloadSerializer._declared_fields
    if name not in ("pendingMessage", "changes")
)


class LiveTextSerializer(serializers.Serializer):
    text = serializers.CharField(allow_blank=True)
    run = serializers.IntegerField(allow_null=True)
    updatedAt = IsoDateTimeField(source="updated_at", allow_null=True)

    class Meta:
        ref_name = "LiveText"


class DiagnosticsSerializer(serializers.Serializer):
    """``diagnostics.session_diagnostics``: an export bundle of nested objects, the same
    document the admin's "Export diagnostics" action downloads."""

    id = serializers.UUIDField()
    title = serializers.CharField(allow_blank=True)
    exportedAt = IsoDateTimeField()
    environment = serializers.DictField()
    session = serializers.DictField()
    state = serializers.DictField()
    trace = serializers.ListField(
        child=serializers.DictField(), help_text="Every trace row with its data, oldest first."
    )

    class Meta:
        ref_name = "Diagnostics"


class ToolSerializer(serializers.Serializer):
    """A tool of the catalog (``tools.Tool``)."""

    name = serializers.CharField()
    description = serializers.CharField(allow_blank=True)
    readonly = serializers.BooleanField()
    runtime = serializers.ChoiceField(choices=["server", "browser"])
    requiresApproval = serializers.SerializerMethodField()
    nonPreallowable = serializers.BooleanField(source="non_preallowable")

    class Meta:
        ref_name = "Tool"

    def get_requiresApproval(self, tool) -> bool:
        # An input-aware policy (a callable) counts as "may ask".
        return bool(tool.requires_approval)


class CatalogItemSerializer(serializers.Serializer):
    """A skill or a workflow (``skills.catalog``)."""

    name = serializers.CharField()
    description = serializers.CharField(allow_blank=True)

    class Meta:
        ref_name = "CatalogItem"


# "in" is a Python keyword, so this shape is built with type(); fields keep their order.
TokenDaySerializer = type(
    "TokenDaySerializer",
    (serializers.Serializer,),
    {
        "__doc__": "One day of the user's token series (``TokenStatsViewSet``).",
        "__module__": __name__,
        "date": serializers.DateField(format=ISO_8601),
        "in": serializers.IntegerField(source="tokens_in"),
        "out": serializers.IntegerField(source="tokens_out"),
        "cacheRead": serializers.IntegerField(source="cache_read"),
        "cacheWrite": serializers.IntegerField(source="cache_write"),
        "total": serializers.IntegerField(),
        "costUsd": serializers.FloatField(
            source="cost",
            allow_null=True,
            help_text="0 without calls; null when a call had no price.",
        ),
        "Meta": type("Meta", (), {"ref_name": "TokenDay"}),
    },
)


@extend_schema_serializer(many=False)
class TokenSeriesSerializer(serializers.Serializer):
    series = TokenDaySerializer(many=True)

    class Meta:
        ref_name = "TokenSeries"
