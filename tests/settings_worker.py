"""Settings for a real ``qcluster`` worker started by the integration tests.

The test process passes, through the environment:

- ``AHENTIC_TEST_DB_NAME``: the test database the worker must share (the SQLite file path, or
  the PostgreSQL database name, ``test_<name>``); without it the usual test name is derived;
- ``AHENTIC_TEST_LLM_URL``: the base URL of the test's local Messages API server;
- ``AHENTIC_TEST_CONN_MAX_AGE``: the database's ``CONN_MAX_AGE`` (the tests' 0 unless set);
- ``AHENTIC_TEST_CONNECTIONS_LOG``: a file the worker names the thread of each database
  connection it opens in (``tests/apps.py``).

The queue is asynchronous here (the test process itself runs django-q2 in sync mode), with one
worker polling the ORM broker often, so a test's steps start quickly.
"""

import os

from tests.settings import *  # noqa: F403
from tests.settings import AHENTIC, DATABASES, Q_CLUSTER

Q_CLUSTER = {**Q_CLUSTER, "sync": False, "workers": 1, "poll": 0.1}
if os.environ.get("AHENTIC_TEST_NO_SCHEDULER"):
    # No ahentic_recover schedule (the backstop): only the lease watch can resume a run.
    Q_CLUSTER["scheduler"] = False

_default = dict(DATABASES["default"])
if os.environ.get("AHENTIC_TEST_DB_NAME"):
    _default["NAME"] = os.environ["AHENTIC_TEST_DB_NAME"]
elif not _default["ENGINE"].endswith("sqlite3"):  # PostgreSQL, MySQL/MariaDB
    _default["NAME"] = "test_" + _default["NAME"]
else:
    _default["NAME"] = _default["TEST"]["NAME"]
if os.environ.get("AHENTIC_TEST_CONN_MAX_AGE"):
    _default["CONN_MAX_AGE"] = int(os.environ["AHENTIC_TEST_CONN_MAX_AGE"])
DATABASES = {"default": _default}

AHENTIC = {
    **AHENTIC,
    "BASE_URL": os.environ.get("AHENTIC_TEST_LLM_URL", AHENTIC["BASE_URL"]),
    "API_KEY": "test-key",
    # A short lease lets a test see a killed worker's run recovered in seconds.
    "RUN_LEASE_S": int(os.environ.get("AHENTIC_TEST_RUN_LEASE_S", "60")),
}
