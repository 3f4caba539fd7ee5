"""``manage.py ahentic_localapi``: serve the local Messages API stand-in until stopped.

For a host site without an Anthropic API key yet (development, demos, CI of the host's own
templates): point ``ANTHROPIC_BASE_URL`` (or ``AHENTIC["BASE_URL"]``) of the web and worker
processes at the printed URL; no API key is needed. It answers "Done." to every message, or runs the demo's scripted offline model with
``--offline``. Never use it in production: nothing it says comes from a model.
"""

from __future__ import annotations

import signal
import threading

from django.core.management.base import BaseCommand

from orchestrator_app.testing.localapi import LocalMessagesServer
from orchestrator_app.testing.offline import demo_model


class Command(BaseCommand):
    help = "Serve a local Anthropic Messages API stand-in (tests, demos; no network, no model)."
    # It serves the model's side: the site's checks (W001, no API key and no base URL, above
    # all) are about the processes pointed at it, which run them themselves.
    requires_system_checks: list = []

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=8765, help="port on 127.0.0.1")
        parser.add_argument("--api-key", default=None, help="reject requests without this key")
        parser.add_argument(
            "--offline", action="store_true", help="answer with the demo's scripted offline model"
        )

    def handle(self, *args, port: int, api_key: str | None, offline: bool, **options):
        server = LocalMessagesServer(port=port, api_key=api_key, verbose=options["verbosity"] > 1)
        if offline:
            server.responder = demo_model
        # The handler is in place before the banner says the server is up, so a SIGTERM sent
        # as soon as it is read stops the server cleanly.
        stopped = threading.Event()
        signal.signal(signal.SIGTERM, lambda signum, frame: stopped.set())
        server.start()
        self.stdout.write(
            f"Local Messages API on {server.url} ({'offline demo model' if offline else 'Done.'})."
            f" Start the web server and the worker with ANTHROPIC_BASE_URL={server.url} (or "
            f"AHENTIC['BASE_URL'] = {server.url!r}); no API key is needed. Ctrl-C stops it."
        )
        self.stdout.flush()
        try:
            stopped.wait()
        except KeyboardInterrupt:
            pass
        finally:
            server.stop()
