"""The documentation (README.md and docs/**/*.md) stays true to the code.

Every code block is checked by its language: Python compiles, its imports resolve and its
``AHENTIC`` keys exist and pass the system checks; ``manage.py`` commands and their options
exist; ``make`` targets exist; templates compile and what they extend exists; JSON parses;
JavaScript parses and names the sidebar's real API. The install page's file snippets are the
README's (tests/docs/test_readme_install.py pastes those into new sites), and its later snippets
run (the sidebar on a page of the site, the grant, the login template). The reference pages list
every setting with its default, every route, payload key, system check, signal and management
command, and nothing that is gone. `mkdocs build --strict` (.ci/browser-leg) checks the links.
"""

import ast
import importlib
import inspect
import json
import re
import shlex
import shutil
import subprocess
import textwrap
from dataclasses import dataclass

import pytest
from django.core.checks import run_checks
from django.core.management import CommandError, get_commands, load_command_class
from django.dispatch import Signal
from django.template import engines
from django.test import override_settings

from orchestrator_app import signals
from orchestrator_app.tools import tool
from sessions_app import agents
from sessions_app.conf import DEFAULTS
from tests import host_project
from tests.support.paths import ROOT

DOCS = ROOT / "docs"
README = ROOT / "README.md"
PAGES = sorted(DOCS.rglob("*.md"))
APPS = ("sessions_app", "artifacts_app", "orchestrator_app")
# A fenced block, indented or not (inside a list item): its language and its text.
FENCE = re.compile(r"^( *)```([\w-]*)[^\n]*\n(.*?)^\1```", re.M | re.S)
ROW = re.compile(r"^\| `([^`]+)` \| (.*?) \|", re.M)


@dataclass(frozen=True)
class Snippet:
    where: str
    language: str
    code: str


def snippets() -> list[Snippet]:
    found = []
    for path in [README, *PAGES]:
        text = path.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            where = f"{path.relative_to(ROOT)}:{line}"
            found.append(Snippet(where, match.group(2), textwrap.dedent(match.group(3))))
    return found


def page(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start : end if end > 0 else len(text)]


# --- the code blocks -----------------------------------------------------------------------------


def check_imports(tree: ast.AST) -> None:
    """Absolute imports of installed packages resolve, down to each imported name."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                importlib.import_module(alias.name)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] in ("notes", "myapp", "mysite"):
                continue  # the reader's own apps in the examples
            module = importlib.import_module(node.module)
            for alias in node.names:
                if not hasattr(module, alias.name):
                    importlib.import_module(f"{node.module}.{alias.name}")


def literal_or_none(node: ast.AST):
    try:
        return True, ast.literal_eval(node)
    except ValueError:
        return False, None  # an expression of the example's own (os.environ[...], a name)


# Settings an example may give beside AHENTIC, applied with it when the checks run.
CHECKED_WITH = ("STORAGES", "Q_CLUSTER")


def check_settings(tree: ast.AST) -> None:
    """An ``AHENTIC = {...}`` names only settings, and its literal values (with the example's
    ``STORAGES`` and ``Q_CLUSTER``) pass the system checks; an agent's ``config={...}`` names
    only agent keys."""
    given: dict[str, dict] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
            [target] = node.targets
            name = target.id if isinstance(target, ast.Name) else ""
            if name == "AHENTIC":
                values = {}
                for key, value in zip(node.value.keys, node.value.values, strict=True):
                    setting = ast.literal_eval(key)
                    assert setting in DEFAULTS, f"AHENTIC[{setting!r}] is not a setting"
                    known, literal = literal_or_none(value)
                    if known:
                        values[setting] = literal
                given[name] = values
            elif name in CHECKED_WITH:
                given[name] = ast.literal_eval(node.value)
        if isinstance(node, ast.keyword) and node.arg == "config":
            if isinstance(node.value, ast.Dict):
                for key in node.value.keys:
                    assert ast.literal_eval(key) in agents.AGENT_KEYS, ast.literal_eval(key)
    if given:
        with override_settings(**given):
            errors = [m for m in run_checks() if m.id.startswith("ahentic.") and m.is_serious()]
        assert errors == [], errors


def check_python(code: str) -> None:
    tree = ast.parse(code)
    compile(tree, "<docs>", "exec")
    check_imports(tree)
    check_settings(tree)


MAKE_TARGETS = set(re.findall(r"^([\w.-]+):", (ROOT / "Makefile").read_text(), re.M))
# Programs the shell examples run besides manage.py and make (a typo here fails the test).
PROGRAMS = {"cd", "pip", "python", "curl", "gunicorn", "claude", "mkdocs", "phoenix"}


def check_manage_py(args: list[str]) -> None:
    name, options = args[0], args[1:]
    commands = get_commands()
    assert name in commands, f"manage.py has no command {name!r}"
    parser = load_command_class(commands[name], name).create_parser("manage.py", name)
    try:
        parser.parse_args(options)
    except (CommandError, SystemExit):
        pytest.fail(f"manage.py {name} does not take {' '.join(options)}")


def check_shell(code: str) -> None:
    for line in code.replace("\\\n", " ").splitlines():
        line = re.split(r"\s+#", line, maxsplit=1)[0].strip()
        for command in filter(None, (part.strip() for part in line.split("&&"))):
            words = shlex.split(command)
            while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
                words = words[1:]  # VAR=value before the program
            if "manage.py" in words:
                check_manage_py(words[words.index("manage.py") + 1 :])
            elif words[0] == "make":
                targets = [w for w in words[1:] if "=" not in w]
                assert set(targets) <= MAKE_TARGETS, f"Makefile has no target {targets}"
            else:
                assert words[0] in PROGRAMS, f"unexpected program in a shell example: {command}"


def check_template(code: str) -> None:
    engine = engines["django"]
    engine.from_string(code)  # loads the tag libraries, parses every tag
    for parent in re.findall(r'{%\s*extends\s+"([^"]+)"\s*%}', code):
        engine.get_template(parent)


def check_json(code: str) -> None:
    json.loads(code)


SIDEBAR_JS = "\n".join(
    p.read_text(encoding="utf-8")
    for p in (ROOT / "orchestrator_app/static/ahentic/sidebar").glob("*.js")
)


def check_javascript(code: str) -> None:
    for name in re.findall(r"AhenticSidebar\.(\w+)", code):
        assert re.search(rf"\b{name}\b", SIDEBAR_JS), f"the sidebar has no {name}"
    node = shutil.which("node")
    if node:  # a syntax check where Node.js is installed; the API check above runs anyway
        result = subprocess.run(
            [node, "--check", "--input-type=module"], input=code, capture_output=True, text=True
        )
        assert result.returncode == 0, result.stderr


CHECKS = {
    "python": check_python,
    "sh": check_shell,
    "django": check_template,
    "json": check_json,
    "js": check_javascript,
}


@pytest.mark.django_db(databases="__all__")
@pytest.mark.parametrize("snippet", snippets(), ids=lambda s: s.where)
def test_every_code_block_in_the_docs_works(snippet):
    check = CHECKS.get(snippet.language)
    assert check, f"{snippet.where}: say the block's language, one of {', '.join(CHECKS)}"
    check(snippet.code)


def test_a_code_block_that_no_longer_works_fails():
    with pytest.raises(AssertionError, match="not a setting"):
        check_python('AHENTIC = {"MODLE": "claude-sonnet-5-5"}')
    with pytest.raises(ImportError):
        check_python("from orchestrator_app.tools import toolz")
    with pytest.raises(pytest.fail.Exception, match="does not take"):
        check_shell("python manage.py ahentic_localapi --ofline")
    with pytest.raises(AssertionError, match="no command"):
        check_shell("python manage.py ahentic_demo_site")


def test_the_install_page_pastes_the_same_files_as_the_readme():
    readme = host_project.install_snippets(README)
    docs = host_project.install_snippets(DOCS / "install.md", section="## Steps")

    assert docs == readme
    assert set(readme) == set(host_project.SNIPPET_TARGETS)


def test_the_readme_is_a_front_page_whose_links_lead_somewhere():
    text = README.read_text(encoding="utf-8")

    assert len(text.splitlines()) <= 150
    assert "docs/img/" in text  # the screenshot
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
        if not target.startswith(("http://", "https://")):
            assert (ROOT / target).exists(), f"README links to {target}, which is missing"


# --- the reference pages -------------------------------------------------------------------------


def test_the_settings_page_lists_every_setting_with_its_default():
    text = page("reference/settings.md")
    site = text.split("## Agent-only keys")[0]
    rows = dict(re.findall(r"^\| `([A-Z0-9_]+)` \| (.*)$", site, re.M))

    assert set(rows) == set(DEFAULTS)
    for key, cell in rows.items():
        default = DEFAULTS[key]
        if callable(default):  # read from the environment
            assert "ANTHROPIC_" in cell, key
        else:
            shown = re.match(r"`([^`]+)`", cell).group(1)
            assert eval(shown, {"__builtins__": {}}) == default, key  # noqa: S307
    agent_rows = {key for key, cell in rows.items() if "*agent*" in cell}
    assert agent_rows == set(agents.SITE_KEYS)
    only = dict(ROW.findall(text.split("## Agent-only keys")[1]))
    assert {key: eval(c.split("`")[1], {}) for key, c in only.items()} == (  # noqa: S307
        agents.AGENT_ONLY_DEFAULTS
    )


def check_ids_in_source() -> set[str]:
    ids = set()
    for app in APPS:
        for path in (ROOT / app).rglob("*.py"):
            ids |= set(re.findall(r"ahentic\.[EW]\d{3}", path.read_text(encoding="utf-8")))
    return ids


def test_the_checks_page_lists_every_system_check_id():
    documented = {key for key, _ in ROW.findall(page("reference/checks.md"))}

    assert documented == check_ids_in_source()


def test_the_signals_page_lists_every_public_signal():
    public = {name for name, value in vars(signals).items() if isinstance(value, Signal)}
    documented = {key for key, _ in ROW.findall(page("reference/signals.md"))}

    assert documented == public


def test_the_commands_page_describes_every_management_command():
    ours = {name for name, app in get_commands().items() if app in APPS}
    documented = set(re.findall(r"^## `(\w+)`", page("reference/commands.md"), re.M))

    assert ours and documented == ours


def url_paths() -> set[str]:
    """The app's URLconf as the docs write paths: ``sessions/{session_id}/messages``."""
    from orchestrator_app.urls import urlpatterns

    paths = set()
    for pattern in urlpatterns:
        if pattern.name is None:
            continue  # the JSON 404 for every other path
        regex = pattern.pattern.regex.pattern
        path = re.sub(r"\(\?P<(\w+)>[^)]*\)", r"{\1}", regex)
        paths.add(path.removeprefix("^").removesuffix("$").removesuffix("/?"))
    return paths


def documented_routes() -> set[tuple[str, str]]:
    text = page("reference/api.md")
    return {
        (cells[1].strip("` ").lower(), cells[2].strip("` "))
        for cells in (line.split("|") for line in text.splitlines())
        if len(cells) > 3 and re.fullmatch(r" `[A-Z]+` ", cells[1])
    }


def test_the_api_page_lists_every_route_of_the_urlconf_and_no_other():
    documented = {path for _, path in documented_routes()}

    assert documented == url_paths()


def test_the_api_page_lists_every_route_and_payload_key_of_the_schema(owner_client):
    from tests.support.api import API

    schema = owner_client.get(f"{API}/schema?format=json").json()
    served = {
        (method, path.lstrip("/")) for path, item in schema["paths"].items() for method in item
    }
    outside = section(page("reference/api.md"), "## Routes outside the schema")

    in_table = documented_routes() - {(m, p) for m, p in documented_routes() if f"`{p}`" in outside}
    assert in_table == served
    payload = section(page("reference/api.md"), "## The session payload")
    components = schema["components"]["schemas"]
    for component in ("SessionPayload", "Message", "PendingTool", "SessionAgent"):
        for key in components[component]["properties"]:
            assert re.search(rf"\b{key}\b", payload), f"{component}.{key} is not documented"


def test_the_tool_page_shows_permission_and_lists_every_option_of_tool():
    text = page("howto/tools.md")
    [example] = [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "@tool(" in b][:1]
    options = section(text, "## Every option of `@tool`")

    assert re.search(r"^\s+permission=", example, re.M)
    assert {key for key, _ in ROW.findall(options)} == set(inspect.signature(tool).parameters)
    assert "ahentic.W003" in text


# --- the install page's steps after the five -----------------------------------------------------


def blocks_under(name: str, heading: str) -> list[str]:
    return [textwrap.dedent(m.group(3)) for m in FENCE.finditer(section(page(name), heading))]


def render_as(user, source: str, context: dict | None = None) -> str:
    from django.test import RequestFactory

    request = RequestFactory().get("/")
    request.user = user
    return engines["django"].from_string(source).render(context or {}, request)


def test_the_own_page_template_shows_the_sidebar_to_users_with_the_permission_only(owner):
    from django.contrib.auth.models import AnonymousUser

    from tests.support.factories import UserFactory

    [template] = blocks_under("install.md", "## Put the sidebar on your own pages")

    assert 'id="ahentic-sidebar"' in render_as(owner, template)
    assert 'id="ahentic-sidebar"' not in render_as(AnonymousUser(), template)
    assert 'id="ahentic-sidebar"' not in render_as(UserFactory(agent_permission=False), template)


@pytest.mark.django_db
def test_the_grant_snippet_gives_a_user_the_agent_permission():
    from django.contrib.auth import get_user_model

    alice = get_user_model().objects.create_user(username="alice", password="x")
    assert not alice.has_perm("sessions_app.use_agent")
    [snippet] = blocks_under("install.md", "## Grant the permission")

    exec(compile(snippet, "docs/install.md", "exec"), {})  # noqa: S102

    alice = get_user_model().objects.get(username="alice")  # a fresh permission cache
    assert alice.has_perm("sessions_app.use_agent")


@pytest.mark.django_db
def test_the_login_template_posts_the_login_form():
    from django.contrib.auth.forms import AuthenticationForm
    from django.contrib.auth.models import AnonymousUser

    templates = blocks_under("install.md", "## A login page")
    [login] = [t for t in templates if t.startswith("{# templates/registration/login.html #}")]

    html = render_as(AnonymousUser(), login, {"form": AuthenticationForm(), "next": "/"})

    assert 'name="csrfmiddlewaretoken"' in html
    assert 'name="username"' in html and 'name="password"' in html
    assert 'name="next" value="/"' in html
