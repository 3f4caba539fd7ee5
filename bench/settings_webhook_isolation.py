"""Settings for bench/webhook_isolation.py and the qcluster workers it starts: the throughput
bench's settings (SQLite or PostgreSQL, the ORM broker, the local Messages API server) with a
site cluster of two workers, the webhook deliveries' own cluster of one
(``BENCH_WEBHOOK_CLUSTER``; empty: the deliveries share the site's cluster), a cache all the
processes share, and the receiver on 127.0.0.1 allowed."""

import os

from bench.settings_throughput import *  # noqa: F403
from bench.settings_throughput import AHENTIC, DATABASES, Q_CLUSTER

if os.environ.get("BENCH_PGDATABASE"):
    DATABASES["default"]["NAME"] = os.environ["BENCH_PGDATABASE"]

Q_CLUSTER = {
    **Q_CLUSTER,
    "workers": 2,
    # Deliveries wait for no one: their cluster polls the queue twice a second, not twenty
    # times like the site's.
    "ALT_CLUSTERS": {
        "bench_webhooks": {"workers": 1, "timeout": 60, "retry": 90, "poll": 0.5},
    },
}
# One cache for the bench and its workers: disabling the endpoint between rounds (which drops
# the cached subscriptions) reaches every process at once.
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
        "LOCATION": os.path.join(os.path.dirname(os.environ["BENCH_DB"]), "cache"),
    }
}
AHENTIC = {
    **AHENTIC,
    "WEBHOOK_ALLOW_PRIVATE": True,
    "WEBHOOK_TIMEOUT_S": 5,
    "WEBHOOK_CLUSTER": os.environ.get("BENCH_WEBHOOK_CLUSTER", ""),
    "VAULT_KEYS": ["YmVuY2gtb25seS12YXVsdC1rZXktbm90LXNlY3JldCE="],
}
