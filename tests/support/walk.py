"""The walk of a piece of code through the apps' modules (``bench/step_walk.py`` and the test
that pins a step's walk count it alike): the modules of the three apps it enters (rooms) and
the distinct module-to-module calls between them (climbs)."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

from tests.support.paths import ROOT

APPS = ("sessions_app", "artifacts_app", "orchestrator_app")


def module_of(filename: str, cache: dict[str, str | None]) -> str | None:
    if filename not in cache:
        try:
            parts = list(Path(filename).resolve().relative_to(ROOT).with_suffix("").parts)
        except ValueError:
            parts = []
        if parts and parts[0] in APPS:
            if parts[-1] == "__init__":
                parts.pop()
            cache[filename] = ".".join(parts)
        else:
            cache[filename] = None
    return cache[filename]


def walk(step) -> tuple[Counter, Counter]:
    """The rooms and climbs of ``step()``: a call into an app module is a room's entry, and a
    climb when the nearest app frame below it is another module's."""
    rooms: Counter = Counter()
    climbs: Counter = Counter()
    cache: dict[str, str | None] = {}

    def profile(frame, event, arg):
        if event != "call":
            return
        callee = module_of(frame.f_code.co_filename, cache)
        if callee is None:
            return
        rooms[callee] += 1
        caller_frame = frame.f_back
        while caller_frame is not None:
            caller = module_of(caller_frame.f_code.co_filename, cache)
            if caller is not None:
                if caller != callee:
                    climbs[(caller, callee)] += 1
                return
            caller_frame = caller_frame.f_back

    sys.setprofile(profile)
    try:
        step()
    finally:
        sys.setprofile(None)
    return rooms, climbs
