"""The structure the code relies on: one writer for the session row, imports pointing down."""

import ast
from pathlib import Path

from orchestrator_app.testing.localapi import text_reply, tool_call, tool_reply
from tests.support.api import API as API_URL
from tests.support.api import payload_of
from tests.support.paths import APP_DIRS, ROOT, SESSION_WRITER

APPS = ("sessions_app", "artifacts_app", "orchestrator_app")
LAYER = {"sessions_app": 0, "artifacts_app": 1, "orchestrator_app": 2}

# The layers inside each app, lowest first (docs/development/layout.md shows them). A module
# imports modules of its own layer and of the layers below it, never one above; every module
# falls in one. An entry names a module or a package (and so its submodules); the app's own
# package (its __init__) is the app's base.
# A wing's modules that are entry points: its admin pages, REST views, checks, the MCP endpoint.
REST_PARTS = ("api", "api_tokens", "server", "urls")
ENTRY_PARTS = ("admin", "admin_tokens", "api", "api_tokens", "checks", "server", "tasks", "urls")
WINGS = ("mcp", "oauth", "schedules", "webhooks", "notifications", "spend")
APP_LAYERS = {
    "sessions_app": (
        ("base", ("conf", "errors", "db", "media", "tokens")),
        ("models", ("models",)),
        (
            "writers and readers",
            ("runstate", "services", "attachments", "window", "agents", "access", "memory"),
        ),
        ("Django hooks", ("admin", "apps")),
    ),
    "artifacts_app": (
        ("models", ("models",)),
        ("store", ("store",)),
        ("Django hooks", ("admin", "apps")),
    ),
    "orchestrator_app": (
        # The Messages API seam, the app's models (and the wings' models, which it loads), its
        # client errors, the skill files, the JSON nesting limit, the credential vault, the
        # outbound-address policy: what every layer above may use.
        (
            "base",
            (
                "models",
                *(f"{wing}.models" for wing in WINGS),
                "llm",
                "errors",
                "skills",
                "json_limits",
                "signals",
                "vault",
                "outbound",
                "telemetry",  # OpenTelemetry: spans, metrics, the trace context of a task
                "presence",  # whether a chat's owner watches it (the poll's cache key)
                "links",  # links that open a chat in the sidebar (mails, MCP answers)
            ),
        ),
        # The run engine, which imports no feature wing.
        ("ledger", ("ledger",)),  # usage records, cost, daily limit; diagnostics
        ("run control", ("control",)),  # runs, queue, tool-call answers, plan, brain
        ("tools", ("tools",)),  # the registry, its tool sources, the built-ins, the admin bridge
        ("step loop", ("loop",)),  # a step: request, model turn, tool pipeline, decisions
        # The feature wings: each plugs into the engine through the tool-source registry and
        # the public signals. Their entry points (admin, api, checks, server) sit on top.
        ("features", WINGS),
        (
            "entry points",
            (
                "api",
                "admin",
                *(f"{wing}.{part}" for wing in WINGS for part in ENTRY_PARTS),
                "tasks",
                "urls",
                "jsi18n",  # the sidebar's JavaScript catalog
                "checks",
                "apps",
                "ahentic_tools",
                "templatetags",
                "management",
                "testing",
            ),
        ),
    ),
}

# Test doubles: the local Messages API and the offline model. Apart from tests, only the
# management commands that serve them (ahentic_demo, ahentic_localapi) import them.
TEST_DOUBLES = "orchestrator_app.testing"
TEST_DOUBLE_USERS = ("orchestrator_app.management",)
# The REST layer is mounted by urls.py, apps.py connects its signal receivers and the sidebar's
# template tag asks its permission check whether to render. Nothing else imports it (the admin,
# the tools and the loop least of all).
API = "orchestrator_app.api"
# The mcp SDK: the client seam, the site's MCP endpoint (its messages are the SDK's types) and
# the demo's MCP server.
MCP_IMPORTERS = (
    "orchestrator_app.mcp.client",
    "orchestrator_app.mcp.server",
    "orchestrator_app.testing.demo_mcp",
)
API_USERS = (
    "orchestrator_app.urls",
    # The OAuth wing's routes reuse the REST layer's base view, errors and throttles; its root
    # URLconf serves the endpoint's protected resource metadata.
    "orchestrator_app.oauth.api",
    "orchestrator_app.oauth.urls",
    "orchestrator_app.apps",
    "orchestrator_app.templatetags.ahentic",
)


def test_a_run_with_an_approval_and_a_cancel_updates_the_session_row_only_through_runstate(
    owner_client, session, llm, run_tasks, tool_calls, session_update_origins
):
    llm.enqueue(
        tool_reply(tool_call("notes_create", {"title": "Groceries"})),
        text_reply("Created your note."),
        tool_reply(tool_call("notes_create", {"title": "Second"})),
    )
    url = f"{API_URL}/sessions/{session.pk}"

    run_tasks(owner_client.post, f"{url}/messages", {"content": "Make a note"}, format="json")
    run_tasks(owner_client.post, f"{url}/approvals", {"decision": "allow_once"}, format="json")
    run_tasks(owner_client.post, f"{url}/messages", {"content": "And another"}, format="json")
    assert payload_of(owner_client, session)["status"] == "awaiting_human"
    owner_client.post(f"{url}/cancel")

    assert payload_of(owner_client, session)["status"] == "cancelled"
    assert [call["input"] for call in tool_calls] == [{"title": "Groceries"}]
    app_origins = {o for o in session_update_origins.origins if o.startswith(APP_DIRS)}
    assert app_origins == {SESSION_WRITER}


def test_the_guard_names_an_app_module_that_updates_the_session_row(
    session, session_update_origins
):
    stray = str(ROOT / "orchestrator_app" / "stray_writer.py")
    code = compile("Session.objects.filter(pk=pk).update(title='x')", stray, "exec")
    from sessions_app.models import Session

    exec(code, {"Session": Session, "pk": session.pk})

    assert session_update_origins.outside_the_writer() == [stray]
    session_update_origins.origins.clear()  # the autouse check would fail this test otherwise


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Absolute names of the modules ``path`` imports anywhere (function-level imports too;
    relative imports resolved)."""
    package = _module_name(path)
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    return _imports_in(path.read_text(), package)


def _imports_in(source: str, package: str) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            # ``from . import x`` may name a submodule.
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def _app_modules() -> dict[str, Path]:
    modules = {}
    for app in APPS:
        for path in (ROOT / app).rglob("*.py"):
            if "migrations" not in path.parts:
                modules[_module_name(path)] = path
    return modules


def _import_graph() -> dict[str, set[str]]:
    """Each module of the apps -> the modules of the apps it imports."""
    modules = _app_modules()
    return {
        name: {m for m in _imports(path) if m in modules and m != name}
        for name, path in modules.items()
    }


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _layer(module: str) -> int | None:
    """The index of ``module``'s layer in its app (the app's package itself: 0), else None.
    The longest entry that holds the module decides (``mcp.models`` before ``mcp``)."""
    app = module.split(".")[0]
    if module == app:
        return 0
    found = [
        (len(member), index)
        for index, (_, members) in enumerate(APP_LAYERS[app])
        for member in members
        if _within(module, f"{app}.{member}")
    ]
    return max(found)[1] if found else None


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    # A package's __init__ is imported with each of its submodules: not an edge back.
    cycles = []
    state: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1 and not node.startswith(nxt + "."):
                cycles.append(stack[stack.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    return cycles


def _wing_rest_module(name: str) -> bool:
    """A wing's REST views and the MCP endpoint build on the REST layer (its permissions,
    errors, parsers)."""
    return any(name == f"orchestrator_app.{wing}.{part}" for wing in WINGS for part in REST_PARTS)


ENGINE = tuple(f"orchestrator_app.{part}" for part in ("ledger", "control", "tools", "loop"))


def test_the_run_engine_imports_no_feature_wing():
    """The ledger, run control, the tool registry and the step loop never import a wing
    (models included: they reach rows through ``orchestrator_app.models``, if at all);
    wings plug in through the tool-source registry and the public signals."""
    wrong = []
    for name, imported in sorted(_import_graph().items()):
        if not any(_within(name, engine) for engine in ENGINE):
            continue
        for target in sorted(imported):
            if any(_within(target, f"orchestrator_app.{wing}") for wing in WINGS):
                wrong.append(f"{name} imports {target}")
    assert wrong == []


def _package_circles() -> list[str]:
    """A package whose ``__init__`` imports one of its modules (at any depth, function-level
    imports too) while that module imports a name defined in the ``__init__``: a circle
    Python resolves only by the order in which the two run."""
    modules = _app_modules()
    graph = _import_graph()
    circles = []
    for package, path in modules.items():
        if path.name != "__init__.py":
            continue
        for submodule in sorted(graph[package]):
            if not submodule.startswith(package + "."):
                continue
            source = modules[submodule].read_text()
            base = submodule if modules[submodule].name == "__init__.py" else submodule
            base = base.rpartition(".")[0] if modules[submodule].name != "__init__.py" else base
            for node in ast.walk(ast.parse(source)):
                if not isinstance(node, ast.ImportFrom):
                    continue
                if node.level:
                    parts = base.split(".")
                    parts = parts[: len(parts) - node.level + 1]
                    target = ".".join(parts + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                names = [a.name for a in node.names if f"{target}.{a.name}" not in modules]
                if target == package and names:
                    circles.append(f"{package} <-> {submodule} ({', '.join(names)})")
    return circles


def test_no_package_imports_a_module_that_imports_the_package_back():
    assert _package_circles() == []


def test_no_module_of_the_apps_imports_one_that_imports_it_back():
    assert _cycles(_import_graph()) == []


def test_an_import_inside_a_function_counts_as_an_edge():
    db = "def write_alias():\n    from .models import Session\n    return Session\n"
    graph = {
        "sessions_app.db": _imports_in(db, "sessions_app") & {"sessions_app.models"},
        "sessions_app.models": {"sessions_app.db"},
    }

    assert _cycles(graph) == [["sessions_app.db", "sessions_app.models", "sessions_app.db"]]


def test_every_module_of_the_apps_has_a_layer():
    assert [name for name in sorted(_app_modules()) if _layer(name) is None] == []


def test_imports_point_down_only_and_only_llm_imports_anthropic():
    """... and only the MCP client seam (and the demo's MCP server) imports the mcp SDK, and
    only ``orchestrator_app.telemetry`` imports OpenTelemetry."""
    wrong = []
    modules = _app_modules()
    for name, path in modules.items():
        app = name.split(".")[0]
        for imported in _imports(path):
            top = imported.split(".")[0]
            if top in LAYER and LAYER[top] > LAYER[app]:
                wrong.append(f"{name} imports {imported} (a higher app)")
            if top == "anthropic" and name != "orchestrator_app.llm":
                wrong.append(f"{name} imports anthropic")
            if top == "opentelemetry" and name != "orchestrator_app.telemetry":
                wrong.append(f"{name} imports opentelemetry")
            # The MCP client seam; the demo's MCP server is a test double (a server, no client).
            if top in ("mcp", "mcp_types") and name not in MCP_IMPORTERS:
                wrong.append(f"{name} imports the mcp SDK")
            if top == "ahentic_site":
                wrong.append(f"{name} imports the demo site")
            if top != app or imported not in modules or None in (_layer(name), _layer(imported)):
                continue  # another app (above), a name taken from a module, or no layer (above)
            if _layer(imported) > _layer(name):
                upper = APP_LAYERS[app][_layer(imported)][0]
                wrong.append(f"{name} imports {imported} ({upper}, a higher layer)")
            doubles_user = any(_within(name, m) for m in (TEST_DOUBLES, *TEST_DOUBLE_USERS))
            if _within(imported, TEST_DOUBLES) and not doubles_user:
                wrong.append(f"{name} imports the test doubles ({imported})")
            if (
                _within(imported, API)
                and not _within(name, API)
                and name not in API_USERS
                and not _wing_rest_module(name)
            ):
                wrong.append(f"{name} imports the REST layer ({imported})")
    assert wrong == []


SKIPPED_DIRS = {"migrations", "management", "templatetags", "locale", "static", "templates"}


def _layout_rows() -> dict[str, str]:
    """The layout page's table: its path cell -> its text."""
    rows = {}
    for line in (ROOT / "docs" / "development" / "layout.md").read_text().splitlines():
        cells = line.split(" | ")
        if line.startswith("| `") and len(cells) >= 2:
            rows[cells[0].strip("| `")] = cells[1]
    return rows


def test_the_layout_page_names_every_module_in_its_folders_row():
    """docs/development/layout.md has a row per folder of the apps, and each row names every
    module and sub-folder in it (``name.py`` or ``name/``)."""
    rows = _layout_rows()
    missing = []
    for app in APPS:
        for folder in [ROOT / app, *sorted(p for p in (ROOT / app).rglob("*") if p.is_dir())]:
            relative = folder.relative_to(ROOT)
            if SKIPPED_DIRS & set(relative.parts) or "__pycache__" in relative.parts:
                continue
            if not (folder / "__init__.py").exists():
                continue
            key = f"{relative}/"
            text = rows.get(key)
            if text is None:
                # A sub-folder listed in its parent's row (``tools/admin_tools/``).
                parent = rows.get(f"{relative.parent}/", "")
                if f"`{folder.name}/`" in parent:
                    continue
                missing.append(f"no row for {key}")
                continue
            for child in sorted(folder.iterdir()):
                name = child.name
                if child.is_dir() and (child / "__init__.py").exists():
                    own_row = f"{key}{name}/" in rows
                    if name not in SKIPPED_DIRS and not own_row and f"`{name}/`" not in text:
                        missing.append(f"{key}{name}/")
                elif child.suffix == ".py" and name not in ("__init__.py", "apps.py"):
                    if f"`{name}`" not in text:
                        missing.append(f"{key}{name}")
    assert missing == [], missing
