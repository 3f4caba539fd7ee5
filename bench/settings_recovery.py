"""Settings for bench/recovery.py and the qcluster it starts: bench/settings_throughput.py with
a short lease (``BENCH_RUN_LEASE_S``) and, for the baseline (``BENCH_NO_LEASE_WATCH=1``),
without the lease watch, so only the ``ahentic_recover`` schedule resumes a run."""

import os

from bench.settings_throughput import *  # noqa: F403
from bench.settings_throughput import AHENTIC, INSTALLED_APPS

AHENTIC = {**AHENTIC, "RUN_LEASE_S": int(os.environ.get("BENCH_RUN_LEASE_S", "5"))}
if os.environ.get("BENCH_NO_LEASE_WATCH") == "1":
    # One app config of the ``bench`` package at a time (Django refuses two of one name).
    INSTALLED_APPS = [
        *(app for app in INSTALLED_APPS if app != "bench.apps.TaskTimesConfig"),
        "bench.apps.NoLeaseWatchConfig",
    ]
