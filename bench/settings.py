"""Settings for bench/poll.py: the demo site with DEBUG off, a fixed SQLite file (every
gunicorn worker opens the same one) and a bare authenticated DRF view as the baseline."""

import os

from ahentic_site.settings import *  # noqa: F403
from ahentic_site.settings import sqlite_database

DEBUG = False
ALLOWED_HOSTS = ["*"]
ROOT_URLCONF = "bench.urls"
DATABASES = {"default": sqlite_database(os.environ["AHENTIC_BENCH_DB"])}
DATABASES["default"]["CONN_MAX_AGE"] = 60
if os.environ.get("AHENTIC_BENCH_NO_CACHE") == "1":
    # Every 200 builds the payload (the worst case: a new version on every poll); the rest of
    # the cache (the permission answers) works as usual.
    CACHES = {"default": {"BACKEND": "bench.caches.PayloadMissCache"}}
LOGGING = {"version": 1, "disable_existing_loggers": False}
