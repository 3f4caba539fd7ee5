"""Real ``qcluster`` processes for the integration tests, and waiting on their logs."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from django.db import connection

from tests.support.paths import ROOT

POLL_LIMIT_S = 30


class Workers:
    """``manage.py qcluster`` processes on the committed test database; all stopped at the end."""

    def __init__(self, llm, tmp_path):
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.settings_worker",
            "AHENTIC_TEST_DB_NAME": str(connection.settings_dict["NAME"]),
            "AHENTIC_TEST_LLM_URL": llm.url,
        }
        self.tmp_path = tmp_path
        self.processes: list[tuple[subprocess.Popen, Path]] = []

    def start(self) -> subprocess.Popen:
        log_path = self.tmp_path / f"qcluster-{len(self.processes)}.log"
        with open(log_path, "w") as log:
            process = subprocess.Popen(
                [sys.executable, "manage.py", "qcluster"],
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: its children stop with it
            )
        self.processes.append((process, log_path))
        return process

    def kill(self, process: subprocess.Popen) -> None:
        """SIGKILL the worker and its children, as a host that dies would."""
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()

    def stop_all(self) -> None:
        # Killed, not asked to stop: a cluster's graceful shutdown polls its pusher, workers and
        # monitor for about three seconds, and no test reads what it writes meanwhile. The
        # transactional test database is flushed after this, when no process holds it any more.
        for process, _ in self.processes:
            if process.poll() is None:
                self.kill(process)
        for _, log_path in self.processes:
            sys.stderr.write(f"qcluster log ({log_path.name}):\n{log_path.read_text()}\n")


def wait_for_log(log_path: Path, text: str, count: int = 1) -> None:
    deadline = time.monotonic() + POLL_LIMIT_S
    while log_path.read_text(errors="replace").count(text) < count:
        assert time.monotonic() < deadline, f"never logged {text!r}: {log_path.read_text()}"
        time.sleep(0.1)
