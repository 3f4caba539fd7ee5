"""Throwaway host sites made the way the README's install steps say, then checked and smoke-run.

    python -I tests/host_project.py --readme README.md --dest /tmp/sites [--checkout DIR]
        [--hosts readme,member,plain]

Each host is a site in ``DEST/<host>``:

1. ``django-admin startproject hostsite`` (the Django that this Python has installed);
2. the README's install snippets pasted in: the fenced blocks of "Installing into a host site"
   whose first line names their file (``# settings.py``, ``# urls.py``,
   ``{# templates/admin/base_site.html #}``); then what makes the host what it is (``HOSTS``:
   its user model, admin sites, static files storage, URL prefix), added as a host's developer
   would, before the first ``migrate`` (``makemigrations accounts`` for a custom user model);
3. ``manage.py check`` (no warning allowed), ``check --deploy`` with production settings, and
   (the README host) ``check`` again without the admin template, which must warn
   ``ahentic.W002``;
4. ``migrate``, ``migrate --check``, ``makemigrations --check`` and ``collectstatic``;
5. a smoke run over HTTP (a WSGI server on a free loopback port, the queue in django-q2's sync
   mode, the model the offline local Messages API of ``orchestrator_app.testing``): admin
   login, the admin page with the sidebar, ``GET``/``POST ahentic/v1/sessions``, the skills
   catalog and the sidebar's static files; then every persona (``PERSONAS``: the agent
   permission granted directly, through a group, not at all, a superuser) creates a session,
   lists, posts a message, polls, gets a 304 for the poll's ETag, and (staff) opens the Session
   admin's list and searches it by their login name, on every admin site of the host.

Several hosts are made side by side, each by this script in a process of its own (``--hosts``
with one name), their outputs printed whole, in order. The hosts (``HOSTS``): ``readme`` is the README alone (``auth.User``); ``member`` has
``accounts.Member`` (UUID primary key, ``USERNAME_FIELD = "email"``, no ``username``), a second
``AdminSite`` holding the app's models, ``ManifestStaticFilesStorage`` with ``DEBUG = False``
(the static files served from ``STATIC_ROOT``, as a web server would) and the site mounted under
``/sub``; ``plain`` has a user model without ``PermissionsMixin`` whose permissions come from an
authentication backend. A step listed in ``KNOWN_FAILURES`` must fail (strict: once it passes,
the entry goes).

Two callers: tests/docs/test_readme_install.py (against the checkout's editable install) and
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
from dataclasses import dataclass, field
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
# A cache the web and worker processes share (ahentic.W014: the approval mails read the polls).
CACHES = {"default": {"BACKEND": "django.core.cache.backends.db.DatabaseCache", "LOCATION": "cache"}}
# http redirect URIs stay allowed for native clients' loopback callbacks (Claude Code); the MCP
# endpoint's registration takes http only on loopback hosts (docs/howto/connectors.md).
SILENCED_SYSTEM_CHECKS = ["oauth2_provider.W008"]
if "MAILERS" in globals():  # Django 6.1's startproject mails to the console
    MAILERS = {"default": {"BACKEND": "django.core.mail.backends.smtp.EmailBackend"}}
"""


# What the smoke run changes in every host (not a host's choice): the queue runs tasks in the
# web process, so a message's run is over when its POST returns; errors are printed.
SMOKE_SETTINGS = """\
from .settings import *  # noqa: F403

Q_CLUSTER = {**Q_CLUSTER, "sync": True, "log_level": "WARNING"}  # noqa: F405
# Four personas sign in: PBKDF2's 1,000,000 rounds would be most of the run's time.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"stderr": {"class": "logging.StreamHandler"}},
    "loggers": {"django.request": {"handlers": ["stderr"], "level": "ERROR"}},
}
"""

MEMBER_MODELS = '''\
import uuid

from django.contrib.auth.base_user import AbstractBaseUser, BaseUserManager
from django.contrib.auth.models import PermissionsMixin
from django.db import models


class MemberManager(BaseUserManager):
    use_in_migrations = True

    def create_user(self, email, password=None, **fields):
        member = self.model(email=self.normalize_email(email), **fields)
        member.set_password(password)
        member.save(using=self._db)
        return member

    def create_superuser(self, email, password=None, **fields):
        return self.create_user(email, password, is_staff=True, is_superuser=True, **fields)


class Member(AbstractBaseUser, PermissionsMixin):
    """Signs in by email; no username, no first or last name, a UUID primary key."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    email = models.EmailField(unique=True)
    nickname = models.CharField(max_length=50, blank=True)
    is_staff = models.BooleanField(default=False)
    is_active = models.BooleanField(default=True)

    objects = MemberManager()

    USERNAME_FIELD = "email"
    EMAIL_FIELD = "email"

    def __str__(self):
        return self.nickname or self.email
'''

# A user model without PermissionsMixin: no groups, no user_permissions. What it may do comes from
# its own fields, read by an authentication backend (Django's ModelBackend with the two lookups
# replaced); has_perm asks the backends, as PermissionsMixin's does.
PLAIN_MODELS = """\
from django.contrib import auth
from django.contrib.auth.base_user import AbstractBaseUser, BaseUserManager
from django.db import models


class OperatorManager(BaseUserManager):
    use_in_migrations = True

    def create_user(self, handle, password=None, **fields):
        operator = self.model(handle=handle, **fields)
        operator.set_password(password)
        operator.save(using=self._db)
        return operator

    def create_superuser(self, handle, password=None, **fields):
        return self.create_user(handle, password, is_staff=True, is_superuser=True, **fields)


class Operator(AbstractBaseUser):
    handle = models.CharField(max_length=40, unique=True)
    is_staff = models.BooleanField(default=False)
    is_superuser = models.BooleanField(default=False)
    is_active = models.BooleanField(default=True)
    grants = models.TextField(blank=True, help_text="app_label.codename, space-separated")
    role = models.CharField(max_length=20, blank=True)

    objects = OperatorManager()

    USERNAME_FIELD = "handle"

    def _backends_say(self, method, *args):
        return self.is_active and any(
            getattr(backend, method)(self, *args)
            for backend in auth.get_backends()
            if hasattr(backend, method)
        )

    def has_perm(self, perm, obj=None):
        return self._backends_say("has_perm", perm, obj)

    def has_perms(self, perm_list, obj=None):
        return all(self.has_perm(perm, obj) for perm in perm_list)

    def has_module_perms(self, app_label):
        return self._backends_say("has_module_perms", app_label)
"""

PLAIN_BACKENDS = '''\
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import Permission
from django.db.models import Q

ROLE_GRANTS = {"agents": ["sessions_app.use_agent", "sessions_app.view_session"]}


def permissions(names):
    wanted = Q(pk__in=[])
    for name in names:
        app_label, _, codename = name.partition(".")
        wanted |= Q(content_type__app_label=app_label, codename=codename)
    return Permission.objects.filter(wanted)


class FieldBackend(ModelBackend):
    """ModelBackend's sign-in and permission logic; grants from the operator's own fields."""

    def _get_user_permissions(self, user_obj):
        return permissions(user_obj.grants.split())

    def _get_group_permissions(self, user_obj):
        return permissions(ROLE_GRANTS.get(user_obj.role, ()))
'''

OPS_ADMIN = '''\
"""The host's second admin site, with the app's models registered on it too."""

from django.contrib import admin

from artifacts_app.admin import ArtifactAdmin
from artifacts_app.models import Artifact
from orchestrator_app.admin import ToolGrantAdmin, UsageRecordAdmin
from orchestrator_app.models import ToolGrant, UsageRecord
from sessions_app.admin import EventAdmin, SessionAdmin, TraceEventAdmin
from sessions_app.models import Event, Session, TraceEvent

ops_site = admin.AdminSite(name="ops")
ops_site.register(Session, SessionAdmin)
ops_site.register(Event, EventAdmin)
ops_site.register(TraceEvent, TraceEventAdmin)
ops_site.register(Artifact, ArtifactAdmin)
ops_site.register(UsageRecord, UsageRecordAdmin)
ops_site.register(ToolGrant, ToolGrantAdmin)
'''


@dataclass(frozen=True)
class Host:
    """What a host adds to the README's site: files, and lines appended to settings/urls."""

    name: str
    files: dict[str, str] = field(default_factory=dict)
    settings: str = ""
    urls: str = ""
    user_app: bool = False  # an ``accounts`` app with the user model: makemigrations first
    prefix: str = ""  # the URL sub-path the site is mounted under (FORCE_SCRIPT_NAME)
    admin_sites: tuple[str, ...] = ("admin",)
    static_root: bool = False  # DEBUG = False: static files from STATIC_ROOT (collectstatic)
    groups: bool = True  # the user model has PermissionsMixin's groups and user_permissions


HOSTS = {
    "readme": Host("readme"),
    "member": Host(
        "member",
        files={
            "accounts/__init__.py": "",
            "accounts/migrations/__init__.py": "",
            "accounts/models.py": MEMBER_MODELS,
            f"{PROJECT}/ops_admin.py": OPS_ADMIN,
        },
        settings="""\
# The host's own choices, made before its first migrate.
INSTALLED_APPS += ["accounts"]
AUTH_USER_MODEL = "accounts.Member"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
FORCE_SCRIPT_NAME = "/sub"  # mounted under a sub-path by the web server
STATIC_ROOT = BASE_DIR / "static-root"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.ManifestStaticFilesStorage"},
}
""",
        urls="""\
from hostsite.ops_admin import ops_site

urlpatterns += [path("ops/", ops_site.urls)]
""",
        user_app=True,
        prefix="/sub",
        admin_sites=("admin", "ops"),
        static_root=True,
    ),
    "plain": Host(
        "plain",
        files={
            "accounts/__init__.py": "",
            "accounts/migrations/__init__.py": "",
            "accounts/models.py": PLAIN_MODELS,
            "accounts/backends.py": PLAIN_BACKENDS,
        },
        settings="""\
# The host's own choices, made before its first migrate.
INSTALLED_APPS += ["accounts"]
AUTH_USER_MODEL = "accounts.Operator"
AUTHENTICATION_BACKENDS = ["accounts.backends.FieldBackend"]
""",
        user_app=True,
        groups=False,
    ),
}

# Who uses the API in every host: staff personas also open the admin.
PERSONAS = {
    "direct": {"staff": True, "grant": "direct"},
    "group": {"staff": True, "grant": "group"},
    "nogrant": {"staff": False, "grant": None},
    "superuser": {"staff": True, "grant": "superuser"},
}
GRANTED = ("use_agent", "view_session")  # sessions_app's: the API, and the Session admin

# (host, persona, step) -> why it fails today. Such a step must fail: once it passes, it is
# reported as XPASS and fails the run, so the entry goes with the fix. A step not reached (after
# a failed create) is neither. Empty: every host and persona passes.
KNOWN_FAILURES: dict[tuple[str, str, str], str] = {}


class StepFailed(Exception):
    pass


def install_snippets(readme: Path, section: str = INSTALL_SECTION) -> dict[str, str]:
    """The install section's file snippets, keyed by the file named on their first line
    (``section``: the heading of the steps; the docs' install page calls it "## Steps")."""
    text = readme.read_text(encoding="utf-8")
    start = text.find(section)
    if start < 0:
        raise StepFailed(f"{readme.name} has no {section!r} section")
    end = text.find("\n## ", start + len(section))
    steps = text[start : end if end > 0 else len(text)]
    snippets: dict[str, str] = {}
    for match in re.finditer(r"^( *)```[a-z]*\n(.*?)^\1```", steps, re.M | re.S):
        body = textwrap.dedent(match.group(2))
        first, _, rest = body.partition("\n")
        name = re.fullmatch(r"(?:#|\{#)\s*(\S+)\s*(?:#\})?", first.strip())
        if name and name.group(1) in SNIPPET_TARGETS:
            snippets[name.group(1)] = rest
    missing = sorted(set(SNIPPET_TARGETS) - set(snippets))
    if missing:
        raise StepFailed(f"README install section has no snippet for {', '.join(missing)}")
    return snippets


def build(dest: Path, readme: Path, host: Host) -> None:
    dest.mkdir(parents=True)
    run("startproject", [sys.executable, "-m", "django", "startproject", PROJECT, str(dest)])
    for name, text in install_snippets(readme).items():
        target = dest / SNIPPET_TARGETS[name]
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("a", encoding="utf-8") as handle:
            handle.write("\n" + text)
    for name, text in host.files.items():
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        (dest / name).write_text(text, encoding="utf-8")
    for name, text in (("settings.py", host.settings), ("urls.py", host.urls)):
        if text:
            with (dest / PROJECT / name).open("a", encoding="utf-8") as handle:
                handle.write("\n" + text)
    (dest / PROJECT / "deploy_settings.py").write_text(DEPLOY_SETTINGS, encoding="utf-8")
    (dest / PROJECT / "smoke_settings.py").write_text(SMOKE_SETTINGS, encoding="utf-8")


def host_env() -> dict[str, str]:
    env = dict(os.environ)
    # manage.py only sets a default: a caller's settings module (pytest's) must not leak in.
    # A caller's local model server (ANTHROPIC_BASE_URL) must not reach `check --deploy`
    # (ahentic.W004); the smoke run starts its own.
    for name in ("DJANGO_SETTINGS_MODULE", "PYTHONPATH", "ANTHROPIC_BASE_URL"):
        env.pop(name, None)
    # Install step 5: the key is in the environment (the smoke run's model is a local server).
    env["ANTHROPIC_API_KEY"] = "sk-ant-host-site"
    return env


def run(
    step: str, argv: list[str], cwd: Path | None = None, echo: bool = False, label: str = "site"
) -> str:
    started = time.monotonic()
    result = subprocess.run(
        argv, cwd=cwd, env=host_env(), capture_output=True, text=True, timeout=300
    )
    output = result.stdout + result.stderr
    if result.returncode != 0:
        raise StepFailed(f"{step}: exit {result.returncode}\n{output}")
    if echo:
        print(output, end="")
    print(f"host {label}: {step}: ok ({time.monotonic() - started:.1f} s)")
    return output


def check_without_admin_template(dest: Path) -> None:
    """Install step 4's template is what keeps ahentic.W002 quiet (the real ``manage.py``)."""
    template = dest / ADMIN_TEMPLATE
    kept = template.read_text(encoding="utf-8")
    template.unlink()
    try:
        output = run(
            "manage.py check without the admin template",
            manage_py(dest, "check"),
            dest,
            label="readme",
        )
    finally:
        template.write_text(kept, encoding="utf-8")
    if "ahentic.W002" not in output:
        raise StepFailed(f"check without the admin template: no ahentic.W002\n{output}")


def manage_py(dest: Path, *args: str) -> list[str]:
    return [sys.executable, str(dest / "manage.py"), *args]


def in_child(dest: Path, part: str, checkout: Path | None, host: Host) -> None:
    """Runs one part below in a fresh process (one Django start-up per settings module)."""
    argv = [sys.executable, "-I", str(Path(__file__).resolve()), part, str(dest)]
    argv += ["--hosts", host.name]
    if checkout:
        argv += ["--checkout", str(checkout)]
    run(part, argv, dest, echo=True, label=host.name)


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


def deploy_part(dest: Path, checkout: Path | None, host: Host) -> None:
    """``check --deploy`` and ``collectstatic`` with production settings."""
    setup_django(dest, "deploy_settings", checkout)
    command("check --deploy", "check", deploy=True, fail_level="WARNING")
    command("collectstatic", "collectstatic", interactive=False, verbosity=0)
    for name in ("ahentic/sidebar/main.js", "ahentic/sidebar.css"):
        if not (dest / "static-root" / name).is_file():
            raise StepFailed(f"collectstatic: {name} is missing from STATIC_ROOT")
    if host.static_root and not (dest / "static-root" / "staticfiles.json").is_file():
        raise StepFailed("collectstatic: ManifestStaticFilesStorage wrote no staticfiles.json")


class Browser:
    """One user's cookies over HTTP to the site (``path`` is below the site's mount point)."""

    def __init__(self, base: str, prefix: str):
        import urllib.request
        from http.cookiejar import CookieJar

        self.base, self.prefix, self.jar = base, prefix, CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def fetch(self, path, data=None, headers=None, *, absolute=False):
        """(status, body, headers); ``absolute``: ``path`` already holds the mount point."""
        import urllib.error
        import urllib.request

        url = self.base + (path if absolute else self.prefix + path)
        request = urllib.request.Request(url, data=data, headers=headers or {})
        try:
            with self.opener.open(request, timeout=60) as response:
                return response.status, response.read().decode("utf-8"), response.headers
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode("utf-8", "replace"), error.headers

    def cookie(self, name: str) -> str | None:
        return next((c.value for c in self.jar if c.name == name), None)

    def set_cookie(self, name: str, value: str) -> None:
        from http.cookiejar import Cookie

        self.jar.set_cookie(
            Cookie(0, name, value, None, False, "127.0.0.1", False, False, "/", True, False,
                   None, False, None, None, {})
        )  # fmt: skip

    def admin_login(self, login: str, password: str, site: str = "admin"):
        import urllib.parse

        status, body, _ = self.fetch(f"/{site}/login/")
        if status != 200:
            return status, body
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', body).group(1)
        form = {"username": login, "password": password, "csrfmiddlewaretoken": token}
        form["next"] = f"{self.prefix}/{site}/"
        status, body, _ = self.fetch(f"/{site}/login/", urllib.parse.urlencode(form).encode())
        return status, body

    def json_headers(self) -> dict[str, str]:
        return {"Content-Type": "application/json", "X-CSRFToken": self.cookie("csrftoken") or ""}


def brief(body: str) -> str:
    """An error body made short: a Django error page's title and exception, else its start."""
    if body.lstrip().startswith("<"):
        title = re.search(r"<title>(.*?)</title>", body, re.S)
        value = re.search(r'<pre class="exception_value">(.*?)</pre>', body, re.S)
        return " | ".join(m.group(1).strip() for m in (title, value) if m)
    return body[:1500]


def listed_sessions(body: str) -> list[dict]:
    data = json.loads(body)
    return data["sessions"] if "sessions" in data else data["results"]


class Matrix:
    """Each persona's steps in one host: a failure is recorded (the run goes on) unless it is a
    known one; a known failure that passes is an error too (XPASS)."""

    def __init__(self, host: Host):
        self.host, self.failures, self.xfailed = host, [], []
        self.clock = time.monotonic()

    def expect(self, persona: str, step: str, ok: bool, detail: str) -> bool:
        known = KNOWN_FAILURES.get((self.host.name, persona, step))
        took, self.clock = time.monotonic() - self.clock, time.monotonic()
        if ok and known:
            self.failures.append(f"{persona}: {step}: XPASS (listed as failing: {known})")
            print(f"  {persona}: {step}: XPASS")
        elif ok:
            print(f"  {persona}: {step}: ok ({took:.2f} s)")
        elif known:
            self.xfailed.append(f"{persona}: {step}")
            print(f"  {persona}: {step}: XFAIL ({known}): {detail[:300]}")
        else:
            self.failures.append(f"{persona}: {step}: {detail[:3000]}")
            print(f"  {persona}: {step}: FAILED: {detail[:3000]}")
        return ok

    def status(self, persona, step, response, wanted) -> bool:
        status, body, _ = response
        detail = f"HTTP {status}, wanted {wanted}: {brief(body)}"
        return self.expect(persona, step, status == wanted, detail)

    def skipped(self, persona: str, steps: str, why: str) -> None:
        print(f"  {persona}: {steps}: skipped ({why})")


def login_name(persona: str) -> str:
    from django.contrib.auth import get_user_model

    email = get_user_model().USERNAME_FIELD == "email"
    return f"{persona}@example.com" if email else f"{persona}-user"


def make_persona(name: str, host: Host):
    """A user for ``PERSONAS[name]``, with its login name: the agent permission (and the view
    permission of sessions) granted directly, through a group (with the ``plain`` host's user
    model: a role its backend maps to them), not at all, or a superuser."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group, Permission

    spec = PERSONAS[name]
    user_model = get_user_model()
    login = login_name(name)
    manager = user_model._default_manager
    fields = {user_model.USERNAME_FIELD: login, "password": "host-password"}
    if any(f.name == "nickname" for f in user_model._meta.get_fields()):
        fields["nickname"] = f"The {name} persona"  # Member's __str__, not its login name
    if spec["grant"] == "superuser":
        return manager.create_superuser(**fields), login
    user = manager.create_user(**fields, is_staff=spec["staff"])
    perms = Permission.objects.filter(content_type__app_label="sessions_app", codename__in=GRANTED)
    if spec["grant"] == "direct" and host.groups:
        user.user_permissions.add(*perms)
    elif spec["grant"] == "group" and host.groups:
        group, _ = Group.objects.get_or_create(name="agent users")
        group.permissions.add(*perms)
        user.groups.add(group)
    elif spec["grant"] == "direct":
        user.grants = " ".join(f"sessions_app.{codename}" for codename in GRANTED)
        user.save()
    elif spec["grant"] == "group":
        user.role = "agents"
        user.save()
    return user, login


def run_persona(matrix: Matrix, base: str, name: str, others: dict) -> None:
    """One persona through the API and (staff) the admin; ``others`` collects the session ids
    of the personas before it (the no-grant persona polls one of them)."""
    import urllib.parse

    from django.conf import settings
    from django.test import Client

    host, spec = matrix.host, PERSONAS[name]
    user, login = make_persona(name, host)
    browser = Browser(base, host.prefix)
    api = "/ahentic/v1"
    if spec["staff"]:
        status, body = browser.admin_login(login, "host-password")
        ok = status == 200 and "logout" in body.lower() and 'name="username"' not in body
        if not matrix.expect(name, "admin login", ok, f"HTTP {status}\n{body}"):
            return
    else:
        browser.fetch("/admin/login/")  # the CSRF cookie
        client = Client()
        client.force_login(user)
        browser.set_cookie(
            settings.SESSION_COOKIE_NAME, client.cookies[settings.SESSION_COOKIE_NAME].value
        )

    headers = browser.json_headers()
    if not spec["grant"]:
        for step, path, data in (
            ("list", f"{api}/sessions", None),
            ("create", f"{api}/sessions", b'{"title": "Not allowed"}'),
            ("poll", f"{api}/sessions/{next(iter(others.values()), '0')}", None),
            ("message", f"{api}/sessions/{next(iter(others.values()), '0')}/messages",
             b'{"content": "Hello?"}'),
        ):  # fmt: skip
            matrix.status(name, f"{step} -> 403", browser.fetch(path, data, headers), 403)
        return

    title = f"Session of {name}"
    response = browser.fetch(f"{api}/sessions", json.dumps({"title": title}).encode(), headers)
    if not matrix.status(name, "create", response, 201):
        matrix.skipped(name, "list, message, poll, 304, admin", "no session")
        return
    session_id = json.loads(response[1])["id"]
    others[name] = session_id

    response = browser.fetch(f"{api}/sessions")
    if matrix.status(name, "list", response, 200):
        ids = [s["id"] for s in listed_sessions(response[1])]
        matrix.expect(name, "list shows own session only", ids == [session_id], f"{ids}")

    response = browser.fetch(
        f"{api}/sessions/{session_id}/messages", b'{"content": "Hello from the host"}', headers
    )
    matrix.status(name, "message", response, 202)
    poll = f"{api}/sessions/{session_id}"
    deadline, response, data = time.monotonic() + 30, (0, "", {}), {}
    while time.monotonic() < deadline:
        response = browser.fetch(poll)
        if response[0] != 200:
            break
        data = json.loads(response[1])
        if data.get("status") not in ("running", "queued"):
            break
        time.sleep(0.2)
    if matrix.status(name, "poll", response, 200):
        replies = [m["content"] for m in data.get("messages", []) if m.get("role") == "assistant"]
        ok = data.get("status") == "idle" and "Done." in replies
        matrix.expect(name, "poll shows the model's reply", ok, f"status {data.get('status')}, "
                      f"{json.dumps(data.get('messages'))[:1500]}")  # fmt: skip
        etag = response[2].get("ETag")
        matrix.expect(name, "poll has an ETag", bool(etag), f"headers {dict(response[2])}")
        if etag:
            again = browser.fetch(poll, headers={"If-None-Match": etag})
            matrix.status(name, "304", again, 304)

    if not spec["staff"]:
        return
    for site in host.admin_sites:
        changelist = f"/{site}/sessions_app/session/"
        response = browser.fetch(changelist)
        if matrix.status(name, f"{site} list", response, 200):
            matrix.expect(name, f"{site} list shows the session", session_id in response[1],
                          "the session is not on the list")  # fmt: skip
        query = urllib.parse.urlencode({"q": login})
        response = browser.fetch(f"{changelist}?{query}")
        if matrix.status(name, f"{site} search", response, 200):
            found = set(
                re.findall(rf"{re.escape(host.prefix + changelist)}([0-9a-f-]{{36}})/", response[1])
            )
            matrix.expect(name, f"{site} search finds the session", found == {session_id},
                          f"found {sorted(found)}")  # fmt: skip
            # The owner column is get_username(), whatever the user model's __str__ says.
            shown = f">{login}<" in response[1]
            matrix.expect(name, f"{site} list shows the owner's login name", shown, login)
        if spec["grant"] == "superuser":
            response = browser.fetch(f"{changelist}{session_id}/change/")
            if matrix.status(name, f"{site} session page", response, 200):
                links = re.findall(r'href="([^"]*/sessions_app/event/[^"]*)"', response[1])
                wanted = f"{host.prefix}/{site}/"
                ok = bool(links) and all(link.startswith(wanted) for link in links)
                matrix.expect(name, f"{site} session page links to itself", ok, f"{links}")


def check_sidebar_static(browser: Browser, host: Host) -> None:
    """The admin page's sidebar assets load from the URLs it names (hashed by
    ``ManifestStaticFilesStorage`` where the host uses it), and so do the ES modules they
    import, followed from ``main.js``."""
    import urllib.parse

    status, body, _ = browser.fetch("/admin/")
    api = re.search(r'data-api="([^"]+)"', body)
    if not api or api.group(1) != f"{host.prefix}/ahentic/v1/":
        raise StepFailed(f"the sidebar's API base is {api and api.group(1)!r}, not under the mount")
    assets = re.findall(r'(?:src|href)="([^"]*/ahentic/[^"]+\.(?:js|css))"', body)
    if not assets:
        raise StepFailed("the admin page names no sidebar assets")
    seen, queue = set(), [urllib.parse.urljoin(browser.base, a) for a in assets]
    while queue:
        url = queue.pop()
        if url in seen:
            continue
        seen.add(url)
        path = urllib.parse.urlsplit(url).path
        if not path.startswith(f"{host.prefix}/static/"):
            raise StepFailed(f"a sidebar asset is not under the mount's static URL: {path}")
        status, text, _ = browser.fetch(path, absolute=True)
        if status != 200 or not text:
            raise StepFailed(f"GET {path}: HTTP {status}")
        if path.endswith(".js"):
            for module in re.findall(r'^\s*import\s[^;]*?from\s+"([^"]+)"', text, re.M):
                queue.append(urllib.parse.urljoin(url, module))
    hashed = [a for a in assets if re.search(r"\.[0-9a-f]{12}\.(?:js|css)$", a)]
    if host.static_root and len(hashed) != len(assets):
        raise StepFailed(f"the sidebar's assets are not the manifest's hashed names: {assets}")
    print(f"  the sidebar's static files load ({len(seen)} files, from {assets[0]})")


def static_root_app(app, host: Host, static_root: Path):
    """The site as a web server in front of it serves it: mounted under ``host.prefix`` (the
    prefix is taken off PATH_INFO; FORCE_SCRIPT_NAME puts it back into URLs), and with DEBUG
    off the static files from STATIC_ROOT."""
    import mimetypes

    static = f"{host.prefix}/static/"

    def wsgi(environ, start_response):
        path = environ.get("PATH_INFO", "")
        if host.static_root and path.startswith(static):
            file = (static_root / path[len(static) :]).resolve()
            if file.is_file() and file.is_relative_to(static_root.resolve()):
                kind = mimetypes.guess_type(file.name)[0] or "application/octet-stream"
                start_response("200 OK", [("Content-Type", kind)])
                return [file.read_bytes()]
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"not found"]
        if host.prefix:
            if not (path + "/").startswith(host.prefix + "/"):
                start_response("404 Not Found", [("Content-Type", "text/plain")])
                return [b"not under the mount point"]
            environ = {**environ, "SCRIPT_NAME": host.prefix}
            environ["PATH_INFO"] = path[len(host.prefix) :] or "/"
        return app(environ, start_response)

    return wsgi


def site_part(dest: Path, checkout: Path | None, host: Host) -> None:
    """The checks, the migrations, then the smoke run over HTTP, with the site's settings."""
    import threading
    from wsgiref.simple_server import WSGIRequestHandler, make_server

    setup_django(dest, "smoke_settings", checkout)
    command("check", "check", fail_level="WARNING")
    command("migrate", "migrate", interactive=False, verbosity=0)
    command("migrate --check", "migrate", check_unapplied=True, verbosity=0)
    command("makemigrations --check", "makemigrations", check_changes=True, dry_run=True)

    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.contrib.staticfiles.handlers import StaticFilesHandler
    from django.core.wsgi import get_wsgi_application

    from orchestrator_app.testing.localapi import LocalMessagesServer

    user_model = get_user_model()
    print(f"  user model {user_model._meta.label}, USERNAME_FIELD {user_model.USERNAME_FIELD!r}")
    # The model: the offline local Messages API, answering "Done." (read at each call).
    model = LocalMessagesServer().start()
    os.environ["ANTHROPIC_BASE_URL"] = model.url

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args):
            pass

    app = get_wsgi_application()
    if not host.static_root:
        app = StaticFilesHandler(app)  # runserver's way (DEBUG)
    app = static_root_app(app, host, Path(settings.STATIC_ROOT or dest / "static-root"))
    server = make_server("127.0.0.1", 0, app, handler_class=Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}"
    try:
        if host.name == "readme":
            readme_smoke_run(base, host)
        matrix = Matrix(host)
        sessions: dict[str, str] = {}
        for name in PERSONAS:
            run_persona(matrix, base, name, sessions)
        superuser = Browser(base, host.prefix)
        superuser.admin_login(login_name("superuser"), "host-password")
        check_sidebar_static(superuser, host)
    finally:
        server.shutdown()
        server.server_close()
        model.stop()
    if matrix.xfailed:
        print(f"  known failures (KNOWN_FAILURES): {len(matrix.xfailed)}")
    if matrix.failures:
        raise StepFailed(
            f"host {host.name}: the personas' steps failed:\n" + "\n".join(matrix.failures)
        )
    print(f"  host {host.name}: every persona's steps passed")


def readme_smoke_run(base: str, host: Host) -> None:
    """Install step 5 as written: a staff user granted the agent permission."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission

    user = get_user_model().objects.create_user(
        "host-user", password="host-password", is_staff=True
    )
    user.user_permissions.add(
        Permission.objects.get(codename="use_agent", content_type__app_label="sessions_app")
    )
    anonymous, browser = Browser(base, host.prefix), Browser(base, host.prefix)

    def expect(what, response, wanted=200):
        status, body, _ = response
        if status != wanted:
            raise StepFailed(f"{what}: HTTP {status}, wanted {wanted}\n{body[:2000]}")
        print(f"  {what} -> {status}")
        return body

    expect("GET /ahentic/v1/sessions, anonymous", anonymous.fetch("/ahentic/v1/sessions"), 401)
    status, body = browser.admin_login("host-user", "host-password")
    expect("POST /admin/login/, then /admin/", (status, body, {}))
    for marker in ('id="ahentic-sidebar"', 'data-admin="1"', "ahentic/sidebar/main.js"):
        if marker not in body:
            raise StepFailed(f"the admin page has no sidebar ({marker!r} missing)")
    print("  the admin page renders the sidebar")

    body = expect("GET /ahentic/v1/sessions", browser.fetch("/ahentic/v1/sessions"))
    if listed_sessions(body) != []:
        raise StepFailed(f"a new user's session list is not empty: {body}")
    created = json.dumps({"title": "Host smoke"}).encode()
    expect(
        "POST /ahentic/v1/sessions",
        browser.fetch("/ahentic/v1/sessions", created, browser.json_headers()),
        201,
    )
    body = expect("GET /ahentic/v1/sessions", browser.fetch("/ahentic/v1/sessions"))
    if [s["title"] for s in listed_sessions(body)] != ["Host smoke"]:
        raise StepFailed(f"the session list does not show the new session: {body}")
    print("  the session list shows the new session")

    body = expect("GET /ahentic/v1/skills", browser.fetch("/ahentic/v1/skills"))
    if "concise_writing" not in {s["name"] for s in json.loads(body)}:
        raise StepFailed(f"the bundled skill is missing from the catalog: {body}")
    for name, marker in (("sidebar/main.js", "registerBrowserTool"), ("sidebar.css", ".ahentic")):
        body = expect(f"GET /static/ahentic/{name}", browser.fetch(f"/static/ahentic/{name}"))
        if marker not in body:
            raise StepFailed(f"/static/ahentic/{name} does not look like the sidebar's")


PARTS = {"deploy": deploy_part, "site": site_part}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("part", nargs="?", choices=["all", *PARTS], default="all")
    parser.add_argument("site", nargs="?", type=Path, help="a part's host site directory")
    parser.add_argument("--readme", type=Path)
    parser.add_argument("--dest", type=Path, help="a new directory: one site in it per host")
    parser.add_argument(
        "--hosts", default=",".join(HOSTS), help=f"comma-separated, of {', '.join(HOSTS)}"
    )
    parser.add_argument(
        "--checkout", type=Path, help="fail if the app is imported from under this directory"
    )
    args = parser.parse_args(argv)
    hosts = [HOSTS[name] for name in args.hosts.split(",")]
    if args.part != "all":
        try:
            PARTS[args.part](args.site, args.checkout, hosts[0])
        except StepFailed as failure:
            print(f"host site: FAILED: {failure}", file=sys.stderr)
            return 1
        return 0
    if not args.readme or not args.dest:
        parser.error("--readme and --dest are required")
    if len(hosts) > 1:
        failed = make_hosts_at_once(hosts, args)
    else:
        failed = make_hosts_in_turn(hosts, args)
    if failed:
        print(f"host sites: FAILED: {', '.join(failed)}", file=sys.stderr)
        return 1
    print("host sites: all steps passed")
    return 0


def make_hosts_in_turn(hosts: list[Host], args: argparse.Namespace) -> list[str]:
    """Each host to its end: one host's failure does not hide another's. The failed hosts."""
    failed = []
    for host in hosts:
        started = time.monotonic()
        try:
            make_host(host, args.dest / host.name, args.readme, args.checkout)
        except StepFailed as failure:
            print(f"host {host.name}: FAILED: {failure}", file=sys.stderr)
            failed.append(host.name)
            continue
        print(f"host {host.name}: all steps passed ({time.monotonic() - started:.1f} s)")
    return failed


def make_hosts_at_once(hosts: list[Host], args: argparse.Namespace) -> list[str]:
    """Every host in a process of its own (this script with ``--hosts <one>``), all started at
    once: a host's steps are one process after another, so hosts side by side use the cores
    that one host leaves idle. Their outputs are printed whole, in the order of ``hosts``.
    The failed hosts."""
    from concurrent.futures import ThreadPoolExecutor

    args.dest.mkdir(parents=True, exist_ok=True)

    def make(host: Host) -> subprocess.CompletedProcess:
        argv = [sys.executable, "-I", str(Path(__file__).resolve()), "--hosts", host.name]
        argv += ["--readme", str(args.readme), "--dest", str(args.dest)]
        if args.checkout:
            argv += ["--checkout", str(args.checkout)]
        return subprocess.run(argv, capture_output=True, text=True, timeout=900)

    with ThreadPoolExecutor(max_workers=len(hosts)) as pool:
        results = list(pool.map(make, hosts))
    failed = []
    for host, result in zip(hosts, results, strict=True):
        sys.stdout.write(result.stdout)
        sys.stderr.write(result.stderr)
        if result.returncode != 0:
            failed.append(host.name)
    sys.stdout.flush()
    return failed


def make_host(host: Host, site: Path, readme: Path, checkout: Path | None) -> None:
    build(site, readme, host)
    if host.name == "readme":
        check_without_admin_template(site)
    if host.user_app:  # the user model's migration, before the first migrate
        run("makemigrations accounts", manage_py(site, "makemigrations", "accounts"), site,
            label=host.name)  # fmt: skip
    for part in PARTS:
        in_child(site, part, checkout, host)


if __name__ == "__main__":
    sys.exit(main())
