"""Checks every test runs (see the autouse fixtures in tests/conftest.py)."""

import os
import re
import sys

from tests.support.paths import APP_DIRS, ROOT, SESSION_WRITER

SESSION_UPDATE = re.compile(r'^\s*UPDATE\s+["`]?sessions_app_session["`]?\s', re.IGNORECASE)


class SessionUpdateOrigins:
    """Records which source file issued each UPDATE of the session table: the innermost frame
    of the project's own code (an app module, or a test setting up a state)."""

    def __init__(self):
        self.origins: list[str] = []

    def __call__(self, execute, sql, params, many, context):
        if SESSION_UPDATE.match(sql):
            frame = sys._getframe(1)
            while frame is not None:
                name = frame.f_code.co_filename
                if name.startswith(str(ROOT)) and name != __file__ and ".venv" not in name:
                    self.origins.append(name)
                    break
                frame = frame.f_back
        return execute(sql, params, many, context)

    def outside_the_writer(self) -> list[str]:
        # A data migration writes through the historical models, as migrations must.
        migration = f"{os.sep}migrations{os.sep}"
        return sorted(
            {
                o
                for o in self.origins
                if o.startswith(APP_DIRS) and o != SESSION_WRITER and migration not in o
            }
        )
