"""The REST surface as DRF viewsets on a router (``orchestrator_app/urls.py``).

Viewsets are thin: scope (``get_queryset``), check (permission classes), validate (input
serializers), call a service, answer the payload. Every policy is set explicitly on
``AhenticViewSet``, never inherited from DRF's global defaults.
"""

from __future__ import annotations

import base64
import binascii
import re
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.core.cache import cache
from django.db.models import Count, Q, Sum
from django.db.models.functions import TruncDate
from django.http import HttpResponse
from django.utils import timezone
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, status, viewsets
from rest_framework.decorators import action
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response

from artifacts_app import store
from sessions_app import runstate
from sessions_app import services as session_services
from sessions_app.models import LiveText, Session

from .. import decisions, runs, skills
from ..diagnostics import iso, session_diagnostics
from ..models import UsageRecord
from ..tools import all_tools
from . import schema as docs
from . import serializers as s
from .errors import ApiError, exception_handler, session_not_found
from .parsers import AhenticJSONParser
from .payload import (
    artifact_pointer_json,
    events_for_view,
    message_json,
    pending_message_json,
    session_payload,
)
from .permissions import (
    HasAgentPermission,
    IsActiveUser,
    IsSessionOwner,
    SessionAuthentication401,
    holds_agent_permission,
    may_use_agent,
)
from .throttles import RunStartThrottle, SessionCreateThrottle, throttles_for

# Request bodies above this are refused before parsing (browser tool results are the largest).
MAX_BODY_BYTES = 2 * 1024 * 1024
# Path ids are parsed strictly: ASCII digits only (``"²".isdigit()`` is True), and short
# enough to be a database integer.
PENDING_ID = re.compile(r"[0-9]{1,18}")
ARTIFACT_KEY = re.compile(r"[a-z0-9_-]{1,64}")
# PATCH refuses these by name: they are the payload's, not the client's, to set.
READ_ONLY_FIELDS = frozenset(docs.PAYLOAD_KEYS) - frozenset(s.SessionUpdateSerializer().fields)


def etag_for(version: int, *, include_artifacts: bool = False) -> str:
    # The body differs with ?include=artifacts, so the tag does too.
    return f'"v{version}{"a" if include_artifacts else ""}"'


# Response header with the session's last heartbeat (ISO 8601), on 200 and 304 polls.
HEARTBEAT_HEADER = "X-Ahentic-Heartbeat"


def _payload_cache_key(pk, version: int, include_artifacts: bool) -> str:
    return f"ahentic:payload:{pk}:{version}:{'a' if include_artifacts else ''}"


def cached_payload_json(pk, version: int, *, include_artifacts: bool) -> bytes | None:
    """The rendered payload of this session version, if a poll already built it (the
    ``default`` cache; per process with the local-memory cache, shared with Redis)."""
    return cache.get(_payload_cache_key(pk, version, include_artifacts))


def cache_payload_json(pk, version: int, body: bytes, *, include_artifacts: bool) -> None:
    # A version is never reused, so an entry is never stale for its key; the timeout only
    # bounds memory. What is not versioned (tokens, stepCount, the trace window, heartbeat)
    # is as of the version's last visible change.
    cache.set(_payload_cache_key(pk, version, include_artifacts), body, timeout=300)


def etag_matches(header: str, etag: str) -> bool:
    """If-None-Match: a list of tags, weak ones included (proxies that gzip weaken them)."""
    tags = [tag.strip().removeprefix("W/") for tag in header.split(",") if tag.strip()]
    return "*" in tags or etag in tags


@dataclass(frozen=True)
class PollRow:
    """What the poll reads of a session (``poll_read``)."""

    pk: uuid.UUID
    owner_id: Any
    version: int
    heartbeat_at: datetime | None
    held: bool  # the user holds the agent permission


def poll_read(user, pk: uuid.UUID) -> PollRow | None:
    """The addressed session of ``user``: its version and heartbeat, and whether the user
    holds the agent permission (``held_sql``), in one plain-SQL query read from the cursor:
    it runs on every poll, and a model instance cost more than the query."""
    row = (
        Session.objects.filter(pk=pk, owner_id=user.pk)
        .values_list("owner_id", "version", "heartbeat_at")
        .first()
    )
    if row is None:
        return None
    owner_id, version, heartbeat_at = row
    return PollRow(pk, owner_id, version, heartbeat_at, holds_agent_permission(user))


class AhenticViewSet(viewsets.ViewSet):
    """Base viewset: every policy set explicitly."""

    authentication_classes = [SessionAuthentication401]
    permission_classes = [HasAgentPermission]
    parser_classes = [AhenticJSONParser]
    renderer_classes = [JSONRenderer]
    throttle_classes: list = []
    schema = AutoSchema()
    # action name -> throttles (see throttles.py); a rate of None is off.
    throttles_by_action: dict[str, tuple] = {}

    def get_exception_handler(self):
        return exception_handler

    def get_throttles(self):
        return throttles_for(*self.throttles_by_action.get(self.action, ()))

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if length > MAX_BODY_BYTES:
            raise ApiError(
                "ahentic_body_too_large",
                f"Request body is {length} bytes; the limit is {MAX_BODY_BYTES}.",
                status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
            )

    def validated(self, serializer_class, data, *, strict: bool = False):
        """Validate a body or query. ``strict``: an unknown or read-only key is a 400 naming it."""
        if not isinstance(data, dict):
            raise ApiError("ahentic_invalid_input", "Expected a JSON object.")
        serializer = serializer_class(data=data)
        if strict:
            fields = {
                key: ["This field is read-only." if key in READ_ONLY_FIELDS else "Unknown field."]
                for key in data
                if key not in serializer.fields
            }
            if fields:
                raise ApiError(
                    "ahentic_invalid_input",
                    f"Not accepted here: {', '.join(sorted(fields))}.",
                    fields=fields,
                )
        serializer.is_valid(raise_exception=True)
        return serializer.validated_data


class SessionViewSet(AhenticViewSet):
    """Sessions and their sub-resources. Ownership: the queryset is the user's own sessions
    (another user's is a 404), and ``IsSessionOwner`` checks every object a route loads."""

    permission_classes = [HasAgentPermission, IsSessionOwner]
    lookup_url_kwarg = "session_id"
    lookup_value_regex = "[^/]+"
    throttles_by_action = {
        "create": (SessionCreateThrottle,),
        "message_post": (RunStartThrottle,),
        "actions": (RunStartThrottle,),
        "continue_run": (RunStartThrottle,),
    }

    def get_queryset(self):
        return Session.objects.for_user(self.request.user)

    def get_permissions(self):
        if self.action == "retrieve":
            # The poll checks the agent permission in the query that reads the version.
            return [IsActiveUser(), IsSessionOwner()]
        return super().get_permissions()

    def get_object(self, *fields: str) -> Session:
        """The addressed session (only ``fields`` when given); 404 when it is not the user's."""
        try:
            pk = uuid.UUID(str(self.kwargs[self.lookup_url_kwarg]))
        except ValueError:
            raise session_not_found() from None
        rows = self.get_queryset().filter(pk=pk)
        if fields:
            rows = rows.only(*fields)
        session = rows.first()
        if session is None:
            raise session_not_found()
        self.check_object_permissions(self.request, session)
        return session

    def payload_session(self, session_id) -> Session:
        """The user's session as its payload reads it; 404 once it is gone."""
        session = self.get_queryset().filter(pk=session_id).first()
        if session is None:
            raise session_not_found()
        return session

    def payload_response(self, session_id, status_code=status.HTTP_200_OK, **kwargs) -> Response:
        session = self.payload_session(session_id)
        return Response(
            session_payload(session, **kwargs),
            status=status_code,
            headers={"ETag": etag_for(session.version, **kwargs)},
        )

    def conditional_payload(self, session: PollRow, *, include_artifacts: bool):
        """The poll: 304 when ``If-None-Match`` holds the current version's tag, else the
        payload, served from the payload cache when another poll already built this version.
        ``session`` holds the version and heartbeat only (one indexed read)."""
        etag = etag_for(session.version, include_artifacts=include_artifacts)
        # The heartbeat is bookkeeping (it does not move the ETag); the sidebar's stall
        # detection reads it here, on the 304 as on the 200.
        headers = {"ETag": etag, HEARTBEAT_HEADER: iso(session.heartbeat_at) or ""}
        if etag_matches(self.request.headers.get("If-None-Match", ""), etag):
            # A plain response: nothing to render.
            return HttpResponse(status=status.HTTP_304_NOT_MODIFIED, headers=headers)
        body = cached_payload_json(session.pk, session.version, include_artifacts=include_artifacts)
        if body is None:
            full = self.payload_session(session.pk)
            body = JSONRenderer().render(session_payload(full, include_artifacts=include_artifacts))
            cache_payload_json(full.pk, full.version, body, include_artifacts=include_artifacts)
            headers["ETag"] = etag_for(full.version, include_artifacts=include_artifacts)
        response = HttpResponse(body, content_type="application/json")
        for name, value in headers.items():
            response[name] = value
        return response

    # --- the collection ---------------------------------------------------------------------

    @extend_schema(**docs.session_list)
    def list(self, request):
        query = self.validated(s.SessionListQuerySerializer, request.query_params.dict())
        sessions = self.get_queryset().roots().order_by("-updated_at", "-id")
        if query.get("status"):
            sessions = sessions.filter(status=query["status"])
        if query.get("cursor"):
            at, pk = decode_cursor(query["cursor"])
            sessions = sessions.filter(Q(updated_at__lt=at) | Q(updated_at=at, id__lt=pk))
        limit = query["limit"]
        rows = list(
            sessions.values(
                "id",
                "title",
                "status",
                "mode",
                "tokens_in",
                "tokens_out",
                "parent_id",
                "updated_at",
            )[: limit + 1]
        )
        has_more = len(rows) > limit
        rows = rows[:limit]
        return Response(
            {
                "sessions": [
                    {
                        "id": str(r["id"]),
                        "title": r["title"],
                        "status": r["status"],
                        "mode": r["mode"],
                        "tokensUsed": r["tokens_in"] + r["tokens_out"],
                        "parentId": str(r["parent_id"]) if r["parent_id"] else None,
                        "modifiedAt": iso(r["updated_at"]),
                    }
                    for r in rows
                ],
                "hasMore": has_more,
                "nextCursor": encode_cursor(rows[-1]) if has_more else None,
            }
        )

    @extend_schema(**docs.session_create)
    def create(self, request):
        data = self.validated(s.SessionCreateSerializer, request.data)
        session = session_services.session_create(
            owner=request.user,
            title=data.get("title"),
            mode=data.get("mode", Session.Mode.AGENT),
        )
        return self.payload_response(session.pk, status.HTTP_201_CREATED)

    # --- one session ------------------------------------------------------------------------

    @extend_schema(**docs.session_retrieve)
    def retrieve(self, request, session_id=None):
        include_artifacts = "artifacts" in request.query_params.get("include", "").split(",")
        return self.conditional_payload(self.poll_row(), include_artifacts=include_artifacts)

    def poll_row(self) -> PollRow:
        """The poll's one query (besides authentication): the session's version and heartbeat,
        and whether the user holds the agent permission (``held_sql``). 403
        without the permission and 404 for an unknown or foreign session, the same answers as
        every other route."""
        user = self.request.user
        try:
            pk = uuid.UUID(str(self.kwargs[self.lookup_url_kwarg]))
        except ValueError:
            pk = None
        session = poll_read(user, pk) if pk else None
        # An unknown or foreign session: 404 for a user who may use the agent, else 403.
        if not may_use_agent(user, held=session.held if session is not None else None):
            raise exceptions.PermissionDenied(HasAgentPermission.message)
        if session is None:
            raise session_not_found()
        self.check_object_permissions(self.request, session)
        return session

    @extend_schema(**docs.session_update)
    def partial_update(self, request, session_id=None):
        session = self.get_object()
        data = self.validated(s.SessionUpdateSerializer, request.data, strict=True)
        fields = {}
        if "title" in data:
            title = data["title"].strip()
            if not title:
                raise ApiError(
                    "ahentic_invalid_input", "Title cannot be blank.", fields={"title": ["blank"]}
                )
            fields.update(title=title, title_source=Session.TitleSource.USER)
        if "mode" in data:
            fields["mode"] = data["mode"]
        if "viewMode" in data:
            fields["view_mode"] = data["viewMode"]
        if "pageContext" in data:
            fields["page_context"] = data["pageContext"]
        if "activeSkills" in data:
            unknown = sorted(set(data["activeSkills"]) - set(skills.skills()))
            if unknown:
                raise ApiError(
                    "ahentic_unknown_skill",
                    f"Unknown skill(s): {', '.join(unknown)}. See GET skills.",
                    fields={"activeSkills": unknown},
                )
            fields["active_skills"] = list(dict.fromkeys(data["activeSkills"]))
        if "activeWorkflow" in data:
            workflow = data["activeWorkflow"] or ""
            if workflow and workflow not in skills.workflows():
                raise ApiError(
                    "ahentic_unknown_workflow",
                    f"Unknown workflow {workflow!r}. See GET workflows.",
                    fields={"activeWorkflow": [workflow]},
                )
            fields["active_workflow"] = workflow
        if fields:
            runstate.session_update(session_id=session.pk, **fields)
        return self.payload_response(session.pk)

    @extend_schema(**docs.session_destroy)
    def destroy(self, request, session_id=None):
        session = self.get_object("id", "owner_id")
        runs.run_cancel(session_id=session.pk)
        session_services.session_delete(session_id=session.pk)
        return Response(status=status.HTTP_204_NO_CONTENT)

    # --- the transcript and the queue ---------------------------------------------------------

    @extend_schema(**docs.messages_list)
    @action(detail=True, methods=["get"])
    def messages(self, request, session_id=None):
        session = self.get_object()
        query = self.validated(s.MessagesQuerySerializer, request.query_params.dict())
        view_mode = query.get("view") or session.view_mode
        limit = query["limit"]
        events = events_for_view(session.pk, view_mode)
        if "after" in query:
            # The oldest `limit` events after the cursor (paging forward).
            rows = list(events.filter(seq__gt=query["after"]).order_by("seq")[: limit + 1])
            has_more = len(rows) > limit
            rows = rows[:limit]
        else:
            # The newest `limit` events before the cursor (or overall), chronological.
            if "before" in query:
                events = events.filter(seq__lt=query["before"])
            rows = list(events.order_by("-seq")[: limit + 1])
            has_more = len(rows) > limit
            rows = list(reversed(rows[:limit]))
        return Response(
            {"messages": [message_json(e, view_mode) for e in rows], "hasMore": has_more}
        )

    @extend_schema(**docs.message_post)
    @messages.mapping.post
    def message_post(self, request, session_id=None):
        session = self.get_object()
        data = self.validated(s.MessageCreateSerializer, request.data)
        pending = runs.message_post(
            session=session,
            content=data["content"],
            mode=data.get("mode"),
            page_context=data.get("pageContext"),
            page_context_given="pageContext" in data,
            if_busy=data.get("ifBusy"),
        )
        if pending is None:
            return self.payload_response(session.pk, status.HTTP_202_ACCEPTED)
        response = self.payload_response(session.pk, status.HTTP_200_OK)
        response.data["pendingMessage"] = pending_message_json(pending)
        return response

    @extend_schema(**docs.pending_recall)
    @action(
        detail=True,
        methods=["delete"],
        url_path=r"pending-messages/(?P<pending_id>[^/]+)",
        url_name="pending-message",
    )
    def pending_recall(self, request, session_id=None, pending_id=""):
        session = self.get_object("id", "owner_id")
        if not PENDING_ID.fullmatch(pending_id) or not session_services.pending_message_recall(
            session_id=session.pk, pending_id=int(pending_id)
        ):
            raise ApiError(
                "ahentic_pending_not_found", "No such pending message (it may have been sent).", 404
            )
        return Response(status=status.HTTP_204_NO_CONTENT)

    # --- run control ------------------------------------------------------------------------

    @extend_schema(**docs.run_cancel)
    @action(detail=True, methods=["post"])
    def cancel(self, request, session_id=None):
        session = self.get_object("id", "owner_id")
        runs.run_cancel(session_id=session.pk)
        return self.payload_response(session.pk)

    @extend_schema(**docs.run_continue)
    @action(detail=True, methods=["post"], url_path="continue", url_name="continue")
    def continue_run(self, request, session_id=None):
        session = self.get_object("id", "owner_id")
        runs.run_continue(session_id=session.pk)
        return self.payload_response(session.pk)

    @extend_schema(**docs.approvals)
    @action(detail=True, methods=["post"])
    def approvals(self, request, session_id=None):
        session = self.get_object()
        data = self.validated(s.ApprovalSerializer, request.data)
        decisions.approval_decide(
            session=session,
            decision=data["decision"],
            reason=data.get("reason", ""),
            edited_input=data.get("input"),
        )
        return self.payload_response(session.pk)

    @extend_schema(**docs.browser_results)
    @action(detail=True, methods=["post"], url_path="browser-results", url_name="browser-results")
    def browser_results(self, request, session_id=None):
        session = self.get_object()
        body = request.data if isinstance(request.data, dict) else None
        if body is not None and "call_id" in body and "callId" not in body:
            body = {**body, "callId": body["call_id"]}
        data = self.validated(s.BrowserResultSerializer, body)
        decisions.browser_result_record(
            session=session,
            call_id=data["callId"],
            result=data.get("result"),
            error=data.get("error"),
        )
        return self.payload_response(session.pk)

    @extend_schema(**docs.actions)
    @action(detail=True, methods=["post"])
    def actions(self, request, session_id=None):
        session = self.get_object()
        data = self.validated(s.ActionSerializer, request.data)
        decisions.action_run(session=session, name=data["name"], tool_input=data.get("input") or {})
        return self.payload_response(session.pk, status.HTTP_202_ACCEPTED)

    # --- read-only sub-resources ------------------------------------------------------------

    @extend_schema(**docs.diagnostics)
    @action(detail=True, methods=["get"])
    def diagnostics(self, request, session_id=None):
        return Response(session_diagnostics(self.get_object()))

    @extend_schema(**docs.live_text)
    @action(detail=True, methods=["get"])
    def live(self, request, session_id=None):
        """The reply being streamed: cheap (one indexed read besides the session's), no ETag;
        shown only while the run that wrote it is the session's running run."""
        session = self.get_object("id", "owner_id", "status", "run_seq")
        live = (
            LiveText.objects.filter(session_id=session.pk, run=session.run_seq).first()
            if session.status == Session.Status.RUNNING
            else None
        )
        if live is None:
            return Response({"text": "", "run": None, "updatedAt": None})
        return Response({"text": live.text, "run": live.run, "updatedAt": iso(live.updated_at)})

    @extend_schema(**docs.artifacts_list)
    @action(detail=True, methods=["get"])
    def artifacts(self, request, session_id=None):
        session = self.get_object("id", "owner_id")
        return Response(
            {"artifacts": [artifact_pointer_json(a) for a in store.pointers(session.pk)]}
        )

    @extend_schema(**docs.artifact_detail)
    @action(
        detail=True,
        methods=["get"],
        url_path=r"artifacts/(?P<key>[^/]+)",
        url_name="artifact",
    )
    def artifact(self, request, session_id=None, key=""):
        session = self.get_object("id", "owner_id")
        if not ARTIFACT_KEY.fullmatch(key):
            raise ApiError("artifact_missing", f"No artifact with the key {key[:64]!r}.", 404)
        try:
            artifact = store.get(session.pk, key)
        except store.ArtifactError as exc:
            raise ApiError("artifact_missing", exc.message, 404) from None
        return Response(artifact_pointer_json(artifact, with_payload=True))


def encode_cursor(row: dict) -> str:
    raw = f"{row['updated_at'].isoformat()}|{row['id']}"
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, uuid.UUID]:
    """A session list cursor (opaque to clients): the last row's modification time and id."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        at, _, pk = raw.partition("|")
        moment = datetime.fromisoformat(at)
        if timezone.is_naive(moment):
            raise ValueError("naive")
        return moment, uuid.UUID(pk)
    except (ValueError, UnicodeDecodeError, binascii.Error):
        raise ApiError(
            "ahentic_invalid_input",
            "Invalid cursor: pass nextCursor from the previous page.",
            fields={"cursor": ["invalid"]},
        ) from None


class ToolViewSet(AhenticViewSet):
    """The tools catalog the user may use."""

    @extend_schema(**docs.tools_list)
    def list(self, request):
        return Response(
            [
                {
                    "name": t.name,
                    "description": t.description,
                    "readonly": t.readonly,
                    "runtime": t.runtime,
                    # Input-aware policies count as "may ask".
                    "requiresApproval": bool(t.requires_approval),
                    "nonPreallowable": t.non_preallowable,
                }
                for t in all_tools()
                if t.allowed_for(request.user)
            ]
        )


class SkillViewSet(AhenticViewSet):
    @extend_schema(**docs.skills_list)
    def list(self, request):
        return Response(skills.catalog(skills.skills()))


class WorkflowViewSet(AhenticViewSet):
    @extend_schema(**docs.workflows_list)
    def list(self, request):
        return Response(skills.catalog(skills.workflows()))


class TokenStatsViewSet(AhenticViewSet):
    """Daily token series of the requesting user's model calls, zero-filled, oldest first."""

    @extend_schema(**docs.token_stats)
    def list(self, request):
        query = self.validated(s.TokenStatsQuerySerializer, request.query_params.dict())
        days = query["days"]
        today = timezone.localdate()
        first_day = today - timedelta(days=days - 1)
        rows = (
            UsageRecord.objects.filter(user=request.user, created_at__date__gte=first_day)
            .annotate(day=TruncDate("created_at"))
            .values("day")
            .annotate(
                input=Sum("input_tokens"),
                output=Sum("output_tokens"),
                cache_read=Sum("cache_read_tokens"),
                cache_write=Sum("cache_write_tokens"),
                cost=Sum("cost_usd"),
                unpriced=Count("id", filter=Q(cost_usd__isnull=True)),
            )
        )
        by_day = {row["day"]: row for row in rows}
        series = []
        for offset in range(days):
            day = first_day + timedelta(days=offset)
            row = by_day.get(day, {})
            cache_read = row.get("cache_read") or 0
            cache_write = row.get("cache_write") or 0
            tokens_in = (row.get("input") or 0) + cache_read + cache_write
            tokens_out = row.get("output") or 0
            # A day without calls costs 0; a day with any call of unknown price is null (a
            # partial sum would read as the day's cost).
            cost: Decimal | None = Decimal(0)
            if row:
                cost = None if row["unpriced"] else row["cost"]
            series.append(
                {
                    "date": day.isoformat(),
                    "in": tokens_in,
                    "out": tokens_out,
                    "cacheRead": cache_read,
                    "cacheWrite": cache_write,
                    "total": tokens_in + tokens_out,
                    "costUsd": float(cost) if cost is not None else None,
                }
            )
        return Response({"series": series})
