"""``make demo`` (manage.py ahentic_demo) as a user runs it: a real process with its children.

The command runs against a new SQLite database in a temporary AHENTIC_VAR_DIR (a copy of one
migrated once for the module), without an API key (so with the offline model), and without the
worker (runserver is the child under test).
"""

import http.cookiejar
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from contextlib import closing

import pytest

from tests.support.paths import ROOT

pytestmark = [pytest.mark.integration, pytest.mark.slow_once]

SIDEBAR_MARK = 'id="ahentic-sidebar"'


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def demo_env(var_dir) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env.update(
        AHENTIC_VAR_DIR=str(var_dir),
        DJANGO_SETTINGS_MODULE="ahentic_site.settings",
        PYTHONUNBUFFERED="1",
    )
    return env


@pytest.fixture(scope="module")
def migrated_database(tmp_path_factory):
    """The demo's SQLite database with every migration applied, made once for the module: a
    migrate from nothing costs seconds of CPU, and each demo below starts from a copy of it
    (its own ``migrate`` then has nothing to apply; the logins, agents and schedule it makes
    are not in the copy)."""
    var_dir = tmp_path_factory.mktemp("demo-migrated")
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--no-input", "--verbosity", "0"],
        cwd=ROOT,
        env=demo_env(var_dir),
        capture_output=True,
        check=True,
        timeout=600,
    )
    return var_dir / "demo.sqlite3"


@pytest.fixture
def demo(tmp_path, migrated_database):
    """The running demo command: (process, port, output lines so far)."""
    port = free_port()
    env = demo_env(tmp_path)
    # SQLite's backup API: a consistent copy, whatever the WAL file still holds.
    with closing(sqlite3.connect(migrated_database)) as source:
        with closing(sqlite3.connect(tmp_path / migrated_database.name)) as copy:
            source.backup(copy)
    process = subprocess.Popen(
        [
            sys.executable,
            "manage.py",
            "ahentic_demo",
            "--no-worker",
            "--addrport",
            f"127.0.0.1:{port}",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # a signal for the test run never reaches it by accident
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True)
    reader.start()
    deadline = time.monotonic() + 60
    while not port_open(port):
        assert process.poll() is None, "".join(lines)
        assert time.monotonic() < deadline, "the demo did not start:\n" + "".join(lines)
        time.sleep(0.2)
    yield process, port, lines
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def log_in(port: int, username: str, password: str) -> urllib.request.OpenerDirector:
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    base = f"http://127.0.0.1:{port}"
    page = opener.open(f"{base}/accounts/login/?next=/").read().decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    form = urllib.parse.urlencode(
        {"username": username, "password": password, "csrfmiddlewaretoken": token, "next": "/"}
    ).encode()
    request = urllib.request.Request(
        f"{base}/accounts/login/", data=form, headers={"Referer": f"{base}/accounts/login/"}
    )
    opener.open(request).read()
    return opener


def test_the_demo_uses_the_offline_model_quietly_and_its_member_login_sees_the_sidebar(demo):
    process, port, lines = demo

    member = log_in(port, "member", "member")
    home = member.open(f"http://127.0.0.1:{port}/").read().decode()
    # The demo's agents: Helper, the members' default on the site's pages; Editor in the admin.
    listed = json.loads(member.open(f"http://127.0.0.1:{port}/ahentic/v1/agents").read())
    shown = {agent["slug"]: agent for agent in listed}
    assert shown["helper"]["isDefault"] is True
    assert shown["editor"]["showsOn"] == "admin"

    assert SIDEBAR_MARK in home
    assert "sessions_app.use_agent" in home  # the page says what the second login shows
    output = "".join(lines)
    assert "using the offline model" in output
    assert "cannot answer" not in output
    assert "member / member" in output
    # The demo's schedule: a site digest every 5 minutes into one chat of the demo user.
    assert "'Site digest' runs every 5 minutes" in output
    admin = log_in(port, "demo", "demo")
    schedules = admin.open(f"http://127.0.0.1:{port}/admin/orchestrator_app/schedule/").read()
    assert "Site digest" in schedules.decode() and "*/5 * * * *" in schedules.decode()
    # The first chat's agent (Helper) writes pages for staff, so an MCP client of the demo
    # user gets its tools that need no browser; and the browser's icon request is no 404.
    access = json.loads(admin.open(f"http://127.0.0.1:{port}/ahentic/v1/mcp-tokens/access").read())
    assert access["agent"]["slug"] == "helper"
    assert access["endpoint"] == f"http://127.0.0.1:{port}/ahentic/v1/mcp"
    assert "admin_save" in access["tools"] and "page_read" not in access["tools"]
    icon = admin.open(f"http://127.0.0.1:{port}/favicon.ico")
    assert icon.status == 200 and icon.headers["Content-Type"] == "image/svg+xml"
    # The demo's MCP server runs beside the site, on its own local port.
    mcp_port = int(re.search(r"MCP: +http://127\.0\.0\.1:(\d+)/mcp", output).group(1))
    assert port_open(mcp_port)


def test_sigterm_stops_the_demo_and_its_web_server(demo):
    process, port, lines = demo

    mcp_port = int(re.search(r"MCP: +http://127\.0\.0\.1:(\d+)/mcp", "".join(lines)).group(1))
    process.send_signal(signal.SIGTERM)

    assert process.wait(timeout=30) == 0, "".join(lines)
    assert not port_open(port), "runserver outlived the demo command"
    assert not port_open(mcp_port), "the MCP server outlived the demo command"


@pytest.mark.django_db
def test_a_helper_an_earlier_demo_seeded_gets_the_page_tools_once_and_a_changed_one_is_kept():
    """A demo database from before: Helper's seeded version listed no admin tool, so the
    Quickstart's "Write a page about coffee" failed in the first chat. The demo gives it every
    tool once; a Helper staff changed since keeps their version."""
    from orchestrator_app.management.commands.ahentic_demo import Command
    from sessions_app import agents
    from sessions_app.models import Agent

    helper = Agent.objects.create(slug="helper", name="Helper")
    agents.version_save(helper, config={"TOOLS": ["page_read"], "MEMORY": "user"}, note="Demo")

    Command()._ensure_agents()
    Command()._ensure_agents()

    versions = list(helper.versions.order_by("number"))
    assert len(versions) == 2
    assert "TOOLS" not in versions[-1].config and versions[-1].config["MEMORY"] == "user"

    agents.version_save(helper, config={"TOOLS": ["page_read"]}, note="Staff: reading only")
    Command()._ensure_agents()
    assert agents.latest_version(helper).config == {"TOOLS": ["page_read"]}
