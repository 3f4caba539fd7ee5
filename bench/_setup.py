"""Shared setup for bench scripts: Django with the test settings on a throwaway SQLite file,
DEBUG off as in production (a debug cursor records every statement)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def django_setup() -> None:
    sys.path.insert(0, str(ROOT))
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
