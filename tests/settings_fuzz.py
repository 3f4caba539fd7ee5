"""Settings for the live server of the API fuzzing leg (``.ci/fuzz-leg``).

The demo site with the test tools, on a fresh database: a SQLite file named by
``AHENTIC_FUZZ_DB``, or PostgreSQL (``AHENTIC_TEST_DB=postgres`` and the ``PG*`` variables,
database ``AHENTIC_FUZZ_DB``). Runs are enqueued to the ORM broker and never executed (no
worker), and the rates are off, so the fuzzer reaches the routes' own answers.
"""

import os

from tests.settings import *  # noqa: F403
from tests.settings import AHENTIC, DATABASES, Q_CLUSTER

DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
Q_CLUSTER = {**Q_CLUSTER, "sync": False}
DATABASES = {"default": {**DATABASES["default"], "NAME": os.environ["AHENTIC_FUZZ_DB"]}}
# No worker runs the MCP endpoint's calls either: it answers "still running" at once.
AHENTIC = {
    **AHENTIC,
    "THROTTLE_MESSAGES": None,
    "THROTTLE_SESSIONS": None,
    "THROTTLE_OAUTH_REGISTRATIONS": None,
    "MCP_CALL_WAIT_S": 0,
    # The MCP server fuzz_setup.py registers, and a key to store its tokens.
    "MCP_SERVERS": ["default"],
    "VAULT_KEYS": ["ZnV6ei1vbmx5LXZhdWx0LWtleS0wMTIzNDU2Nzg5YWI="],
}
