"""The REST surface. Views are thin: scope, validate, call a service, answer the payload."""

from __future__ import annotations

import uuid
from datetime import timedelta
from decimal import Decimal

from django.core.cache import cache
from django.db.models import Sum
from django.db.models.functions import TruncDate
from django.http import HttpResponse
from django.utils import timezone
from rest_framework import status
from rest_framework.authentication import SessionAuthentication
from rest_framework.parsers import JSONParser
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.throttling import UserRateThrottle
from rest_framework.views import APIView

from artifacts_app import store
from sessions_app import runstate
from sessions_app import services as session_services
from sessions_app.conf import ahentic_settings
from sessions_app.models import Session

from .. import decisions, runs, skills
from ..diagnostics import iso, session_diagnostics
from ..models import UsageRecord
from ..tools import all_tools
from . import serializers as s
from .errors import ApiError, exception_handler, session_not_found
from .payload import artifact_pointer_json, events_for_view, message_json, session_payload
from .permissions import HasAgentPermission

# Request bodies above this are refused before parsing (browser tool results are the largest).
MAX_BODY_BYTES = 2 * 1024 * 1024


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


class AhenticView(APIView):
    """Base view: every policy set explicitly, never inherited from DRF's global defaults."""

    authentication_classes = [SessionAuthentication]
    permission_classes = [HasAgentPermission]
    parser_classes = [JSONParser]
    renderer_classes = [JSONRenderer]
    throttle_classes: list = []

    def get_exception_handler(self):
        return exception_handler

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
            )

    def sessions(self):
        return Session.objects.for_user(self.request.user)

    def get_session(self, session_id) -> Session:
        try:
            pk = uuid.UUID(str(session_id))
        except ValueError:
            raise session_not_found() from None
        session = self.sessions().filter(pk=pk).first()
        if session is None:
            raise session_not_found()
        return session

    def validated(self, serializer_class, data):
        if not isinstance(data, dict):
            raise ApiError("ahentic_invalid_input", "Expected a JSON object.")
        serializer = serializer_class(data=data)
        serializer.is_valid(raise_exception=True)
        return serializer.validated_data

    def payload_response(self, session_id, status_code=status.HTTP_200_OK, **kwargs) -> Response:
        session = self.get_session(session_id)
        return Response(
            session_payload(session, **kwargs),
            status=status_code,
            headers={"ETag": etag_for(session.version, **kwargs)},
        )


class SessionListView(AhenticView):
    def get(self, request):
        query = self.validated(s.SessionListQuerySerializer, request.query_params.dict())
        sessions = self.sessions().roots().order_by("-updated_at")
        if query.get("status"):
            sessions = sessions.filter(status=query["status"])
        rows = sessions.values(
            "id", "title", "status", "mode", "tokens_in", "tokens_out", "parent_id", "updated_at"
        )[: query["limit"]]
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
                ]
            }
        )

    def post(self, request):
        data = self.validated(s.SessionCreateSerializer, request.data)
        session = session_services.session_create(
            owner=request.user,
            title=data.get("title"),
            mode=data.get("mode", Session.Mode.AGENT),
        )
        return self.payload_response(session.pk, status.HTTP_201_CREATED)


class SessionDetailView(AhenticView):
    def get(self, request, session_id):
        try:
            pk = uuid.UUID(str(session_id))
        except ValueError:
            raise session_not_found() from None
        # The poll: one indexed read decides 304 or 200; a 200 is served from the payload cache
        # when another poll already built this version.
        row = self.sessions().filter(pk=pk).values_list("version", "heartbeat_at").first()
        if row is None:
            raise session_not_found()
        version, heartbeat_at = row
        include_artifacts = "artifacts" in request.query_params.get("include", "").split(",")
        etag = etag_for(version, include_artifacts=include_artifacts)
        # The heartbeat is bookkeeping (it does not move the ETag); the sidebar's stall
        # detection reads it here, on the 304 as on the 200.
        headers = {"ETag": etag, HEARTBEAT_HEADER: iso(heartbeat_at) or ""}
        if etag_matches(request.headers.get("If-None-Match", ""), etag):
            return Response(status=status.HTTP_304_NOT_MODIFIED, headers=headers)
        body = cached_payload_json(pk, version, include_artifacts=include_artifacts)
        if body is None:
            session = self.get_session(pk)
            body = JSONRenderer().render(
                session_payload(session, include_artifacts=include_artifacts)
            )
            cache_payload_json(pk, session.version, body, include_artifacts=include_artifacts)
            headers["ETag"] = etag_for(session.version, include_artifacts=include_artifacts)
        response = HttpResponse(body, content_type="application/json")
        for name, value in headers.items():
            response[name] = value
        return response

    def patch(self, request, session_id):
        session = self.get_session(session_id)
        data = self.validated(s.SessionUpdateSerializer, request.data)
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

    def delete(self, request, session_id):
        session = self.get_session(session_id)
        runs.run_cancel(session_id=session.pk)
        session_services.session_delete(session_id=session.pk)
        return Response(status=status.HTTP_204_NO_CONTENT)


class SessionMessagesView(AhenticView):
    def get(self, request, session_id):
        session = self.get_session(session_id)
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


class SessionDiagnosticsView(AhenticView):
    def get(self, request, session_id):
        return Response(session_diagnostics(self.get_session(session_id)))


class TokenStatsView(AhenticView):
    """Daily token series of the requesting user's model calls, zero-filled, oldest first."""

    def get(self, request):
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
            # A day without calls costs 0; a day whose calls have no price is null.
            cost: Decimal | None = row.get("cost") if row else Decimal(0)
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


class MessageThrottle(UserRateThrottle):
    """Per-user rate for POST messages, from ``AHENTIC["THROTTLE_MESSAGES"]``."""

    scope = "ahentic_messages"

    def get_rate(self):
        return ahentic_settings.THROTTLE_MESSAGES


class SessionMessagePostView(SessionMessagesView):
    def get_throttles(self):
        if self.request.method == "POST" and ahentic_settings.THROTTLE_MESSAGES:
            return [MessageThrottle()]
        return []

    def post(self, request, session_id):
        session = self.get_session(session_id)
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
        response.data["pendingMessage"] = {
            "id": pending.pk,
            "content": pending.content,
            "sourceType": pending.source_type,
            "createdAt": iso(pending.created_at),
        }
        return response


class PendingMessageView(AhenticView):
    def delete(self, request, session_id, pending_id):
        session = self.get_session(session_id)
        if not pending_id.isdigit() or not session_services.pending_message_recall(
            session_id=session.pk, pending_id=int(pending_id)
        ):
            raise ApiError(
                "ahentic_pending_not_found", "No such pending message (it may have been sent).", 404
            )
        return Response(status=status.HTTP_204_NO_CONTENT)


class SessionCancelView(AhenticView):
    def post(self, request, session_id):
        session = self.get_session(session_id)
        runs.run_cancel(session_id=session.pk)
        return self.payload_response(session.pk)


class SessionContinueView(AhenticView):
    def post(self, request, session_id):
        session = self.get_session(session_id)
        runs.run_continue(session_id=session.pk)
        return self.payload_response(session.pk)


class SessionApprovalsView(AhenticView):
    def post(self, request, session_id):
        session = self.get_session(session_id)
        data = self.validated(s.ApprovalSerializer, request.data)
        decisions.approval_decide(
            session=session,
            decision=data["decision"],
            reason=data.get("reason", ""),
            edited_input=data.get("input"),
        )
        return self.payload_response(session.pk)


class SessionBrowserResultsView(AhenticView):
    def post(self, request, session_id):
        session = self.get_session(session_id)
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


class SessionActionsView(AhenticView):
    def post(self, request, session_id):
        session = self.get_session(session_id)
        data = self.validated(s.ActionSerializer, request.data)
        decisions.action_run(session=session, name=data["name"], tool_input=data.get("input") or {})
        return self.payload_response(session.pk, status.HTTP_202_ACCEPTED)


class ToolCatalogView(AhenticView):
    def get(self, request):
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


class SessionArtifactsView(AhenticView):
    def get(self, request, session_id):
        session = self.get_session(session_id)
        return Response(
            {"artifacts": [artifact_pointer_json(a) for a in store.pointers(session.pk)]}
        )


class SessionArtifactView(AhenticView):
    def get(self, request, session_id, key):
        session = self.get_session(session_id)
        try:
            artifact = store.get(session.pk, key)
        except store.ArtifactError as exc:
            raise ApiError("artifact_missing", exc.message, 404) from None
        return Response(artifact_pointer_json(artifact, with_payload=True))


class SkillCatalogView(AhenticView):
    def get(self, request):
        return Response(skills.catalog(skills.skills()))


class WorkflowCatalogView(AhenticView):
    def get(self, request):
        return Response(skills.catalog(skills.workflows()))
