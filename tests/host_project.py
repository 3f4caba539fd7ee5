"""A throwaway host site made the way the README's install steps say, then checked and smoke-run.

    python -I tests/host_project.py --readme README.md --dest /tmp/site [--checkout DIR]

1. ``django-admin startproject hostsite`` (the Django that this Python has installed);
2. the README's install snippets pasted in: the fenced blocks of "Installing into a host site"
   whose first line names their file (``# settings.py``, ``# urls.py``,
   ``{# templates/admin/base_site.html #}``);
3. ``manage.py check`` (no warning allowed), ``check --deploy`` with production settings, and
   ``check`` again without the admin template, which must warn ``ahentic.W002``;
4. ``migrate``, ``migrate --check``, ``makemigrations --check`` and ``collectstatic``;
5. a smoke run over HTTP (a WSGI server on a free loopback port): admin login, the admin page
   with the sidebar, ``GET``/``POST ahentic/v1/sessions``, the skills catalog and the sidebar's
   static files.

Two callers: tests/test_readme_install.py (against the checkout's editable install) and
.ci/wheel-leg, which runs it with the Python of a fresh virtual environment holding the built
wheel, from a temporary directory, with ``--checkout`` so the smoke run fails if the app was
imported from the checkout instead of the installed wheel. Exits non-zero naming the failed
step. Standard library only here: Django is imported by the processes it starts.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

PROJECT = "hostsite"
INSTALL_SECTION = "## Installing into a host site"
# The README's blocks are pasted into these files (settings and urls are appended).
SNIPPET_TARGETS = {
    "settings.py": f"{PROJECT}/settings.py",
    "urls.py": f"{PROJECT}/urls.py",
    "templates/admin/base_site.html": "templates/admin/base_site.html",
}
ADMIN_TEMPLATE = SNIPPET_TARGETS["templates/admin/base_site.html"]

# What a production host adds for `check --deploy`; not part of the install steps.
DEPLOY_SETTINGS = """\
from .settings import *  # noqa: F403

DEBUG = False
SECRET_KEY = "host-deploy-" + "k3y-" * 12
ALLOWED_HOSTS = ["agent.example.com"]
SECURE_SSL_REDIRECT = True
SECURE_HSTS_SECONDS = 31536000
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = True
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
STATIC_ROOT = BASE_DIR / "static-root"  # noqa: F405
if "MAILERS" in globals():  # Django 6.1's startproject mails to the console
    MAILERS = {"default": {"BACKEND": "django.core.mail.backends.smtp.EmailBackend"}}
"""


class StepFailed(Exception):
    pass


def install_snippets(readme: Path) -> dict[str, str]:
    """The install section's file snippets, keyed by the file named on their first line."""
    text = readme.read_text(encoding="utf-8")
    start = text.find(INSTALL_SECTION)
    if start < 0:
        raise StepFailed(f"README has no {INSTALL_SECTION!r} section")
    end = text.find("\n## ", start + len(INSTALL_SECTION))
    section = text[start : end if end > 0 else len(text)]
    snippets: dict[str, str] = {}
    for match in re.finditer(r"^( *)```[a-z]*\n(.*?)^\1```", section, re.M | re.S):
        body = textwrap.dedent(match.group(2))
        first, _, rest = body.partition("\n")
        name = re.fullmatch(r"(?:#|\{#)\s*(\S+)\s*(?:#\})?", first.strip())
        if name and name.group(1) in SNIPPET_TARGETS:
            snippets[name.group(1)] = rest
    missing = sorted(set(SNIPPET_TARGETS) - set(snippets))
    if missing:
        raise StepFailed(f"README install section has no snippet for {', '.join(missing)}")
    return snippets


def build(dest: Path, readme: Path) -> None:
    dest.mkdir(parents=True)
    run("startproject", [sys.executable, "-m", "django", "startproject", PROJECT, str(dest)])
    for name, text in install_snippets(readme).items():
        target = dest / SNIPPET_TARGETS[name]
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("a", encoding="utf-8") as handle:
            handle.write("\n" + text)
    (dest / PROJECT / "deploy_settings.py").write_text(DEPLOY_SETTINGS, encoding="utf-8")


def host_env() -> dict[str, str]:
    env = dict(os.environ)
    # manage.py only sets a default: a caller's settings module (pytest's) must not leak in.
    for name in ("DJANGO_SETTINGS_MODULE", "PYTHONPATH"):
        env.pop(name, None)
    # Install step 5: the key is in the environment (no model is called here).
    env["ANTHROPIC_API_KEY"] = "sk-ant-host-site"
    return env


def run(step: str, argv: list[str], cwd: Path | None = None, echo: bool = False) -> str:
    started = time.monotonic()
    result = subprocess.run(
        argv, cwd=cwd, env=host_env(), capture_output=True, text=True, timeout=300
    )
    output = result.stdout + result.stderr
    if result.returncode != 0:
        raise StepFailed(f"{step}: exit {result.returncode}\n{output}")
    if echo:
        print(output, end="")
    print(f"host site: {step}: ok ({time.monotonic() - started:.1f} s)")
    return output


def check_without_admin_template(dest: Path) -> None:
    """Install step 4's template is what keeps ahentic.W002 quiet (the real ``manage.py``)."""
    template = dest / ADMIN_TEMPLATE
    kept = template.read_text(encoding="utf-8")
    template.unlink()
    try:
        output = run("manage.py check without the admin template", manage_py(dest, "check"), dest)
    finally:
        template.write_text(kept, encoding="utf-8")
    if "ahentic.W002" not in output:
        raise StepFailed(f"check without the admin template: no ahentic.W002\n{output}")


def manage_py(dest: Path, *args: str) -> list[str]:
    return [sys.executable, str(dest / "manage.py"), *args]


def in_child(dest: Path, part: str, checkout: Path | None) -> None:
    """Runs one part below in a fresh process (one Django start-up per settings module)."""
    argv = [sys.executable, "-I", str(Path(__file__).resolve()), part, str(dest)]
    if checkout:
        argv += ["--checkout", str(checkout)]
    run(part, argv, dest, echo=True)


# --- the parts that run in a child process, inside the host site ------------------------------


def setup_django(dest: Path, settings_module: str, checkout: Path | None) -> None:
    sys.path.insert(0, str(dest))
    os.environ["DJANGO_SETTINGS_MODULE"] = f"{PROJECT}.{settings_module}"
    import django

    django.setup()
    import orchestrator_app

    app_file = Path(orchestrator_app.__file__).resolve()
    print(f"  orchestrator_app from {app_file.parent}; Django {django.get_version()}")
    if checkout and app_file.is_relative_to(checkout.resolve()):
        raise StepFailed(f"orchestrator_app was imported from the checkout: {app_file}")


def command(step: str, name: str, **options) -> None:
    """``manage.py <name>`` in this process: the same command code without another start-up."""
    from django.core.management import CommandError, call_command

    started = time.monotonic()
    try:
        call_command(name, **options)
    except SystemExit as exit:  # migrate --check and makemigrations --check exit 1
        raise StepFailed(f"{step}: exit {exit.code}") from None
    except CommandError as error:  # SystemCheckError included
        raise StepFailed(f"{step}: {error}") from None
    print(f"  {step}: ok ({time.monotonic() - started:.1f} s)")


def deploy_part(dest: Path, checkout: Path | None) -> None:
    """``check --deploy`` and ``collectstatic`` with production settings."""
    setup_django(dest, "deploy_settings", checkout)
    command("check --deploy", "check", deploy=True, fail_level="WARNING")
    command("collectstatic", "collectstatic", interactive=False, verbosity=0)
    for name in ("ahentic/sidebar/main.js", "ahentic/sidebar.css"):
        if not (dest / "static-root" / name).is_file():
            raise StepFailed(f"collectstatic: {name} is missing from STATIC_ROOT")


def site_part(dest: Path, checkout: Path | None) -> None:
    """The checks, the migrations, then the smoke run over HTTP, with the site's settings."""
    import threading
    import urllib.error
    import urllib.parse
    import urllib.request
    from http.cookiejar import CookieJar
    from wsgiref.simple_server import WSGIRequestHandler, make_server

    setup_django(dest, "settings", checkout)
    command("check", "check", fail_level="WARNING")
    command("migrate", "migrate", interactive=False, verbosity=0)
    command("migrate --check", "migrate", check_unapplied=True, verbosity=0)
    command("makemigrations --check", "makemigrations", check_changes=True, dry_run=True)

    from django.contrib.auth.models import Permission, User
    from django.contrib.staticfiles.handlers import StaticFilesHandler
    from django.core.wsgi import get_wsgi_application

    # A staff user (to log in through the admin) granted the agent permission, as in step 5.
    user = User.objects.create_user("host-user", password="host-password", is_staff=True)
    user.user_permissions.add(
        Permission.objects.get(codename="use_agent", content_type__app_label="sessions_app")
    )

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args):
            pass

    server = make_server(
        "127.0.0.1", 0, StaticFilesHandler(get_wsgi_application()), handler_class=Quiet
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}"
    jar = CookieJar()
    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))

    def fetch(path, data=None, headers=None, opener=browser):
        request = urllib.request.Request(base + path, data=data, headers=headers or {})
        try:
            with opener.open(request, timeout=30) as response:
                return response.status, response.read().decode("utf-8")
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode("utf-8", "replace")

    def expect(what, status, body, wanted=200):
        if status != wanted:
            raise StepFailed(f"{what}: HTTP {status}, wanted {wanted}\n{body[:2000]}")
        print(f"  {what} -> {status}")

    try:
        status, body = fetch("/ahentic/v1/sessions", opener=urllib.request.build_opener())
        expect("GET /ahentic/v1/sessions, anonymous", status, body, 401)

        status, body = fetch("/admin/login/")
        expect("GET /admin/login/", status, body)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', body).group(1)
        form = {"username": "host-user", "password": "host-password"}
        form |= {"csrfmiddlewaretoken": token, "next": "/admin/"}
        status, body = fetch("/admin/login/", urllib.parse.urlencode(form).encode())
        expect("POST /admin/login/, then /admin/", status, body)
        for marker in ('id="ahentic-sidebar"', 'data-admin="1"', "ahentic/sidebar/main.js"):
            if marker not in body:
                raise StepFailed(f"the admin page has no sidebar ({marker!r} missing)")
        print("  the admin page renders the sidebar")

        csrf = next(c.value for c in jar if c.name == "csrftoken")
        status, body = fetch("/ahentic/v1/sessions")
        expect("GET /ahentic/v1/sessions", status, body)
        if json.loads(body)["sessions"] != []:
            raise StepFailed(f"a new user's session list is not empty: {body}")
        headers = {"Content-Type": "application/json", "X-CSRFToken": csrf}
        created = json.dumps({"title": "Host smoke"}).encode()
        status, body = fetch("/ahentic/v1/sessions", created, headers)
        expect("POST /ahentic/v1/sessions", status, body, 201)
        status, body = fetch("/ahentic/v1/sessions")
        titles = [s["title"] for s in json.loads(body)["sessions"]]
        if titles != ["Host smoke"]:
            raise StepFailed(f"the session list does not show the new session: {body}")
        print("  the session list shows the new session")

        status, body = fetch("/ahentic/v1/skills")
        expect("GET /ahentic/v1/skills", status, body)
        if "concise_writing" not in {s["name"] for s in json.loads(body)}:
            raise StepFailed(f"the bundled skill is missing from the catalog: {body}")

        for name, marker in (
            ("sidebar/main.js", "registerBrowserTool"),
            ("sidebar.css", ".ahentic"),
        ):
            status, body = fetch(f"/static/ahentic/{name}")
            expect(f"GET /static/ahentic/{name}", status, body)
            if marker not in body:
                raise StepFailed(f"/static/ahentic/{name} does not look like the sidebar's")
    finally:
        server.shutdown()
        server.server_close()


PARTS = {"deploy": deploy_part, "site": site_part}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("part", nargs="?", choices=["all", *PARTS], default="all")
    parser.add_argument("site", nargs="?", type=Path, help="a part's host site directory")
    parser.add_argument("--readme", type=Path)
    parser.add_argument("--dest", type=Path)
    parser.add_argument(
        "--checkout", type=Path, help="fail if the app is imported from under this directory"
    )
    args = parser.parse_args(argv)
    try:
        if args.part != "all":
            PARTS[args.part](args.site, args.checkout)
            return 0
        if not args.readme or not args.dest:
            parser.error("--readme and --dest are required")
        build(args.dest, args.readme)
        check_without_admin_template(args.dest)
        for part in PARTS:
            in_child(args.dest, part, args.checkout)
    except StepFailed as failure:
        print(f"host site: FAILED: {failure}", file=sys.stderr)
        return 1
    print("host site: all steps passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
