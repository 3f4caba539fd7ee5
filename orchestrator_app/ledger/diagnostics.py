"""The diagnostics bundle: a session's state, environment and full trace, for support.

Served to the owner by GET sessions/{id}/diagnostics and to staff by the admin's "Export
diagnostics" action (the admin does not import the REST layer, so it lives here).
"""

from __future__ import annotations

import platform
from typing import Any

import django
from django.db import connections
from django.utils import timezone

from sessions_app import agents, db
from sessions_app.conf import ahentic_settings
from sessions_app.models import Goal, Session, TraceEvent

from ..models import UsageRecord


def iso(value) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


def trace_envelope(row: TraceEvent, *, with_data: bool = False) -> dict[str, Any]:
    data = {
        "id": row.pk,
        "at": iso(row.at),
        "ms": row.ms,
        "run": row.run,
        "type": row.type,
        "step": row.step,
        "summary": row.summary,
    }
    if with_data:
        data["data"] = row.data
    return data


def session_diagnostics(session: Session) -> dict[str, Any]:
    """The diagnostics bundle: state, environment and the full trace with data.

    Served by GET sessions/{id}/diagnostics and the admin's "Export diagnostics" action.
    """
    trace = TraceEvent.objects.filter(session_id=session.pk).order_by("seq")
    last_model = (
        UsageRecord.objects.filter(session_id=session.pk)
        .order_by("-id")
        .values_list("model", flat=True)
        .first()
    )
    active_goal = session.goals.filter(parent__isnull=True, status=Goal.Status.ACTIVE).last()
    return {
        "id": str(session.pk),
        "title": session.title,
        "exportedAt": iso(timezone.now()),
        "environment": {
            "django": django.get_version(),
            "python": platform.python_version(),
            "database": connections[db.write_alias()].vendor,
            "model": agents.settings_for(session).MODEL,
            "brainModel": agents.settings_for(session).BRAIN_MODEL,
            "llmConfigured": bool(ahentic_settings.API_KEY or ahentic_settings.BASE_URL),
        },
        "session": {
            "status": session.status,
            "mode": session.mode,
            "model": last_model,
            "runs": session.run_seq,
            "stepCount": session.step_count,
            "tokensIn": session.tokens_in,
            "tokensOut": session.tokens_out,
            "tokensUsed": session.tokens_used,
            "lastError": session.last_error,
            "lastErrorCode": session.last_error_code,
            "createdAt": iso(session.created_at),
            "modifiedAt": iso(session.updated_at),
        },
        "state": {
            "pendingTool": session.pending_tool,
            "browserPausedAt": iso(session.browser_paused_at),
            "heartbeatAt": iso(session.heartbeat_at),
            "leaseExpiresAt": iso(session.lease_expires_at),
            "progress": session.progress,
            "contentWork": session.content_work,
            "jobResumable": session.job_resumable,
            "activeGoal": active_goal.description if active_goal else None,
            "plan": session.plan,
        },
        "trace": [trace_envelope(row, with_data=True) for row in trace],
    }
