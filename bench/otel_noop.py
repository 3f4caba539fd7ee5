"""What the app's OpenTelemetry calls cost a tool step without an SDK (the API's no-op tracer).

Times the telemetry calls one tool step makes (its ``invoke_agent`` span, a ``chat`` span with
its result and metrics, the spend, an ``execute_tool`` span with its decision and result, the
next task's trace context), nothing else, best of 5 rounds; compare with the step's own CPU
(``bench/step_overhead.py``).

Usage: .venv/bin/python bench/otel_noop.py
"""

from __future__ import annotations

import os
import time
from types import SimpleNamespace

from _setup import ROOT

ROUNDS = 20_000


def main() -> None:
    import sys

    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()
    from orchestrator_app import telemetry

    result = SimpleNamespace(
        model="m",
        stop_reason="tool_use",
        input_tokens=1,
        output_tokens=2,
        cache_read_tokens=0,
        cache_write_tokens=0,
        request_id="r",
        content=[],
    )

    def one_step() -> None:
        with telemetry.step_span("session", 1, None, "default"):
            with telemetry.chat_span("m", "session", dict) as chat:
                chat.result(result)
            telemetry.spent("default", 0.01)
            with telemetry.tool_span("echo", "toolu_1", dict):
                telemetry.tool_decision("not_required")
                telemetry.tool_result({"ok": True}, True)
            telemetry.task_context()

    for _ in range(1000):
        one_step()
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(ROUNDS):
            one_step()
        best = min(best, time.perf_counter() - started)
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"no-op telemetry per tool step: {best / ROUNDS * 1e6:.1f} us")


if __name__ == "__main__":
    main()
