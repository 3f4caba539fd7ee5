"""Shared setup for bench scripts: Django with the test settings on a throwaway SQLite file,
DEBUG off as in production (a debug cursor records every statement).

``AHENTIC_BENCH_TREE``: the source tree to import the app from instead of this checkout's (a
baseline release unpacked with ``git archive``), so one script measures both trees in turn."""

from __future__ import annotations

import importlib.util
import os
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def tree() -> Path:
    """The source tree the app is imported from: this checkout, or ``AHENTIC_BENCH_TREE``."""
    return Path(os.environ.get("AHENTIC_BENCH_TREE") or ROOT).resolve()


def in_tree(names) -> str:
    """The first of the dotted module ``names`` whose source is in the measured tree (a
    baseline release may file a module elsewhere; an editable install's finder would otherwise
    find a module of the other tree)."""
    for name in names:
        try:
            spec = importlib.util.find_spec(name)
        except ImportError:
            continue
        if spec and spec.origin and Path(spec.origin).resolve().is_relative_to(tree()):
            return name
    raise ImportError(f"none of {names} in {tree()}")


def django_setup() -> None:
    sys.path.insert(0, str(tree()))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    os.environ.setdefault("DJANGO_DEBUG", "0")
    os.environ.setdefault("AHENTIC_VAR_DIR", tempfile.mkdtemp(prefix="ahentic-bench-"))
    import django
    from django.conf import settings

    django.setup()
    # A fresh database file per bench run.
    settings.DATABASES["default"]["NAME"] = os.path.join(tempfile.mkdtemp(), "bench.sqlite3")
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def loadavg() -> str:
    """The load average (1, 5 and 15 minutes), printed beside every figure."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def spread(values: list[float], unit: str = "") -> str:
    """The median of ``values`` with their range: ``1.23x (1.10-1.40)``."""
    return f"{statistics.median(values):.2f}{unit} ({min(values):.2f}-{max(values):.2f})"


def alternate(
    rounds: int,
    baseline: str,
    measure: Callable[[str | None], dict],
    shown: Callable[[int, str, dict], None],
) -> list[dict[str, dict]]:
    """``rounds`` rounds of ``measure(None)`` (this checkout) and ``measure(baseline)`` (the
    baseline tree), the order alternating from round to round so a slow stretch of the
    machine hits both; ``shown(round_number, name, result)`` after each. Returns each round's
    ``{"this": ..., "baseline": ...}``."""
    done: list[dict[str, dict]] = []
    for number in range(rounds):
        order = [("this", None), ("baseline", baseline)]
        if number % 2:
            order.reverse()
        results = {}
        for name, source in order:
            print(f"round {number + 1} of {rounds}: {name} (load {loadavg()})...", flush=True)
            results[name] = measure(source)
            shown(number + 1, name, results[name])
        done.append(results)
    return done
