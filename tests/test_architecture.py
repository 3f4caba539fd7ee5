"""The structure the code relies on: one writer for the session row, imports pointing down."""

import ast
from pathlib import Path

from orchestrator_app.testing.localapi import text_reply, tool_call, tool_reply

from .conftest import API as API_URL
from .conftest import APP_DIRS, ROOT, SESSION_WRITER, payload_of

APPS = ("sessions_app", "artifacts_app", "orchestrator_app")
LAYER = {"sessions_app": 0, "artifacts_app": 1, "orchestrator_app": 2}

# The layers inside each app, lowest first (docs/development/layout.md shows them). A module
# imports modules of its own layer and of the layers below it, never one above; every module
# falls in one. An entry names a module or a package (and so its submodules); the app's own
# package (its __init__) is the app's base.
APP_LAYERS = {
    "sessions_app": (
        ("base", ("conf", "errors", "db", "media", "tokens", "versioned")),
        ("models", ("models",)),
        (
            "writers and readers",
            ("runstate", "services", "attachments", "window", "agents", "access", "memory"),
        ),
        ("Django hooks", ("admin", "admin_caps", "admin_memory", "admin_runs", "apps")),
    ),
    "artifacts_app": (
        ("models", ("models",)),
        ("store", ("store",)),
        ("Django hooks", ("admin", "apps")),
    ),
    "orchestrator_app": (
        # The Messages API seam, the app's models, its client errors, the skill files, the JSON
        # nesting limit, the credential vault, the outbound-address policy: what every layer
        # above may use.
        (
            "base",
            (
                "models",
                "llm",
                "errors",
                "skills",
                "json_limits",
                "signals",
                "vault",
                "outbound",
                "telemetry",  # OpenTelemetry: spans, metrics, the trace context of a task
                "presence",  # whether a chat's owner watches it (the poll's cache key)
            ),
        ),
        ("ledger", ("ledger",)),  # usage records, cost, daily limit; diagnostics
        ("run control", ("control",)),  # runs, queue, heartbeat, tool-call answers, plan, brain
        ("tools", ("tools",)),  # the registry, the built-ins, the admin bridge
        ("step loop", ("loop",)),  # a step: request, model turn, tool pipeline, decisions
        ("webhooks", ("webhooks",)),  # events to delivery rows, signed POSTs, retries
        ("notifications", ("notifications",)),  # mails: receivers of the signals, their tasks
        (
            "entry points",
            (
                "api",
                "admin",
                "admin_spend",  # the spend page (a chart of the ledger)
                "admin_mixins",  # the stale change-form mixin a host's ModelAdmin opts into
                "admin_webhooks",  # webhook endpoints and deliveries
                "admin_notifications",  # the mail log and the users' opt-outs
                "admin_schedules",  # scheduled runs and their log
                "admin_mcp_tokens",  # the MCP endpoint's tokens
                "admin_mcp",  # MCP servers, tool settings, credentials
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
    "orchestrator_app.tools.mcp_client",
    "orchestrator_app.api.mcp_server",
    "orchestrator_app.testing.demo_mcp",
)
API_USERS = (
    "orchestrator_app.urls",
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
    """The index of ``module``'s layer in its app (the app's package itself: 0), else None."""
    app = module.split(".")[0]
    if module == app:
        return 0
    for index, (_, members) in enumerate(APP_LAYERS[app]):
        if any(_within(module, f"{app}.{member}") for member in members):
            return index
    return None


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
            if _within(imported, API) and not _within(name, API) and name not in API_USERS:
                wrong.append(f"{name} imports the REST layer ({imported})")
    assert wrong == []
