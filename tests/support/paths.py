"""Where the checkout is, for tests that read its files (docs, sources, static files)."""

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APP_DIRS = tuple(
    str(ROOT / app) + os.sep for app in ("sessions_app", "artifacts_app", "orchestrator_app")
)
SESSION_WRITER = str(ROOT / "sessions_app" / "runstate.py")
