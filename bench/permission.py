"""Cost of the agent permission check as the number of grantees and group members grows.

Every API request, the sidebar's polls included, runs ``HasAgentPermission``: the user's
``has_perm`` (the host's authentication backends decide; ``ModelBackend`` reads the user's own
and their groups' permissions, two queries), its answer cached per user in Django's cache for
``AHENTIC["PERMISSION_CACHE_S"]`` seconds. This script measures, in one database and one run,
for two populations holding the agent permission (``AHENTIC["PERMISSION"]``, default
``sessions_app.use_agent``):

- small: 1 direct grantee and a group of 10 members;
- large: 50 direct grantees and a group of 20,000 members (bulk-inserted, a few seconds).

Each population has three measured users: a direct grantee, a group member and a user with
no permission at all. Two checks each:

- ``cached``: ``HasAgentPermission`` as a request after the first one runs it (a cache hit);
- ``uncached``: the same with the user's entry dropped first (``PERMISSION_CACHE_S`` would
  expire it; a grant change drops it), i.e. ``has_perm`` through the backends: the baseline.

Both populations live in the same database and their calls alternate (small, large, large,
small, ...), so a change of load on a shared machine weighs on both columns alike. For each
check and user: the median and p95 of ``time.perf_counter()`` over ``--reps`` calls after
``--warmup`` calls, in milliseconds, the ratio large/small of the medians, and the ratio of
the cached check to the uncached one (same user, same run). Each call checks the answer
(granted or denied) against the user's kind.

Targets: every uncached median of the large population <= 1.0 ms and every large/small ratio
<= 1.5x (flat in the number of holders), and the cached check <= 0.5x of the uncached one.

``--postgres`` runs the same on a private PostgreSQL server (started and stopped here, as
bench/throughput.py does), after ANALYZE of the seeded tables (autovacuum would do the same
shortly after such a bulk load); SQLite runs without ANALYZE, as a site usually does.

Usage: .venv/bin/python bench/permission.py [--reps 300] [--warmup 20] [--postgres]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from types import SimpleNamespace

from _setup import ROOT, django_setup

SMALL = {"label": "small", "grantees": 1, "members": 10}
LARGE = {"label": "large", "grantees": 50, "members": 20_000}
KINDS = ("direct grantee", "group member", "no permission")
CHECKS = ("cached", "uncached")
MAX_LARGE_MS = 1.0
MAX_RATIO = 1.5
MAX_CACHED_SHARE = 0.5


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def postgres_setup(port: str) -> None:
    """``django_setup()`` for the PostgreSQL server of ``start_postgres()``: tests/settings.py
    reads the database from AHENTIC_TEST_DB and the PG* variables (``django_setup`` would point
    the database at a SQLite file, so its steps are repeated here without that)."""
    os.environ.update(
        {
            "AHENTIC_TEST_DB": "postgres",
            "PGHOST": "127.0.0.1",
            "PGPORT": port,
            "PGUSER": "postgres",
            "PGDATABASE": "ahentic_bench",
        }
    )
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    os.environ.setdefault("DJANGO_DEBUG", "0")
    os.environ.setdefault("AHENTIC_VAR_DIR", tempfile.mkdtemp(prefix="ahentic-bench-"))
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def agent_permission():
    from django.contrib.auth.models import Permission

    from sessions_app.conf import ahentic_settings

    app_label, _, codename = ahentic_settings.PERMISSION.partition(".")
    return Permission.objects.get(codename=codename, content_type__app_label=app_label)


def create_users(prefix: str, count: int) -> list[int]:
    """``count`` users named ``prefix0``... with no usable password (no hashing), in bulk;
    returns their ids in creation order."""
    from django.contrib.auth import get_user_model

    User = get_user_model()
    User.objects.bulk_create(
        [User(username=f"{prefix}{i}", password="!") for i in range(count)], batch_size=1000
    )
    return list(
        User.objects.filter(username__startswith=prefix).order_by("pk").values_list("pk", flat=True)
    )


def seed(population: dict, permission) -> dict:
    """The population's grantees, its group and its members, plus one user with no permission
    and one session per measured user. Returns ``{kind: (user id, session id)}``; the measured
    grantee and member are the last ones created."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    from sessions_app.services import session_create

    User = get_user_model()
    label = population["label"]
    print(f"  seeding {population['grantees']:,} direct grantee(s) ({label})...", flush=True)
    grantees = create_users(f"{label}-grantee-", population["grantees"])
    User.user_permissions.through.objects.bulk_create(
        [User.user_permissions.through(user_id=pk, permission_id=permission.pk) for pk in grantees],
        batch_size=1000,
    )
    print(f"  seeding {population['members']:,} group members ({label})...", flush=True)
    group = Group.objects.create(name=f"{label} agent users")
    group.permissions.add(permission)
    members = create_users(f"{label}-member-", population["members"])
    User.groups.through.objects.bulk_create(
        [User.groups.through(user_id=pk, group_id=group.pk) for pk in members], batch_size=1000
    )
    nobody = User.objects.create(username=f"{label}-nobody", password="!")
    measured = {}
    for kind, user_id in zip(KINDS, (grantees[-1], members[-1], nobody.pk), strict=True):
        session = session_create(owner=User.objects.get(pk=user_id))
        measured[kind] = (user_id, session.pk)
    return measured


def analyze_if_postgres() -> None:
    from django.db import connection

    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")


def forget_permissions(user) -> None:
    """Django's ModelBackend caches a user's permissions on the instance (``_perm_cache``,
    ``_user_perm_cache``, ``_group_perm_cache``). A request gets a fresh user, so the caches
    are dropped before every call: otherwise the denied path's ``has_perm`` would be measured
    from memory after the first call."""
    for name in ("_perm_cache", "_user_perm_cache", "_group_perm_cache"):
        user.__dict__.pop(name, None)


def run_check(user) -> bool:
    """One call of ``HasAgentPermission`` for ``user``."""
    from orchestrator_app.api.permissions import HasAgentPermission

    return HasAgentPermission().has_permission(SimpleNamespace(user=user), None)


def measure(measured: dict, reps: int, warmup: int) -> dict:
    """``{(check, kind): {population: (median ms, p95 ms)}}``, the populations' calls
    alternating; fails if a check answers wrongly."""
    from django.contrib.auth import get_user_model

    from orchestrator_app.api.permissions import invalidate_users

    User = get_user_model()
    labels = list(measured)
    results = {}
    for check in CHECKS:
        for kind in KINDS:
            print(f"  measuring {check}, {kind}...", flush=True)
            users = {label: User.objects.get(pk=measured[label][kind][0]) for label in labels}
            expected = kind != "no permission"
            samples = {label: [] for label in labels}
            for i in range(warmup + reps):
                for label in labels if i % 2 == 0 else reversed(labels):
                    user = users[label]
                    forget_permissions(user)  # a request gets a fresh user
                    if check == "uncached":
                        invalidate_users([user.pk])
                    started = time.perf_counter()
                    granted = run_check(user)
                    elapsed_ms = (time.perf_counter() - started) * 1000
                    if granted != expected:
                        raise SystemExit(f"FAIL: {check} answered {granted} for the {kind}")
                    if i >= warmup:
                        samples[label].append(elapsed_ms)
            results[check, kind] = {
                label: (statistics.median(values), statistics.quantiles(values, n=20)[18])
                for label, values in samples.items()
            }
    return results


def print_plans(user_id: int) -> None:
    """The plans of ``ModelBackend``'s two permission reads for the large group member, to see
    which indexes they use."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission

    user = get_user_model()._base_manager.get(pk=user_id)
    reads = {
        "own permissions": Permission.objects.filter(user=user),
        "group permissions": Permission.objects.filter(group__user=user),
    }
    for name, query in reads.items():
        print(f"query plan, large group member, {name}:")
        for line in query.explain().splitlines():
            print(f"    {line}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--postgres", action="store_true")
    args = parser.parse_args()

    stop_postgres = None
    try:
        if args.postgres:
            from throughput import start_postgres

            port, stop_postgres = start_postgres()
            postgres_setup(port)
        else:
            django_setup()
        backend = "PostgreSQL" if args.postgres else "SQLite"
        print(f"permission check on {backend}, {args.reps} calls after {args.warmup} warm-up")
        print(f"load average: {load_average()}")
        permission = agent_permission()
        measured = {
            population["label"]: seed(population, permission) for population in (SMALL, LARGE)
        }
        analyze_if_postgres()
        results = measure(measured, args.reps, args.warmup)

        print(
            f"{'check':<19} {'user':<15} {'small ms':>8} {'p95':>6} "
            f"{'large ms':>8} {'p95':>6} {'large/small':>11} {'/uncached':>9}"
        )
        passed = True
        for check in CHECKS:
            for kind in KINDS:
                small, small_p95 = results[check, kind]["small"]
                large, large_p95 = results[check, kind]["large"]
                ratio = large / small
                share = large / results["uncached", kind]["large"][0]
                if check == "uncached":
                    passed = passed and large <= MAX_LARGE_MS and ratio <= MAX_RATIO
                else:
                    passed = passed and share <= MAX_CACHED_SHARE
                print(
                    f"{check:<19} {kind:<15} {small:>8.3f} {small_p95:>6.3f} "
                    f"{large:>8.3f} {large_p95:>6.3f} {ratio:>10.2f}x {share:>8.2f}x"
                )
        print(f"load average: {load_average()}")
        print_plans(measured["large"]["group member"][0])
        verdict = "PASS" if passed else "FAIL"
        print(
            f"{verdict}: target every uncached large median <= {MAX_LARGE_MS} ms and "
            f"large/small <= {MAX_RATIO}x ({LARGE['grantees']} direct grantees, "
            f"a {LARGE['members']:,}-member group), cached <= {MAX_CACHED_SHARE}x uncached"
        )
    finally:
        if stop_postgres:
            from django.db import connections

            connections.close_all()
            stop_postgres()


if __name__ == "__main__":
    main()
