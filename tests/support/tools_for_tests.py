"""Tools the tests give the agent (registered on import)."""

import threading
import time

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
    permission=lambda user: user.is_active,  # any active user with the agent permission
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
    permission=lambda user: user.is_active,  # any active user with the agent permission
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
    permission=lambda user: user.is_active,  # any active user with the agent permission
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
    permission=lambda user: user.is_active,  # any active user with the agent permission
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
    name="sleeps",
    description="Sleeps for `seconds` (a long-running tool a test can kill the worker in).",
    input_schema={"type": "object", "properties": {"seconds": {"type": "number"}}},
    readonly=True,
    timeout=3,
)
def sleeps(ctx, input):
    CALLS.append({"tool": "sleeps", "input": input})
    time.sleep(float(input.get("seconds", 1)))
    return {"ok": True, "slept": input.get("seconds", 1)}
