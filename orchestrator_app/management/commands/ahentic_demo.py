"""Start the demo in one go: migrate, create a login, start the worker and the web server.

Without an Anthropic API key (and no base URL) the offline model is used: the local Messages
API server runs inside this process and both children are pointed at it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand

from sessions_app.conf import ahentic_settings

DEMO_USERNAME = "demo"
DEMO_PASSWORD = "demo"


class Command(BaseCommand):
    help = "Start the django-ahentic demo: web server + django-q2 worker (qcluster)."

    def add_arguments(self, parser):
        parser.add_argument("--addrport", default="127.0.0.1:8000")
        parser.add_argument("--no-worker", action="store_true", help="Do not start qcluster.")

    def handle(self, *args, addrport: str, no_worker: bool, **options):
        from django.conf import settings

        db_path = settings.DATABASES["default"]["NAME"]
        if settings.DATABASES["default"]["ENGINE"].endswith("sqlite3"):
            os.makedirs(os.path.dirname(str(db_path)), exist_ok=True)
        self.stdout.write("Applying migrations...")
        call_command("migrate", interactive=False, verbosity=0)
        self._ensure_login()

        env = os.environ.copy()
        offline = None
        if not ahentic_settings.API_KEY and not ahentic_settings.BASE_URL:
            from orchestrator_app.testing.localapi import LocalMessagesServer
            from orchestrator_app.testing.offline import demo_responder

            offline = LocalMessagesServer().start()
            offline.responder = demo_responder
            env["ANTHROPIC_BASE_URL"] = offline.url
            env["ANTHROPIC_API_KEY"] = "offline-demo"
            self.stdout.write(f"No ANTHROPIC_API_KEY: using the offline model at {offline.url}")

        manage = [sys.executable, "manage.py"]
        children = []
        if not no_worker:
            children.append(subprocess.Popen([*manage, "qcluster"], env=env))
        children.append(subprocess.Popen([*manage, "runserver", "--noreload", addrport], env=env))
        self.stdout.write(
            self.style.SUCCESS(
                f"\nDemo running on http://{addrport}/  (admin: http://{addrport}/admin/)\n"
                f"Log in as  {DEMO_USERNAME} / {DEMO_PASSWORD}\n"
                f"API:       http://{addrport}/ahentic/v1/sessions\n"
                "Stop with Ctrl-C.\n"
            )
        )
        try:
            while all(child.poll() is None for child in children):
                time.sleep(0.5)
            self.stderr.write("A demo process exited; stopping the others.")
        except KeyboardInterrupt:
            pass
        finally:
            for child in children:
                if child.poll() is None:
                    child.send_signal(signal.SIGINT)
            for child in children:
                try:
                    child.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    child.kill()
            if offline is not None:
                offline.stop()

    def _ensure_login(self) -> None:
        User = get_user_model()
        user, created = User.objects.get_or_create(
            username=DEMO_USERNAME, defaults={"email": "demo@example.com"}
        )
        if created or not user.check_password(DEMO_PASSWORD):
            user.set_password(DEMO_PASSWORD)
        user.is_staff = True
        user.is_superuser = True
        user.save()
