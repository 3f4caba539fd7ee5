"""The REST surface as DRF viewsets on a router (``orchestrator_app/urls.py``).

Viewsets are thin: scope (``get_queryset``), check (permission classes), validate (input
serializers), call a service, answer the payload. Every policy is set explicitly on
``AhenticViewSet``, never inherited from DRF's global defaults.
"""

from __future__ import annotations

import json
import re
import uuid
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, NamedTuple

from django.core.cache import cache
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import Count, F, Max, Q, Sum
from django.db.models.functions import TruncDate
from django.http import FileResponse, Http404, HttpResponse
from django.utils import timezone
from django.utils.cache import get_conditional_response
from django.utils.http import content_disposition_header
from django.utils.translation import gettext
from drf_spectacular.openapi import AutoSchema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.generics import get_object_or_404
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.parsers import MultiPartParser
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response

from artifacts_app import store
from sessions_app import access, agents, runstate
from sessions_app import attachments as attachment_store
from sessions_app import services as session_services
from sessions_app.models import Agent, AgentVersion, Attachment, LiveText, Session

from .. import presence, skills
from ..control import history, runs
from ..ledger.diagnostics import iso, session_diagnostics
from ..loop import decisions
from ..models import UsageRecord
from ..tools import all_tools
from . import schema as docs
from . import serializers as s
from . import uploads
from .errors import ApiError, agent_not_found, exception_handler, session_not_found
from .pagination import SessionListPagination
from .parsers import AhenticJSONParser
from .payload import events_for_view, session_payload, with_agent
from .permissions import HasAgentPermission, IsSessionOwner, SessionAuthentication401
from .throttles import RunStartThrottle, SessionCreateThrottle, throttles_for

# Request bodies above this are refused before parsing (browser tool results are the largest).
MAX_BODY_BYTES = 2 * 1024 * 1024
# Path ids are parsed strictly: ASCII digits only (``"²".isdigit()`` is True), and short
# enough to be a database integer.
PENDING_ID = re.compile(r"[0-9]{1,18}")
ARTIFACT_KEY = re.compile(r"[a-z0-9_-]{1,64}")
# PATCH refuses these by name: they are the payload's, not the client's, to set.
READ_ONLY_FIELDS = frozenset(s.PAYLOAD_KEYS) - frozenset(s.SessionUpdateSerializer().fields)


def etag_for(version: int, *, include_artifacts: bool = False) -> str:
    # The body differs with ?include=artifacts, so the tag does too.
    return f'"v{version}{"a" if include_artifacts else ""}"'


# Response header with the session's last heartbeat (ISO 8601), on 200 and 304 polls.
HEARTBEAT_HEADER = "X-Ahentic-Heartbeat"
# Response header: "1" while a worker holds the run's lease, else "0" (the payload's
# ``claimed``, current on 200 and 304 polls: a claim does not move the version either).
CLAIMED_HEADER = "X-Ahentic-Claimed"


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


class PollRow(NamedTuple):
    """What the poll reads of a session (``SessionViewSet.poll_row``)."""

    pk: uuid.UUID
    owner_id: Any
    version: int
    heartbeat_at: datetime | None
    lease_token: str  # not blank while a worker holds the run's lease

    @property
    def claimed(self) -> bool:
        return bool(self.lease_token)


# The poll's read, built once per process (lazy: each poll adds its filter and runs a clone).
# Every poll runs it, so it is as small as the ORM makes it: the primary key alone in the
# WHERE (one lookup to build), no ORDER BY (the model's default ordering was a quarter of the
# read's Python calls), and the scope of ``Session.objects.for_user`` (the owner, not deleted) checked on
# the row read (``SessionViewSet.poll_row``), not built into the query.
POLL_ROWS = Session.objects.order_by().values_list(*PollRow._fields[1:], "deleted_at")


# What a session list row shows of its agent (``serializers.agent_ref``), in the list's query.
SESSION_ROW_AGENT = (
    "agent_version__number",
    "agent_version__agent__slug",
    "agent_version__agent__name",
    "agent_version__agent__colour",
)


def json_value(value: Any) -> Any:
    """A setting's value as JSON shows it (a path or another object as its text)."""
    return json.loads(json.dumps(value, default=str))


class AhenticViewSet(viewsets.GenericViewSet):
    """Base viewset: every policy set explicitly, none read from the host's REST_FRAMEWORK."""

    authentication_classes = [SessionAuthentication401]
    permission_classes = [HasAgentPermission]
    parser_classes = [AhenticJSONParser]
    renderer_classes = [JSONRenderer]
    content_negotiation_class = DefaultContentNegotiation
    throttle_classes: list = []
    filter_backends: list = []
    pagination_class = None
    versioning_class = None
    # drf-spectacular's, set here: a host that did not configure DEFAULT_SCHEMA_CLASS still
    # serves the schema (GET schema).
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
        limit = self.body_limit()
        if length > limit:
            raise ApiError(
                "ahentic_body_too_large",
                gettext("Request body is %(size)s bytes; the limit is %(limit)s.")
                % {"size": length, "limit": limit},
                status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
            )

    def body_limit(self) -> int:
        return MAX_BODY_BYTES

    def validated(self, serializer_class, data, *, strict: bool = False):
        """Validate a body or query: its ``validated_data``. ``strict``: an unknown or
        read-only key is a 400 naming it."""
        return self.validated_serializer(serializer_class, data, strict=strict).validated_data

    def validated_serializer(self, serializer_class, data, *, strict: bool = False, instance=None):
        """The validated serializer (``get_serializer`` with ``serializer_class``)."""
        if not isinstance(data, dict):
            raise ApiError("ahentic_invalid_input", gettext("Expected a JSON object."))
        serializer = self.get_serializer(instance, data=data, serializer_class=serializer_class)
        if strict:
            fields = {
                key: [
                    gettext("This field is read-only.")
                    if key in READ_ONLY_FIELDS
                    else gettext("Unknown field.")
                ]
                for key in data
                if key not in serializer.fields
            }
            if fields:
                raise ApiError(
                    "ahentic_invalid_input",
                    gettext("Not accepted here: %(fields)s.")
                    % {"fields": ", ".join(sorted(fields))},
                    fields=fields,
                )
        serializer.is_valid(raise_exception=True)
        return serializer

    def get_serializer(self, *args, serializer_class=None, **kwargs):
        """DRF's ``get_serializer``, for ``serializer_class`` when given (a route's input or
        query serializer) else ``get_serializer_class()``."""
        if serializer_class is None:
            return super().get_serializer(*args, **kwargs)
        kwargs.setdefault("context", self.get_serializer_context())
        return serializer_class(*args, **kwargs)


class SessionViewSet(AhenticViewSet):
    """Sessions and their sub-resources. Ownership: the queryset is the user's own sessions
    (another user's is a 404), and ``IsSessionOwner`` checks every object a route loads."""

    queryset = Session.objects.all()
    serializer_class = s.SessionPayloadSerializer
    pagination_class = SessionListPagination
    permission_classes = [HasAgentPermission, IsSessionOwner]
    lookup_field = "pk"
    lookup_url_kwarg = "session_id"
    lookup_value_regex = "[^/]+"
    throttles_by_action = {
        "create": (SessionCreateThrottle,),
        "message_post": (RunStartThrottle,),
        "message_retry": (RunStartThrottle,),
        "message_edit": (RunStartThrottle,),
        "actions": (RunStartThrottle,),
        "continue_run": (RunStartThrottle,),
        "attachment_upload": (RunStartThrottle,),
    }

    def get_queryset(self):
        return Session.objects.for_user(self.request.user)

    def body_limit(self) -> int:
        if self.action == "attachment_upload":
            return attachment_store.upload_limit()
        return super().body_limit()

    def get_object(self, *fields: str) -> Session:
        """The addressed session (only ``fields`` when given); 404 when it is not the user's
        or the id is not a UUID."""
        queryset = self.get_queryset()
        if fields:
            queryset = queryset.only(*fields)
        lookup = {self.lookup_field: self.kwargs[self.lookup_url_kwarg]}
        try:
            session = get_object_or_404(queryset, **lookup)
        except Http404:
            raise session_not_found() from None
        self.check_object_permissions(self.request, session)
        return session

    def user_chat(self, *fields: str) -> Session:
        """The addressed session (only ``fields`` of it, when given), for a route that takes
        the user's words or files for a run (a message, an action, an upload): a sub-agent's
        chat is refused (its parent writes its task; retry and edit refuse it in
        ``runs.attempt_start``)."""
        session = self.get_object(*fields, "parent_id") if fields else self.get_object()
        if session.parent_id is not None:
            raise ApiError(
                "ahentic_read_only_chat",
                gettext("This is a sub-agent's chat: it is read-only. Write in the main chat."),
                status.HTTP_409_CONFLICT,
            )
        return session

    def payload_response(
        self, session_id, status_code=status.HTTP_200_OK, *, include_artifacts=False, **extra
    ) -> Response:
        """The payload of the user's session ``session_id``, with its ETag; 404 once it is
        gone. ``extra``: see ``payload.session_payload``."""
        # The primary key: one row at most, no ORDER BY or LIMIT to compile.
        rows = list(with_agent(self.get_queryset().filter(pk=session_id)))
        if not rows:
            raise session_not_found()
        session = rows[0]
        return Response(
            session_payload(session, include_artifacts=include_artifacts, **extra),
            status=status_code,
            headers={"ETag": etag_for(session.version, include_artifacts=include_artifacts)},
        )

    def conditional_payload(self, session: PollRow, *, include_artifacts: bool):
        """The poll: 304 when ``If-None-Match`` holds the current version's tag (Django's
        ``get_conditional_response``: weak tags and ``*`` match), else the payload, served
        from the payload cache when another poll already built this version. ``session``
        holds the version and heartbeat only (one indexed read)."""
        etag = etag_for(session.version, include_artifacts=include_artifacts)
        # The heartbeat is bookkeeping (it does not move the ETag); the sidebar's stall
        # detection reads it here, on the 304 as on the 200.
        heartbeat = iso(session.heartbeat_at) or ""
        claimed = "1" if session.claimed else "0"
        not_modified = get_conditional_response(self.request, etag=etag)
        if not_modified is not None:
            not_modified["ETag"] = etag
            not_modified[HEARTBEAT_HEADER] = heartbeat
            not_modified[CLAIMED_HEADER] = claimed
            return not_modified
        body = cached_payload_json(session.pk, session.version, include_artifacts=include_artifacts)
        if body is None:
            # Rendered once per version (the JSON renderer the API uses), then served as bytes.
            fresh = self.payload_response(session.pk, include_artifacts=include_artifacts)
            body = JSONRenderer().render(fresh.data)
            etag = fresh["ETag"]
            version = fresh.data["version"]
            cache_payload_json(session.pk, version, body, include_artifacts=include_artifacts)
        response = HttpResponse(body, content_type="application/json")
        response["ETag"] = etag
        response[HEARTBEAT_HEADER] = heartbeat
        response[CLAIMED_HEADER] = claimed
        return response

    # --- the collection ---------------------------------------------------------------------

    @docs.described(docs.session_list)
    def list(self, request):
        query = self.validated(s.SessionListQuerySerializer, request.query_params.dict())
        sessions = self.get_queryset().roots()
        if query.get("status"):
            sessions = sessions.filter(status=query["status"])
        if query.get("agent"):
            sessions = sessions.filter(agent_version__agent__slug=query["agent"])
        columns = ["id", "title", "status", "mode", "tokens_used", "parent_id"]
        columns += ["updated_at", "created_at", *SESSION_ROW_AGENT]
        if query.get("q"):
            sessions = sessions.search(query["q"])
            columns.append("match")
        rows = self.paginate_queryset(
            sessions.annotate(tokens_used=F("tokens_in") + F("tokens_out")).values(*columns)
        )
        return self.get_paginated_response(s.SessionRowSerializer(rows, many=True).data)

    @docs.described(docs.session_create)
    def create(self, request):
        serializer = self.validated_serializer(s.SessionCreateSerializer, request.data)
        self.perform_create(serializer)
        return self.payload_response(serializer.instance.pk, status.HTTP_201_CREATED)

    def perform_create(self, serializer):
        serializer.save(owner=self.request.user)

    # --- one session ------------------------------------------------------------------------

    @docs.described(docs.session_retrieve)
    def retrieve(self, request, session_id=None):
        include_artifacts = "artifacts" in request.query_params.get("include", "").split(",")
        session = self.poll_row()
        # The owner saw the chat now: no mail about an approval waiting there (one cache set).
        presence.seen(session.pk)
        return self.conditional_payload(session, include_artifacts=include_artifacts)

    def poll_row(self) -> PollRow:
        """The poll's one query (besides authentication; the agent permission is cached): the
        session's version, heartbeat and lease. 404 for an unknown or foreign session, or an
        id that is not a UUID."""
        try:
            # Parsed as ``UUIDField`` parses it, so the id keys the caches in one spelling.
            pk = uuid.UUID(self.kwargs[self.lookup_url_kwarg])
        except ValueError:  # not a UUID
            raise session_not_found() from None
        rows = list(POLL_ROWS.filter(pk=pk))
        # ``Session.objects.for_user``'s scope: the user's own, not deleted (a chat in the
        # trash is a 404 like another user's).
        if not rows or rows[0][-1] is not None:
            raise session_not_found()
        session = PollRow(pk, *rows[0][:-1])
        # The owner (``IsSessionOwner``: another user's session is the same 404).
        self.check_object_permissions(self.request, session)
        return session

    @docs.described(docs.session_update)
    def partial_update(self, request, session_id=None):
        session = self.get_object()
        serializer = self.validated_serializer(
            s.SessionUpdateSerializer, request.data, strict=True, instance=session
        )
        self.perform_update(serializer)
        return self.payload_response(session.pk)

    def perform_update(self, serializer):
        if serializer.validated_data:
            runstate.session_update(session_id=serializer.instance.pk, **serializer.validated_data)

    @docs.described(docs.session_destroy)
    def destroy(self, request, session_id=None):
        session = self.get_object("id", "owner_id")
        history.chat_delete(session_id=session.pk)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @docs.described(docs.session_restore)
    @action(detail=True, methods=["post"], url_path="restore", url_name="restore")
    def restore(self, request, session_id=None):
        pk = self.kwargs[self.lookup_url_kwarg]
        try:
            deleted = Session.objects.deleted_for_user(request.user).filter(pk=pk).first()
        except DjangoValidationError:  # not a UUID
            raise session_not_found() from None
        if deleted is not None:
            self.check_object_permissions(request, deleted)
            if not history.chat_restore(session_id=deleted.pk):
                raise ApiError(
                    "ahentic_restore_expired",
                    gettext("This chat was deleted too long ago to be restored."),
                    status.HTTP_410_GONE,
                )
        # A chat that is not deleted answers its payload (a second undo changes nothing).
        return self.payload_response(pk)

    # --- the agent version the chat pins ----------------------------------------------------

    def agent_move(self, session: Session) -> tuple[AgentVersion, AgentVersion, list[dict]]:
        """The version ``session`` pins, its agent's latest, and what differs between them.
        404 ``ahentic_agent_not_found`` for a chat pinned to none, or whose agent the user may
        no longer use (inactive, permission, groups)."""
        current = session.agent_version
        if current is None or not access.may_use(self.request.user, current.agent):
            raise agent_not_found()
        latest = agents.latest_version(current.agent)
        changes = [
            {"key": key, "before": json_value(before), "after": json_value(after)}
            for key, before, after in agents.config_diff(current.config, latest.config)
        ]
        return current, latest, changes

    def agent_session(self) -> Session:
        session = self.get_object("id", "owner_id", "status", "agent_version")
        # One query for the pinned version and its agent (``only`` defers the rest).
        session.agent_version = (
            AgentVersion.objects.select_related("agent").filter(pk=session.agent_version_id).first()
        )
        return session

    @docs.described(docs.agent_latest)
    @action(detail=True, methods=["get"], url_path="agent/latest", url_name="agent-latest")
    def agent_latest(self, request, session_id=None):
        current, latest, changes = self.agent_move(self.agent_session())
        move = {"version": current.number, "latest_version": latest.number, "changes": changes}
        return Response(s.AgentMoveSerializer(move).data)

    @docs.described(docs.agent_latest_move)
    @agent_latest.mapping.post
    def agent_latest_move(self, request, session_id=None):
        session = self.agent_session()
        current, latest, changes = self.agent_move(session)
        if session.status in Session.LIVE or (
            latest.pk != current.pk
            and not runstate.agent_version_set(session.pk, latest.pk, current.pk)
        ):
            raise ApiError(
                "ahentic_session_busy",
                gettext("A run is in progress: the chat moves to the latest version once it ends."),
                409,
            )
        return self.payload_response(session.pk, changes=changes)

    # --- the transcript and the queue ---------------------------------------------------------

    @docs.described(docs.messages_list)
    @action(detail=True, methods=["get"])
    def messages(self, request, session_id=None):
        session = self.get_object()
        query = self.validated(s.MessagesQuerySerializer, request.query_params.dict())
        view_mode = query.get("view") or session.view_mode
        limit = query["limit"]
        events = events_for_view(session.pk, view_mode)
        if "before" in query:
            events = events.filter(seq__lt=query["before"])
        if "after" in query:
            # The oldest `limit` events after the cursor (paging forward; below `before` too
            # when both are given).
            rows = list(events.filter(seq__gt=query["after"]).order_by("seq")[: limit + 1])
            has_more = len(rows) > limit
            rows = rows[:limit]
        else:
            # The newest `limit` events before the cursor (or overall), chronological.
            rows = list(events.order_by("-seq")[: limit + 1])
            has_more = len(rows) > limit
            rows = list(reversed(rows[:limit]))
        page = {"messages": rows, "has_more": has_more}
        return Response(s.MessagePageSerializer(page, context={"view_mode": view_mode}).data)

    @docs.described(docs.message_post)
    @messages.mapping.post
    def message_post(self, request, session_id=None):
        session = self.user_chat()
        data = self.validated(s.MessageCreateSerializer, request.data)
        pending = runs.message_post(
            session=session,
            content=data["content"],
            mode=data.get("mode"),
            page_context=data.get("pageContext"),
            page_context_given="pageContext" in data,
            if_busy=data.get("ifBusy"),
            attachments=data.get("attachments") or [],
            browser=True,  # the chat API's runs: the sidebar serves browser tools
        )
        if pending is None:
            return self.payload_response(session.pk, status.HTTP_202_ACCEPTED)
        return self.payload_response(session.pk, status.HTTP_200_OK, pending_message=pending)

    @docs.described(docs.message_retry)
    @action(detail=True, methods=["post"], url_path="retry", url_name="retry")
    def message_retry(self, request, session_id=None):
        session = self.get_object()
        runs.message_retry(session=session, browser=True)
        return self.payload_response(session.pk, status.HTTP_202_ACCEPTED)

    @docs.described(docs.message_edit)
    @action(
        detail=True,
        methods=["post"],
        url_path=r"messages/(?P<seq>[^/]+)/edit",
        url_name="message-edit",
    )
    def message_edit(self, request, session_id=None, seq=""):
        session = self.get_object()
        data = self.validated(s.MessageEditSerializer, request.data)
        if not PENDING_ID.fullmatch(seq):
            raise ApiError(
                "ahentic_message_not_found", gettext("No such message in this chat."), 404
            )
        runs.message_edit(session=session, seq=int(seq), content=data["content"], browser=True)
        return self.payload_response(session.pk, status.HTTP_202_ACCEPTED)

    @docs.described(docs.pending_recall)
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
                "ahentic_pending_not_found",
                gettext("No such pending message (it may have been sent)."),
                404,
            )
        return Response(status=status.HTTP_204_NO_CONTENT)

    # --- attachments ------------------------------------------------------------------------

    def initialize_request(self, request, *args, **kwargs):
        drf_request = super().initialize_request(request, *args, **kwargs)
        if self.action == "attachment_upload":
            # Before anything reads the body (the CSRF check of session authentication does).
            self.upload_handler = uploads.install(request)
        return drf_request

    @docs.described(docs.attachment_upload)
    @action(
        detail=True,
        methods=["post"],
        url_path="attachments",
        url_name="attachments",
        parser_classes=[MultiPartParser],
    )
    def attachment_upload(self, request, session_id=None):
        session = self.user_chat("id", "owner_id")
        try:
            stored = attachment_store.store_uploads(
                session_id=session.pk, files=uploads.received(request, self.upload_handler)
            )
        finally:
            self.upload_handler.discard()  # the temporary files
        refs = [attachment_store.ref(row) for row in stored]
        body = s.AttachmentListSerializer(
            {"attachments": refs}, context={"session_id": session.pk}
        ).data
        return Response(body, status=status.HTTP_201_CREATED)

    def addressed_attachment(self, session: Session, attachment_id: str) -> Attachment:
        try:
            key = uuid.UUID(attachment_id)
        except ValueError:
            key = None
        attachment = (
            Attachment.objects.filter(session_id=session.pk, pk=key).first() if key else None
        )
        if attachment is None:
            raise ApiError(
                "ahentic_attachment_not_found", gettext("No such attachment in this chat."), 404
            )
        return attachment

    @docs.described(docs.attachment_content)
    @action(
        detail=True,
        methods=["get"],
        url_path=r"attachments/(?P<attachment_id>[^/]+)",
        url_name="attachment",
    )
    def attachment(self, request, session_id=None, attachment_id=""):
        session = self.get_object("id", "owner_id")
        attachment = self.addressed_attachment(session, attachment_id)
        try:
            handle = attachment_store.storage().open(attachment.storage_name, "rb")
        except OSError:
            raise ApiError(
                "ahentic_attachment_not_found", gettext("The attachment's file is gone."), 404
            ) from None
        response = FileResponse(handle, content_type=attachment.content_type)
        response["Content-Length"] = str(attachment.size)
        response["Content-Disposition"] = content_disposition_header(False, attachment.name)
        response["X-Content-Type-Options"] = "nosniff"
        # A PDF's scripts, or an image opened as a page, never run on the site's origin.
        response["Content-Security-Policy"] = "sandbox"
        # The bytes of an attachment never change; only its owner may read them.
        response["Cache-Control"] = "private, max-age=86400"
        return response

    @docs.described(docs.attachment_delete)
    @attachment.mapping.delete
    def attachment_delete(self, request, session_id=None, attachment_id=""):
        session = self.get_object("id", "owner_id")
        attachment = self.addressed_attachment(session, attachment_id)
        if not attachment_store.unsent_delete(session_id=session.pk, attachment_id=attachment.pk):
            raise ApiError(
                "ahentic_attachment_sent",
                gettext("This attachment was sent with a message; delete the chat to delete it."),
                409,
            )
        return Response(status=status.HTTP_204_NO_CONTENT)

    # --- run control ------------------------------------------------------------------------

    @docs.described(docs.run_cancel)
    @action(detail=True, methods=["post"])
    def cancel(self, request, session_id=None):
        session = self.get_object("id", "owner_id")
        data = self.validated(s.CancelSerializer, request.data)
        runs.run_cancel(session_id=session.pk, shown=data.get("shown"))
        return self.payload_response(session.pk)

    @docs.described(docs.run_continue)
    @action(detail=True, methods=["post"], url_path="continue", url_name="continue")
    def continue_run(self, request, session_id=None):
        session = self.get_object("id", "owner_id")
        runs.run_continue(session_id=session.pk, user=request.user, browser=True)
        return self.payload_response(session.pk)

    @docs.described(docs.approvals)
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

    @docs.described(docs.browser_results)
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

    @docs.described(docs.actions)
    @action(detail=True, methods=["post"])
    def actions(self, request, session_id=None):
        session = self.user_chat()
        data = self.validated(s.ActionSerializer, request.data)
        decisions.action_run(
            session=session, name=data["name"], tool_input=data.get("input") or {}, browser=True
        )
        return self.payload_response(session.pk, status.HTTP_202_ACCEPTED)

    # --- read-only sub-resources ------------------------------------------------------------

    @docs.described(docs.diagnostics)
    @action(detail=True, methods=["get"])
    def diagnostics(self, request, session_id=None):
        return Response(s.DiagnosticsSerializer(session_diagnostics(self.get_object())).data)

    @docs.described(docs.live_text)
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
            live = {"text": "", "run": None, "updated_at": None}
        return Response(s.LiveTextSerializer(live).data)

    @docs.described(docs.artifacts_list)
    @action(detail=True, methods=["get"])
    def artifacts(self, request, session_id=None):
        session = self.get_object("id", "owner_id")
        artifacts = {"artifacts": store.pointers(session.pk)}
        return Response(s.ArtifactListSerializer(artifacts).data)

    @docs.described(docs.artifact_detail)
    @action(
        detail=True,
        methods=["get"],
        url_path=r"artifacts/(?P<key>[^/]+)",
        url_name="artifact",
    )
    def artifact(self, request, session_id=None, key=""):
        session = self.get_object("id", "owner_id")
        if not ARTIFACT_KEY.fullmatch(key):
            raise ApiError(
                "artifact_missing", gettext("No artifact with the key %r.") % key[:64], 404
            )
        try:
            artifact = store.get(session.pk, key)
        except store.ArtifactError as exc:
            raise ApiError("artifact_missing", exc.message, 404) from None
        return Response(s.ArtifactSerializer(artifact).data)


class AgentViewSet(AhenticViewSet):
    """The agents the user may use (``agents.usable_agents``); any other is a 404."""

    serializer_class = s.AgentSerializer
    lookup_field = "slug"
    lookup_url_kwarg = "slug"
    lookup_value_regex = "[^/]+"

    def with_latest(self, found: list[Agent]) -> list[Agent]:
        """``found``, each with ``latest_number`` (one query for all)."""
        latest = dict(
            AgentVersion.objects.filter(agent__in=[agent.pk for agent in found])
            .values_list("agent_id")
            .annotate(last=Max("number"))
        )
        for agent in found:
            agent.latest_number = latest.get(agent.pk)
        return found

    @docs.described(docs.agents_list)
    def list(self, request):
        query = self.validated(s.AgentListQuerySerializer, request.query_params.dict())
        found = agents.usable_agents(request.user, query.get("place"))
        return Response(self.get_serializer(self.with_latest(found), many=True).data)

    @docs.described(docs.agent_retrieve)
    def retrieve(self, request, slug=None):
        agent = Agent.objects.filter(slug=slug).first()
        if agent is None or not access.may_use(request.user, agent):
            raise agent_not_found()
        return Response(self.get_serializer(self.with_latest([agent])[0]).data)


class ToolViewSet(AhenticViewSet):
    """The tools catalog the user may use."""

    serializer_class = s.ToolSerializer

    @docs.described(docs.tools_list)
    def list(self, request):
        tools = [t for t in all_tools() if t.allowed_for(request.user)]
        return Response(self.get_serializer(tools, many=True).data)


class SkillViewSet(AhenticViewSet):
    serializer_class = s.CatalogItemSerializer

    @docs.described(docs.skills_list)
    def list(self, request):
        return Response(self.get_serializer(skills.catalog(skills.skills()), many=True).data)


class WorkflowViewSet(AhenticViewSet):
    serializer_class = s.CatalogItemSerializer

    @docs.described(docs.workflows_list)
    def list(self, request):
        return Response(self.get_serializer(skills.catalog(skills.workflows()), many=True).data)


class TokenStatsViewSet(AhenticViewSet):
    """Daily token series of the requesting user's model calls, zero-filled, oldest first."""

    serializer_class = s.TokenSeriesSerializer

    @docs.described(docs.token_stats)
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
                    "date": day,
                    "tokens_in": tokens_in,
                    "tokens_out": tokens_out,
                    "cache_read": cache_read,
                    "cache_write": cache_write,
                    "total": tokens_in + tokens_out,
                    "cost": cost,
                }
            )
        return Response(self.get_serializer({"series": series}).data)
