from django.apps import AppConfig


class NoLeaseWatchConfig(AppConfig):
    """The recovery bench's baseline: disconnects the lease watch (orchestrator_app.control.recovery)
    in the worker processes, leaving the ``ahentic_recover`` schedule alone to resume runs."""

    name = "bench"
    label = "ahentic_bench"

    def ready(self) -> None:
        from django_q.signals import post_spawn

        post_spawn.disconnect(dispatch_uid="ahentic_lease_watch")


class TaskTimesConfig(AppConfig):
    """``bench/throughput.py``: each django-q2 worker process adds up the CPU time of its
    tasks (the worker thread's, from django-q2's ``pre_execute`` to ``post_execute_in_worker``)
    and writes the sum, with the count, to ``$BENCH_TASK_TIMES_DIR/<pid>`` after each task, so
    the bench tells a worker's time in the tasks from its time around them.

    With ``BENCH_PROFILE_DIR`` set, the tasks also run under ``cProfile`` (CPU time of the
    worker thread), their stats written to ``<dir>/<pid>.prof`` after each task (``pstats``)."""

    name = "bench"
    label = "ahentic_bench_times"

    def ready(self) -> None:
        import os
        import threading
        import time

        from django_q.signals import post_execute_in_worker, pre_execute

        directory = os.environ.get("BENCH_TASK_TIMES_DIR")
        if not directory:
            return
        state = threading.local()
        totals = {"cpu_s": 0.0, "tasks": 0}
        profiles = os.environ.get("BENCH_PROFILE_DIR")
        profiler = None
        if profiles:
            import cProfile

            profiler = cProfile.Profile(time.thread_time)

        def started(sender, **kwargs):
            if profiler is not None:
                profiler.enable()
            state.started = time.thread_time()

        def ended(sender, **kwargs):
            began = getattr(state, "started", None)
            if began is None:
                return
            totals["cpu_s"] += time.thread_time() - began
            if profiler is not None:
                profiler.disable()
                profiler.dump_stats(os.path.join(profiles, f"{os.getpid()}.prof"))
            totals["tasks"] += 1
            state.started = None
            # Replaced whole (never seen half-written by the bench reading it).
            path = os.path.join(directory, str(os.getpid()))
            with open(f"{path}.new", "w") as out:
                out.write(f"{totals['cpu_s']} {totals['tasks']}")
            os.replace(f"{path}.new", path)

        pre_execute.connect(started, weak=False, dispatch_uid="ahentic_bench_task_start")
        post_execute_in_worker.connect(ended, weak=False, dispatch_uid="ahentic_bench_task_end")
