"""Start the demo in one go: migrate, create two logins, start the worker, the web server and
the demo's MCP server (a ticket tracker, ``orchestrator_app/testing/demo_mcp.py``, on a free
local port, registered as ``tickets`` for the Editor agent).

Without an Anthropic API key (and no base URL) the offline model is used: the local Messages
API server runs inside this process and both children are pointed at it. Ctrl-C or SIGTERM stops
both children before the command exits.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.core.management.base import BaseCommand

from sessions_app.conf import ahentic_settings

DEMO_USERNAME = "demo"
DEMO_PASSWORD = "demo"
# A login that is not staff but may use the agent: the sidebar on the site's own pages.
MEMBER_USERNAME = "member"
MEMBER_PASSWORD = "member"
# The webhook endpoint pointed at the demo's own receiver page.
DEMO_WEBHOOK = "Demo receiver"
DIGEST_NAME = "Site digest"
HELPER_DESCRIPTION = (
    "Answers questions about the site, reads the page you are on, remembers what you tell it, "
    "and writes the site's flat pages for staff (each change waits for your approval)."
)
HELPER_SOUL = (
    "You are Helper, the site's assistant. Answer briefly and kindly; read the page the user "
    "is on when they ask about it; write or change the site's flat pages through the admin "
    "tools when staff ask (every change waits for their approval)."
)


def _stop_on_sigterm(signum, frame):
    raise KeyboardInterrupt  # the same way out as Ctrl-C: the children are stopped in finally


class Command(BaseCommand):
    help = "Start the django-ahentic demo: web server + django-q2 worker (qcluster)."
    # Checked in handle() once the offline model is set up: checked before, the missing API key
    # would be reported although the demo's model answers.
    requires_system_checks: list = []

    def add_arguments(self, parser):
        parser.add_argument("--addrport", default="127.0.0.1:8000")
        parser.add_argument("--no-worker", action="store_true", help="Do not start qcluster.")

    def handle(self, *args, addrport: str, no_worker: bool, **options):
        from django.conf import settings

        signal.signal(signal.SIGTERM, _stop_on_sigterm)
        offline = None
        children: list[subprocess.Popen] = []
        try:
            if not ahentic_settings.API_KEY and not ahentic_settings.BASE_URL:
                from orchestrator_app.testing.localapi import LocalMessagesServer
                from orchestrator_app.testing.offline import demo_model

                offline = LocalMessagesServer().start()
                offline.responder = demo_model
                # Set here too, so this process's checks see the model the children use.
                os.environ["ANTHROPIC_BASE_URL"] = offline.url
                os.environ["ANTHROPIC_API_KEY"] = "offline-demo"
                self.stdout.write(f"No ANTHROPIC_API_KEY: using the offline model at {offline.url}")
            self.check(display_num_errors=False)

            db_path = settings.DATABASES["default"]["NAME"]
            if settings.DATABASES["default"]["ENGINE"].endswith("sqlite3"):
                os.makedirs(os.path.dirname(str(db_path)), exist_ok=True)
            self.stdout.write("Applying migrations...")
            call_command("migrate", interactive=False, verbosity=0)
            self._ensure_logins()
            self._ensure_agents()
            self._ensure_webhook(addrport)
            self._ensure_schedule()

            manage = [sys.executable, "manage.py"]
            # The links in mails and MCP answers point at the address served here, not a
            # port written into the settings (ahentic_site/settings.py reads it).
            env = {**os.environ, "AHENTIC_SITE_URL": f"http://{addrport}/"}
            mcp_url = self._start_mcp_server(children, env)
            if mcp_url:
                self._ensure_mcp_server(mcp_url)
            if not no_worker:
                children.append(subprocess.Popen([*manage, "qcluster"], env=env))
                hooks = ahentic_settings.WEBHOOK_CLUSTER
                if hooks:
                    # The webhook deliveries' own cluster (docs/howto/webhooks.md).
                    hooks_env = {**env, "Q_CLUSTER_NAME": str(hooks)}
                    children.append(subprocess.Popen([*manage, "qcluster"], env=hooks_env))
            children.append(
                subprocess.Popen([*manage, "runserver", "--noreload", addrport], env=env)
            )
            self.stdout.write(
                self.style.SUCCESS(
                    f"\nDemo running on http://{addrport}/  (admin: http://{addrport}/admin/)\n"
                    f"Log in as  {DEMO_USERNAME} / {DEMO_PASSWORD}  (staff: the admin and its "
                    "sidebar)\n"
                    f"       or  {MEMBER_USERNAME} / {MEMBER_PASSWORD}  (not staff: the sidebar "
                    "on the site's own pages)\n"
                    f"API:       http://{addrport}/ahentic/v1/sessions\n"
                    f"MCP/OAuth: http://{addrport}/ahentic/v1/mcp  (Claude Code: claude mcp add "
                    f"--transport http ahentic http://{addrport}/ahentic/v1/mcp; "
                    "docs/howto/connectors.md)\n"
                    f"Webhooks:  http://{addrport}/demo/webhooks/  (what the demo receiver got)\n"
                    f"Schedule:  {DIGEST_NAME!r} runs every 5 minutes into {DEMO_USERNAME}'s "
                    f"chat of that name (admin: Schedules)\n"
                    + (
                        f"MCP:       {mcp_url} (the Editor agent's ticket server)\n"
                        if mcp_url
                        else ""
                    )
                    + "Stop with Ctrl-C (or SIGTERM).\n"
                )
            )
            while all(child.poll() is None for child in children):
                time.sleep(0.5)
            self.stderr.write("A demo process exited; stopping the others.")
        except KeyboardInterrupt:
            pass
        finally:
            # A second SIGTERM must not cut the cleanup short (the timeouts below bound it).
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
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

    def _start_mcp_server(self, children: list, env: dict) -> str | None:
        """The demo's MCP server as a child process on a free local port; its URL, or None
        when uvicorn (a dev dependency) is missing."""
        if importlib.util.find_spec("uvicorn") is None:
            self.stderr.write("uvicorn is not installed: the demo's MCP server is not started.")
            return None
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        module = "orchestrator_app.testing.demo_mcp"
        children.append(
            subprocess.Popen([sys.executable, "-m", module, "--port", str(port)], env=env)
        )
        return f"http://127.0.0.1:{port}/mcp"

    def _ensure_mcp_server(self, url: str) -> None:
        """Register the ticket server (its URL changes with the port) and list it for the
        Editor agent (a new version when its latest does not list it yet)."""
        from orchestrator_app.models import McpServer
        from sessions_app import agents
        from sessions_app.models import Agent

        McpServer.objects.update_or_create(
            slug="tickets",
            defaults={
                "name": "Demo tickets",
                "url": url,
                "active": True,
                "readonly_default_allow": True,
                # The new port is a new server: list its tools at the next step.
                "tools_fetched_at": None,
            },
        )
        editor = Agent.objects.filter(slug="editor").first()
        version = agents.latest_version(editor) if editor else None
        if version is not None and "tickets" not in (version.config.get("MCP_SERVERS") or []):
            config = {**version.config, "MCP_SERVERS": ["tickets"]}
            agents.version_save(editor, config=config, note="Demo: the ticket MCP server")

    def _ensure_logins(self) -> None:
        self._ensure_user(DEMO_USERNAME, DEMO_PASSWORD, staff=True)
        member = self._ensure_user(MEMBER_USERNAME, MEMBER_PASSWORD, staff=False)
        app_label, codename = ahentic_settings.PERMISSION.split(".", 1)
        member.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )

    def _ensure_agents(self) -> None:
        """Two agents besides the default one (made once; staff may change them later): Helper,
        the default, which reads pages, keeps a memory of the user and, for staff, writes the
        flat pages through the admin with approvals (so the Quickstart works in the first
        chat); Editor, in the admin, which works on flat pages and the demo's ticket tracker.
        A Helper still at the version an earlier demo seeded (no admin tools) gets them."""
        from sessions_app import agents
        from sessions_app.models import Agent

        if Agent.objects.filter(slug__in=["helper", "editor"]).exists():
            self._upgrade_helper()
            return
        helper = Agent.objects.create(
            slug="helper",
            name="Helper",
            description=HELPER_DESCRIPTION,
            colour="#2f6f4e",
            shows_on=Agent.Place.BOTH,
        )
        # No TOOLS: every tool of the site. The admin tools serve only users the admin's own
        # permissions allow (``member`` never gets them), the browser tools only a page.
        helper_config = {"SOUL": HELPER_SOUL}
        if "MEMORY" in agents.AGENT_KEYS:
            helper_config["MEMORY"] = "user"
        agents.version_save(helper, config=helper_config, note="Demo")
        editor = Agent.objects.create(
            slug="editor",
            name="Editor",
            description="Writes and updates the site's flat pages through the admin, and lists "
            "and files tickets in the demo's ticket tracker (an MCP server).",
            colour="#6b3fa0",
            shows_on=Agent.Place.ADMIN,
        )
        agents.version_save(
            editor,
            config={
                "SOUL": "You are Editor. You write and update the site's flat pages through the "
                "admin tools; every change waits for the user's approval.",
            },
            note="Demo",
        )
        agents.default_set(helper)

    def _upgrade_helper(self) -> None:
        from sessions_app import agents
        from sessions_app.models import Agent

        helper = Agent.objects.filter(slug="helper").first()
        version = agents.latest_version(helper) if helper else None
        if version is None or version.note != "Demo":
            return  # changed by staff since: theirs to keep
        tools = version.config.get("TOOLS")
        if tools is None or "admin_save" in tools:
            return  # already able to write pages
        config = {key: value for key, value in version.config.items() if key != "TOOLS"}
        config["SOUL"] = HELPER_SOUL
        agents.version_save(helper, config=config, note="Demo: writes flat pages for staff")

    def _ensure_webhook(self, addrport: str) -> None:
        """A webhook endpoint for every event, pointed at the demo site's own receiver page
        (``ahentic_site/webhooks.py``); made once, and moved when the demo's address changes."""
        from orchestrator_app.models import WebhookEndpoint
        from orchestrator_app.webhooks.delivery import endpoint_create
        from orchestrator_app.webhooks.events import SUBSCRIBABLE

        url = f"http://{addrport}/demo/webhooks/"
        endpoint = WebhookEndpoint.objects.filter(name=DEMO_WEBHOOK).first()
        if endpoint is None:
            endpoint_create(name=DEMO_WEBHOOK, url=url, events=[value for value, _ in SUBSCRIBABLE])
        elif endpoint.url != url:
            WebhookEndpoint.objects.filter(pk=endpoint.pk).update(url=url)

    def _ensure_schedule(self) -> None:
        """The "Site digest" schedule (made once): every 5 minutes Helper writes a short digest
        into one chat of the demo user, with the offline model when there is no API key."""
        from orchestrator_app.models import Schedule
        from orchestrator_app.schedules import services as schedules
        from sessions_app.models import Agent

        if Schedule.objects.filter(name=DIGEST_NAME).exists():
            return
        schedule = Schedule(
            name=DIGEST_NAME,
            agent=Agent.objects.get(slug="helper"),
            run_as=get_user_model().objects.get(username=DEMO_USERNAME),
            cron="*/5 * * * *",
            time_zone="UTC",
            first_message="Write a short digest of what happened on the site since the last one.",
            chat_mode=Schedule.ChatMode.CONTINUE,
        )
        schedule.full_clean()
        schedules.schedule_save(schedule)

    def _ensure_user(self, username: str, password: str, *, staff: bool):
        User = get_user_model()
        user, created = User.objects.get_or_create(
            username=username, defaults={"email": f"{username}@example.com"}
        )
        if created or not user.check_password(password):
            user.set_password(password)
        user.is_staff = staff
        user.is_superuser = staff
        user.save()
        return user
