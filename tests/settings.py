"""Test settings: the demo site's, with a synchronous queue and a throwaway database.

django-q2 reads Q_CLUSTER at import time, so ``sync`` must be set here, not with
override_settings. Integration tests that start a real ``qcluster`` pass their own settings
module (tests.settings_worker).
"""

import os
import tempfile

from ahentic_site.settings import *  # noqa: F403
from ahentic_site.settings import Q_CLUSTER, sqlite_database

_TEST_DIR = tempfile.mkdtemp(prefix="ahentic-test-")

if os.environ.get("AHENTIC_TEST_DB") == "postgres":
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": os.environ.get("PGDATABASE", "ahentic"),
            "USER": os.environ.get("PGUSER", "postgres"),
            "PASSWORD": os.environ.get("PGPASSWORD", ""),
            "HOST": os.environ.get("PGHOST", "127.0.0.1"),
            "PORT": os.environ.get("PGPORT", "5432"),
        }
    }
else:
    DATABASES = {"default": sqlite_database(os.path.join(_TEST_DIR, "test.sqlite3"))}
    DATABASES["default"]["TEST"] = {"NAME": os.path.join(_TEST_DIR, "test.sqlite3")}

Q_CLUSTER = {**Q_CLUSTER, "sync": True}
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
AHENTIC = {
    "API_KEY": "test-key",
    "BASE_URL": "http://127.0.0.1:9",  # tests point this at their local Messages API server
    "LLM_MAX_RETRIES": 2,
}
LOGGING = {"version": 1, "disable_existing_loggers": False}
