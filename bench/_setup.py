"""Shared setup for bench scripts: Django with the test settings on a throwaway SQLite file,
DEBUG off as in production (a debug cursor records every statement).

``AHENTIC_BENCH_TREE``: the source tree to import the app from instead of this checkout's (a
baseline release unpacked with ``git archive``), so one script measures both trees in turn."""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
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
