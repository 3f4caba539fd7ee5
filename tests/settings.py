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
elif os.environ.get("AHENTIC_TEST_DB") == "mysql":
    # The MariaDB leg (.ci/mariadb-leg): MySQL's backend (mysqlclient) on a server it started.
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.mysql",
            "NAME": os.environ.get("MYSQL_DATABASE", "ahentic"),
            "USER": os.environ.get("MYSQL_USER", "ahentic"),
            "PASSWORD": os.environ.get("MYSQL_PASSWORD", ""),
            "HOST": os.environ.get("MYSQL_HOST", "127.0.0.1"),
            "PORT": os.environ.get("MYSQL_PORT", "3306"),
            "OPTIONS": {"charset": "utf8mb4"},
            "TEST": {"CHARSET": "utf8mb4", "COLLATION": "utf8mb4_unicode_ci"},
        }
    }
else:
    DATABASES = {"default": sqlite_database(os.path.join(_TEST_DIR, "test.sqlite3"))}
    DATABASES["default"]["TEST"] = {"NAME": os.path.join(_TEST_DIR, "test.sqlite3")}

# A second database, for tests/site/test_routers.py (a router sends every model there): the same
# server (or directory) as ``default``, a database of its own.
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    DATABASES["other"] = sqlite_database(os.path.join(_TEST_DIR, "other.sqlite3"))
    DATABASES["other"]["TEST"] = {"NAME": os.path.join(_TEST_DIR, "other.sqlite3")}
else:
    DATABASES["other"] = {
        **DATABASES["default"],
        "NAME": DATABASES["default"]["NAME"] + "_other",
        "TEST": {},
    }

# The test tools (tests/support/tools_for_tests.py) are found by tool discovery, in this process and in
# a real worker, through tests/ahentic_tools.py.
INSTALLED_APPS = [*INSTALLED_APPS, "tests.apps.AhenticTestsConfig"]  # noqa: F405

Q_CLUSTER = {**Q_CLUSTER, "sync": True}
if os.environ.get("AHENTIC_TEST_REDIS_URL"):
    # The Redis leg (.ci/redis-leg): django-q2's Redis broker instead of the ORM one (the ORM
    # broker wins when both are configured). It delivers at most once: a task a killed worker
    # had taken is gone, and ahentic_recover brings the run back.
    Q_CLUSTER = {k: v for k, v in Q_CLUSTER.items() if k != "orm"}
    Q_CLUSTER["redis"] = os.environ["AHENTIC_TEST_REDIS_URL"]
MEDIA_ROOT = os.path.join(_TEST_DIR, "media")  # attachments (default_storage)
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
AHENTIC = {
    "API_KEY": "test-key",
    "BASE_URL": "http://127.0.0.1:9",  # tests point this at their local Messages API server
    "LLM_MAX_RETRIES": 2,
    # The brain's naming call would take scripted model answers; tests that name turn it on.
    "NAME_REFRESH_INTERVAL": 0,
    # The rate limit lives in the process-wide cache: counts would leak between tests.
    # test_posting_messages_is_throttled_per_user turns it on.
    "THROTTLE_MESSAGES": None,
    "THROTTLE_SESSIONS": None,
    "THROTTLE_OAUTH_REGISTRATIONS": None,
    # The webhook tests' receiver listens on 127.0.0.1.
    "WEBHOOK_ALLOW_PRIVATE": True,
    # Webhook signing secrets are sealed by the vault (a test key; tests that need none or
    # others set their own).
    "VAULT_KEYS": ["dGVzdC1vbmx5LXZhdWx0LWtleS1ub3Qtc2VjcmV0ISE="],
}
LOGGING = {"version": 1, "disable_existing_loggers": False}
