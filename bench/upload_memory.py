"""Peak memory of a real web process during parallel attachment uploads.

Starts ``manage.py runserver --noreload`` (one threaded process, DEBUG off, a fresh SQLite
file) on the demo site, logs a user in, warms the upload route with a small file, and reads
the process's resident memory at rest (the baseline). Then it sends ``--parallel`` uploads of
a ``--mib`` MiB PDF at once, each from its own thread, through session authentication and its
CSRF check as a browser does, and reads the process's peak resident memory (``VmHWM``). Prints
the baseline, the peak, their ratio and the growth per upload, with the load average.

Usage: .venv/bin/python bench/upload_memory.py [--parallel 6] [--mib 10] [--files 1] [--root PATH]
``--files 5`` sends a message's worth of files in each upload.
``--root`` runs the server from another checkout (for example a clone of main in /tmp), with
this interpreter.
"""

from __future__ import annotations

import argparse
import http.client
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def memory(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of ``pid`` in bytes."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0]) * 1024
    return values


def pdf_of(size: int) -> bytes:
    """A PDF of one page padded to ``size`` bytes with a comment."""
    head = b"%PDF-1.4\n1 0 obj<</Type /Catalog /Pages 2 0 R>>endobj\n"
    head += b"2 0 obj<</Type /Pages /Kids [3 0 R] /Count 1>>endobj\n"
    head += b"3 0 obj<</Type /Page /Parent 2 0 R>>endobj\n"
    tail = b"\ntrailer<</Root 1 0 R>>\n%%EOF\n"
    return head + b"%" + b"x" * (size - len(head) - len(tail) - 1) + tail


def multipart(data: bytes, files: int) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    body = b""
    for n in range(files):
        body += (
            (
                f"--{boundary}\r\n"
                f'Content-Disposition: form-data; name="file"; filename="report-{n}.pdf"\r\n'
                "Content-Type: application/pdf\r\n\r\n"
            ).encode()
            + data
            + b"\r\n"
        )
    body += f"--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}"


def upload(port: int, path: str, cookie: str, csrf: str, data: bytes, files: int = 1) -> int:
    body, content_type = multipart(data, files)
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    connection.request(
        "POST",
        path,
        body=body,
        headers={
            "Content-Type": content_type,
            "Cookie": cookie,
            "X-CSRFToken": csrf,
            "Host": f"127.0.0.1:{port}",
        },
    )
    response = connection.getresponse()
    response.read()
    connection.close()
    return response.status


def seed(db: str, root: Path) -> tuple[str, list[str]]:
    """In a subprocess on ``root``'s code: migrate, a user with the agent permission, a login
    session and sessions to upload to; prints the login key and the session ids."""
    script = """
import django, sys
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.contrib.auth.models import Permission
from django.contrib.sessions.backends.db import SessionStore
from sessions_app import services
user = get_user_model().objects.create_user("bench", password="bench")
user.user_permissions.add(Permission.objects.get(codename="use_agent"))
login = SessionStore()
login[SESSION_KEY] = str(user.pk)
login[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
login[HASH_SESSION_KEY] = user.get_session_auth_hash()
login.save()
ids = [str(services.session_create(owner=user, title=f"chat {n}").pk) for n in range(8)]
print(login.session_key, *ids)
"""
    out = subprocess.run(
        [sys.executable, "-c", script],
        cwd=root,
        env=server_env(db, root),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return out[0], out[1:]


# bench/settings.py without the per-user quota (the code under test may predate it): the
# uploads measure memory, not the quota.
SETTINGS = """
from bench.settings import *  # noqa: F403
from sessions_app.conf import DEFAULTS

if "ATTACHMENT_QUOTA_BYTES" in DEFAULTS:
    AHENTIC = {**AHENTIC, "ATTACHMENT_QUOTA_BYTES": None}  # noqa: F405
"""


def server_env(db: str, root: Path) -> dict[str, str]:
    settings_dir = Path(db).parent
    (settings_dir / "upload_bench_settings.py").write_text(SETTINGS)
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "upload_bench_settings",
        "AHENTIC_BENCH_DB": db,
        "PYTHONPATH": f"{root}:{ROOT}:{settings_dir}",
        "AHENTIC_VAR_DIR": tempfile.mkdtemp(prefix="ahentic-upload-bench-"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parallel", type=int, default=6)
    parser.add_argument("--mib", type=float, default=10)
    parser.add_argument("--files", type=int, default=1, help="files per upload (at most 5)")
    parser.add_argument("--root", type=Path, default=ROOT)
    args = parser.parse_args()
    root = args.root.resolve()

    db = os.path.join(tempfile.mkdtemp(prefix="ahentic-upload-bench-"), "bench.sqlite3")
    login, ids = seed(db, root)
    csrf = secrets.token_hex(16)  # 32 characters: a CSRF secret, sent as cookie and header
    cookie = f"sessionid={login}; csrftoken={csrf}"
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
        cwd=root,
        env=server_env(db, root),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        else:
            raise SystemExit("runserver did not start")
        path = "/ahentic/v1/sessions/{}/attachments"
        # Warm the route (imports, the first connection to the database) with a small file.
        status = upload(port, path.format(ids[-1]), cookie, csrf, pdf_of(4096))
        if status != 201:
            raise SystemExit(f"the warm-up upload answered {status}")
        time.sleep(0.5)
        at_rest = memory(server.pid)["VmRSS"]
        data = pdf_of(int(args.mib * 1024 * 1024) - 1024)
        statuses: list[int] = []
        threads = [
            threading.Thread(
                target=lambda n=n: statuses.append(
                    upload(port, path.format(ids[n % len(ids)]), cookie, csrf, data, args.files)
                )
            )
            for n in range(args.parallel)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        peak = memory(server.pid)["VmHWM"]
    finally:
        server.terminate()
        server.wait(timeout=10)

    mib = 1024 * 1024
    print(f"code: {root}")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(
        f"{args.parallel} parallel uploads of {args.files} x {len(data) / mib:.1f} MiB: "
        f"statuses {sorted(statuses)}"
    )
    print(f"RSS at rest (baseline): {at_rest / mib:8.1f} MiB")
    print(f"peak RSS during uploads: {peak / mib:8.1f} MiB")
    print(f"ratio peak / baseline:   {peak / at_rest:8.2f}x")
    print(f"growth per upload:       {(peak - at_rest) / args.parallel / mib:8.1f} MiB")


if __name__ == "__main__":
    main()
