"""Settings for bench/throughput.py and the qcluster workers it starts (all through the
environment): the demo site on SQLite or PostgreSQL, the ORM or the Redis broker, and the
bench's local Messages API server."""

import os

from ahentic_site.settings import *  # noqa: F403
from ahentic_site.settings import INSTALLED_APPS, Q_CLUSTER, sqlite_database

DEBUG = False
if os.environ.get("BENCH_PGPORT"):
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": "ahentic_bench",
            "USER": "postgres",
            "HOST": "127.0.0.1",
            "PORT": os.environ["BENCH_PGPORT"],
        }
    }
else:
    DATABASES = {"default": sqlite_database(os.environ["BENCH_DB"])}
DATABASES["default"]["CONN_MAX_AGE"] = int(os.environ.get("BENCH_CONN_MAX_AGE", "60"))

# The test tools (``echo``) through tool discovery; the tasks' own CPU time, per worker
# process (``bench.apps.TaskTimesConfig``).
INSTALLED_APPS = [*INSTALLED_APPS, "tests.apps.AhenticTestsConfig", "bench.apps.TaskTimesConfig"]
Q_CLUSTER = {**Q_CLUSTER, "workers": 1, "poll": 0.05, "sync": False}
if os.environ.get("BENCH_REDIS_URL"):
    Q_CLUSTER = {k: v for k, v in Q_CLUSTER.items() if k != "orm"}
    Q_CLUSTER["redis"] = os.environ["BENCH_REDIS_URL"]
AHENTIC = {
    "API_KEY": "bench",
    "BASE_URL": os.environ.get("BENCH_LLM_URL", "http://127.0.0.1:9"),
    "NAME_REFRESH_INTERVAL": 0,
    "DAILY_TOKEN_LIMIT": None,
    "SESSION_SOFT_TOKEN_BUDGET": None,
    "THROTTLE_MESSAGES": None,
}
LOGGING = {"version": 1, "disable_existing_loggers": False}
