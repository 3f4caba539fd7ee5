"""The structure the code relies on: one writer for the session row, imports pointing down."""

import ast
from pathlib import Path

from orchestrator_app.testing.localapi import text_reply, tool_call, tool_reply

from .conftest import API, APP_DIRS, ROOT, SESSION_WRITER, payload_of

APPS = ("sessions_app", "artifacts_app", "orchestrator_app")
LAYER = {"sessions_app": 0, "artifacts_app": 1, "orchestrator_app": 2}


def test_a_run_with_an_approval_and_a_cancel_updates_the_session_row_only_through_runstate(
    owner_client, session, llm, run_tasks, tool_calls, session_update_origins
):
    llm.enqueue(
        tool_reply(tool_call("notes_create", {"title": "Groceries"})),
        text_reply("Created your note."),
        tool_reply(tool_call("notes_create", {"title": "Second"})),
    )
    url = f"{API}/sessions/{session.pk}"

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


def _imports(path: Path, *, top_level_only: bool) -> set[str]:
    """Absolute names of the modules ``path`` imports (relative imports resolved)."""
    tree = ast.parse(path.read_text())
    package = _module_name(path)
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found: set[str] = set()
    for node in nodes:
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


def test_no_module_of_the_apps_imports_one_that_imports_it_back():
    modules = _app_modules()
    graph = {
        name: {m for m in _imports(path, top_level_only=True) if m in modules and m != name}
        for name, path in modules.items()
    }
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
    assert cycles == []


def test_imports_point_down_only_and_only_llm_imports_anthropic():
    wrong = []
    for name, path in _app_modules().items():
        app = name.split(".")[0]
        for imported in _imports(path, top_level_only=False):
            target = imported.split(".")[0]
            if target in LAYER and LAYER[target] > LAYER[app]:
                wrong.append(f"{name} imports {imported}")
            if target == "anthropic" and name != "orchestrator_app.llm":
                wrong.append(f"{name} imports anthropic")
            if target == "ahentic_site":
                wrong.append(f"{name} imports the demo site")
            if name.endswith(".admin") and imported.startswith("orchestrator_app.api"):
                wrong.append(f"{name} (admin) imports the REST layer")
    assert wrong == []
