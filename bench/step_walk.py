"""The walk of one tool step through the apps' modules: which modules it enters (rooms) and how
many times it steps from one of the apps' modules into another (climbs), counted from a profile
of the real step (``tasks.run_step`` against the local Messages API server; a session of 40
events, the run's second step, which calls a tool and hands over).

A "room" is a module of ``sessions_app``, ``artifacts_app`` or ``orchestrator_app`` whose code
runs during the step; a "climb" is a call whose nearest calling frame in the apps is in another
module (a call through Django or the SDK in between counts once, from the app module that made
it). It prints the rooms, the distinct module-to-module edges, and the climbs, with the modules
entered most often. Targets (issue 38): at most 25 rooms and 55 distinct climbs (edges).

Usage: .venv/bin/python bench/step_walk.py [--verbose]
"""

from __future__ import annotations

import argparse
import os
from collections import Counter

from _setup import django_setup


def walk_one_step() -> tuple[Counter, Counter]:
    from unittest import mock

    from django.contrib.auth import get_user_model
    from django.test import override_settings

    from orchestrator_app import tasks
    from orchestrator_app.control import runs
    from orchestrator_app.testing.localapi import LocalMessagesServer, tool_call, tool_reply
    from sessions_app import services as session_services
    from sessions_app.models import Session
    from tests.support.walk import walk  # the test that pins the walk counts it alike

    server = LocalMessagesServer().start()
    settings = {
        "API_KEY": "bench",
        "BASE_URL": server.url,
        "NAME_REFRESH_INTERVAL": 0,
        "DAILY_TOKEN_LIMIT": 10**12,
        "SESSION_SOFT_TOKEN_BUDGET": None,
    }
    try:
        user, _ = get_user_model().objects.get_or_create(username="walk")
        with override_settings(AHENTIC=settings):
            session = session_services.session_create(owner=user)
            session_services.events_append(
                session_id=session.pk,
                items=[
                    {"kind": kind, "content": f"Turn {i}: the topic of the day, again. " * 3}
                    for i in range(20)
                    for kind in ("user_message", "agent_message")
                ],
            )
            dropped = mock.patch("orchestrator_app.control.queue.async_task")
            with dropped:
                runs.message_post(session=session, content="Look up the new topics.")
            for i in range(3):
                server.enqueue(tool_reply(tool_call("bench_lookup", {"key": f"new-{i}"})))
            with dropped:
                session = Session.objects.get(pk=session.pk)
                tasks.run_step(str(session.pk), session.run_seq)  # the first step: not walked
                session = Session.objects.get(pk=session.pk)
                run_seq = session.run_seq
                return walk(lambda: tasks.run_step(str(session.pk), run_seq))
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--verbose", action="store_true", help="list every room and edge")
    args = parser.parse_args()
    django_setup()
    from orchestrator_app.tools import tool

    @tool(
        name="bench_lookup",
        description="Look up a fact by key.",
        input_schema={"type": "object", "properties": {"key": {"type": "string"}}},
        readonly=True,
    )
    def bench_lookup(ctx, input):
        return {"ok": True, "key": input.get("key"), "value": "fact " * 60}

    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    rooms, edges = walk_one_step()
    print(f"rooms (modules of the apps entered): {len(rooms)}  (target <= 25)")
    print(f"climbs (distinct module-to-module calls): {len(edges)}  (target <= 55)")
    print(f"climbs taken (every such call): {sum(edges.values())}")
    shown = rooms.most_common() if args.verbose else rooms.most_common(10)
    for module, calls in shown:
        print(f"  {calls:6d}  {module}")
    if args.verbose:
        for (caller, callee), calls in sorted(edges.items()):
            print(f"  {calls:6d}  {caller} -> {callee}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
