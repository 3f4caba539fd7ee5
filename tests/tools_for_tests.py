"""Tools the tests give the agent (registered on import)."""

import threading

from orchestrator_app.tools import ToolError, tool

CALLS: list[dict] = []


@tool(
    name="echo",
    description="Echo the text back.",
    input_schema={
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    },
    readonly=True,
)
def echo(ctx, input):
    CALLS.append({"tool": "echo", "input": input})
    return {"ok": True, "echo": input["text"]}


@tool(
    name="notes_create",
    description="Create a note.",
    input_schema={
        "type": "object",
        "properties": {"title": {"type": "string"}},
        "required": ["title"],
    },
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


class WorkerKilled(BaseException):
    """Stands in for the worker process dying (SIGKILL, OOM): nothing in the product catches it."""


@tool(
    name="kills_worker",
    description="A mutating tool during which the worker process dies.",
    readonly=False,
    requires_approval=False,
)
def kills_worker(ctx, input):
    CALLS.append({"tool": "kills_worker", "input": input})
    raise WorkerKilled()


@tool(
    name="staff_report",
    description="A report only staff users may run.",
    readonly=True,
    permission=lambda user: user.is_staff,
)
def staff_report(ctx, input):
    CALLS.append({"tool": "staff_report", "input": input})
    return {"ok": True, "report": "secret"}


class SlowWriteGate:
    """Holds ``slow_write`` mid-execution: ``started`` is set when it runs, it waits for ``release``."""

    started = threading.Event()
    release = threading.Event()

    @classmethod
    def reset(cls) -> None:
        cls.started.clear()
        cls.release.clear()


@tool(
    name="slow_write",
    description="A mutating tool that runs until the test releases it.",
    readonly=False,
    requires_approval=False,
)
def slow_write(ctx, input):
    CALLS.append({"tool": "slow_write", "input": input})
    SlowWriteGate.started.set()
    SlowWriteGate.release.wait(30)
    return {"ok": True, "written": True}


@tool(
    name="payment_send",
    description="Send a payment. Always asks for approval.",
    input_schema={"type": "object", "properties": {"amount": {"type": "number"}}},
    readonly=False,
    non_preallowable=True,
)
def payment_send(ctx, input):
    CALLS.append({"tool": "payment_send", "input": input})
    return {"ok": True}


@tool(
    name="hangs",
    description="Never finishes on its own; its 0.2 s time limit stops it.",
    readonly=True,
    timeout=0.2,
)
def hangs(ctx, input):
    CALLS.append({"tool": "hangs", "input": input})
    threading.Event().wait(30)
    return {"ok": True, "finished": True}


@tool(
    name="lease_probe",
    description="Reports the run's lease as seen while this tool runs.",
    input_schema={
        "type": "object",
        "properties": {
            "wait_for_beat": {"type": "boolean"},
            "cancel_then_wait": {"type": "boolean"},
        },
    },
    readonly=True,
)
def lease_probe(ctx, input):
    """``wait_for_beat``: wait (at most 10 s) until the heartbeat moves ``heartbeat_at``.
    ``cancel_then_wait``: cancel the run, then wait three heartbeat intervals."""
    import time

    from django.utils import timezone

    from orchestrator_app import runs
    from sessions_app.conf import ahentic_settings
    from sessions_app.models import Session

    row = Session.objects.filter(pk=ctx.session.pk)
    out = {}
    if input.get("wait_for_beat"):
        first = row.values_list("heartbeat_at", flat=True).get()
        for _ in range(200):
            time.sleep(0.05)
            if row.values_list("heartbeat_at", flat=True).get() != first:
                out["beat"] = True
                break
        else:
            out["beat"] = False
    if input.get("cancel_then_wait"):
        runs.run_cancel(session_id=ctx.session.pk)
        out["version_after_cancel"] = row.values_list("version", flat=True).get()
        time.sleep(float(ahentic_settings.RUN_LEASE_S))
        out["version_after_wait"] = row.values_list("version", flat=True).get()
    expires = row.values_list("lease_expires_at", flat=True).get()
    out["lease_left_s"] = (expires - timezone.now()).total_seconds() if expires else None
    return out
