"""CPU per poll request, in process, against the bare authenticated DRF view: bench/poll.py's
endpoints, sessions and settings, driven through Django's test client instead of wrk.

On a shared machine wrk's requests/s follow the other work more than the code (at load 8 the
baseline's poll ran 1.3x faster than its own bare view); this measures the CPU time of the
serving process alone (``time.process_time``), the best of several batches per endpoint, so it
keeps the comparison between trees and rounds. It leaves out the HTTP server and the socket,
which bench/poll.py includes: the ratios here are lower than its ratios (each request's fixed
cost outside Django is missing from both sides).

Each round runs every tree (this checkout and ``--baseline-tree``, the order alternating), each
in its own process importing only its tree, with the payload cache on (304, cached 200) and
then missing (every 200 builds the payload: ``bench/caches.py``); the medians of the rounds'
ratios are printed with the load average.

Usage: .venv/bin/python bench/poll_cpu.py [--rounds 3] [--baseline-tree DIR]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# bench/poll.py by its path: a baseline tree's process must import the apps of that tree only
# (its PYTHONPATH), not this checkout's.
_spec = importlib.util.spec_from_file_location("bench_poll", Path(__file__).with_name("poll.py"))
poll = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(poll)


def measure(requests: int, batches: int) -> dict[str, float]:
    """ms of CPU per request of each endpoint (the best batch), in this process's tree."""
    from django.conf import settings
    from django.test import Client

    facts = poll.prepare()
    client = Client()
    client.cookies[settings.SESSION_COOKIE_NAME] = facts["session_key"]
    no_cache = os.environ.get("AHENTIC_BENCH_NO_CACHE") == "1"
    endpoints = {
        name: (path, {"HTTP_IF_NONE_MATCH": facts["facts"][name][2]} if etag else {})
        for name, (path, etag) in poll.endpoints_of(facts["ids"]).items()
        if not (no_cache and etag)
    }
    for path, headers in endpoints.values():  # warm up: the first request of each fills caches
        for _ in range(5):
            client.get(path, **headers)
    best = dict.fromkeys(endpoints, float("inf"))
    for _ in range(batches):
        for name, (path, headers) in endpoints.items():  # interleaved, batch by batch
            started = time.process_time()
            for _ in range(requests):
                client.get(path, **headers)
            best[name] = min(best[name], (time.process_time() - started) / requests * 1000)
    return best


def run_tree(tree: Path | None, no_cache: bool, requests: int, batches: int) -> dict[str, float]:
    db = os.path.join(tempfile.mkdtemp(prefix="ahentic-poll-cpu-"), "poll.sqlite3")
    env, cwd = poll.tree_env(tree, db)
    env["AHENTIC_BENCH_NO_CACHE"] = "1" if no_cache else "0"
    command = [sys.executable, os.path.abspath(__file__), "--measure"]
    command += ["--requests", str(requests), "--batches", str(batches)]
    out = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"measuring {tree or 'this code'} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline-tree", help="a release's source tree, measured alternately")
    parser.add_argument("--requests", type=int, default=100, help="requests per batch (cached)")
    parser.add_argument("--batches", type=int, default=7)
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        import django

        django.setup()
        print(json.dumps(measure(args.requests, args.batches)))
        return

    trees: dict[str, Path | None] = {"this": None}
    if args.baseline_tree:
        trees["baseline"] = Path(args.baseline_tree).resolve()
    ratios: dict[str, dict[str, list[float]]] = {name: {} for name in trees}
    times: dict[str, dict[str, list[float]]] = {name: {} for name in trees}
    loads = []
    for round_number in range(args.rounds):
        order = list(trees) if round_number % 2 == 0 else list(trees)[::-1]
        for name in order:
            loads.append(f"{name} {poll.loadavg()}")
            for no_cache in (False, True):
                # The payload is built on every 200 without the cache: fewer, slower requests.
                requests = max(args.requests // 4, 10) if no_cache else args.requests
                best = run_tree(trees[name], no_cache, requests, args.batches)
                bare = best.pop("bare DRF view")
                suffix = ", no cache" if no_cache else ""
                for endpoint, ms in best.items():
                    ratios[name].setdefault(endpoint + suffix, []).append(bare / ms)
                    times[name].setdefault(endpoint + suffix, []).append(ms)
                times[name].setdefault("bare DRF view" + suffix, []).append(bare)
            print(f"  round {round_number + 1}: {name} measured", flush=True)

    print(f"\nload average when each tree's round started: {'; '.join(loads)}")
    for name in trees:
        print(f"\n{name} ({trees[name] or poll.ROOT}): CPU ms per request, ratio to the bare view")
        print(f"{'endpoint':40} {'ms':>7} {'ratio':>6}  (per round)")
        for endpoint, values in times[name].items():
            ms = statistics.median(values)
            rounds = ratios[name].get(endpoint)
            if rounds is None:
                print(f"{endpoint:40} {ms:>7.3f}")
                continue
            each = " ".join(f"{r:.2f}" for r in rounds)
            print(f"{endpoint:40} {ms:>7.3f} {statistics.median(rounds):>5.2f}x  ({each})")


if __name__ == "__main__":
    main()
