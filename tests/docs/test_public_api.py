"""The public Python API: the table of docs/reference/python-api.md is the list of what a host
may import; every name in it imports, and the docs and the README import nothing else."""

import ast
import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
APPS = ("sessions_app", "artifacts_app", "orchestrator_app")
PAGE = ROOT / "docs" / "reference" / "python-api.md"
ROW = re.compile(r"^\| `(?P<module>[\w.]+)` \| (?P<names>[^|]+) \|")
FENCE = re.compile(r"^```(?:python|py)\s*\n(.*?)^```", re.S | re.M)


def public_names() -> dict[str, set[str]]:
    table: dict[str, set[str]] = {}
    for line in PAGE.read_text().splitlines():
        match = ROW.match(line)
        if match:
            names = set(re.findall(r"`(\w+)`", match["names"]))
            table[match["module"]] = names
    return table


def imports_in(text: str) -> list[tuple[str, str | None]]:
    """(module, name) for each import of the apps in the Python code blocks of ``text``; a
    plain ``import x.y`` gives (x.y, None)."""
    found = []
    for block in FENCE.findall(text):
        try:
            tree = ast.parse(block)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and not node.level and node.module:
                found.extend((node.module, alias.name) for alias in node.names)
            elif isinstance(node, ast.Import):
                found.extend((alias.name, None) for alias in node.names)
    return [(m, n) for m, n in found if m.split(".")[0] in APPS]


def outside(table: dict[str, set[str]], imports) -> list[str]:
    wrong = []
    for module, name in imports:
        if module in table and (name is None or name in table[module]):
            continue
        # ``from orchestrator_app.schedules import services``: a public module, by name.
        if name is not None and f"{module}.{name}" in table:
            continue
        wrong.append(f"{module}: {name}")
    return wrong


def docs_pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_every_public_name_imports():
    table = public_names()
    assert "orchestrator_app.tools" in table and "tool" in table["orchestrator_app.tools"]
    missing = []
    for module, names in table.items():
        loaded = importlib.import_module(module)
        missing += [f"{module}.{name}" for name in sorted(names) if not hasattr(loaded, name)]
    assert missing == []


def test_the_docs_and_the_readme_import_only_the_public_api():
    table = public_names()
    wrong = {}
    for page in docs_pages():
        found = outside(table, imports_in(page.read_text()))
        if found:
            wrong[str(page.relative_to(ROOT))] = found
    assert wrong == {}


def test_an_import_of_an_internal_module_in_a_page_is_caught():
    page = "```python\nfrom orchestrator_app.loop.step import StepRunner\n```\n"
    public = "```python\nfrom orchestrator_app.tools import tool\n```\n"
    assert outside(public_names(), imports_in(page)) == ["orchestrator_app.loop.step: StepRunner"]
    assert outside(public_names(), imports_in(public)) == []
