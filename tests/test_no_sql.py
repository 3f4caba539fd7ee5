"""No SQL is written by hand outside migrations: every statement comes from Django's ORM.

The test walks the project's Python source (the apps, the demo site and the benches; migrations
and the tests themselves excepted) and fails on a string that reads as an SQL statement, or on
a call that runs SQL text (``cursor.execute``, ``.raw()``, ``.extra()``, ``RawSQL``). The one
module that runs statements itself, ``sessions_app/compiled.py``, runs only the SQL Django
compiled for a queryset.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("sessions_app", "artifacts_app", "orchestrator_app", "ahentic_site", "bench")
RUNS_COMPILED_SQL = {ROOT / "sessions_app" / "compiled.py"}
# Settings, not statements: the demo's SQLite connection options (Django's documented
# ``init_command``) switch the journal to WAL so the web process and the worker share the file.
CONFIGURATION = {ROOT / "ahentic_site" / "settings.py"}
# Database maintenance, not a query: the permission bench refreshes PostgreSQL's planner
# statistics after its bulk load of 20,000 members, as autovacuum would shortly after.
MAINTENANCE = {ROOT / "bench" / "permission.py": "ANALYZE"}
# Statement shapes, in the capitals SQL is written in (prose that says "an UPDATE" is fine).
STATEMENT = re.compile(
    r"\bSELECT\b[\s\S]*\bFROM\b|\bINSERT\s+INTO\b|\bDELETE\s+FROM\b|\bUPDATE\s+\S+\s+SET\b"
    r"|\bEXISTS\s*\(\s*SELECT\b|\bEXPLAIN\b|\bANALYZE\b|\bPRAGMA\b"
)
CURSOR_CALLS = {"execute", "executemany", "executescript"}  # on a cursor or a connection
QUERYSET_SQL = {"raw", "extra"}


def project_files() -> list[Path]:
    files = []
    for top in SOURCES:
        for path in sorted((ROOT / top).rglob("*.py")):
            if "migrations" not in path.parts:
                files.append(path)
    return files


def runs_sql_text(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id if func.id == "RawSQL" else None
    if not isinstance(func, ast.Attribute):
        return None
    target = ast.unparse(func.value).lower()
    if func.attr in CURSOR_CALLS and ("cursor" in target or "connection" in target):
        return f"{ast.unparse(func.value)}.{func.attr}"
    return func.attr if func.attr in QUERYSET_SQL else None


def sql_in(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    found = []
    for node in ast.walk(tree):
        text = None
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        elif isinstance(node, ast.JoinedStr):  # an f-string, its fields as placeholders
            text = "".join(
                part.value if isinstance(part, ast.Constant) else "{}" for part in node.values
            )
        if text is not None:
            if STATEMENT.search(text) and path not in CONFIGURATION:
                if set(STATEMENT.findall(text)) != {MAINTENANCE.get(path)}:
                    found.append(f"{name}:{node.lineno}: {text[:60]!r}")
        elif isinstance(node, ast.Call) and path not in RUNS_COMPILED_SQL:
            runs = runs_sql_text(node)
            args = [arg.value for arg in node.args if isinstance(arg, ast.Constant)]
            maintenance = path in MAINTENANCE and args == [MAINTENANCE[path]]
            if runs and not maintenance:
                found.append(f"{name}:{node.lineno}: calls {runs}()")
    return found


def test_the_walk_finds_the_source_and_would_see_sql(tmp_path):
    assert len(project_files()) > 50
    planted = tmp_path / "planted.py"
    planted.write_text(
        "Q = 'SELECT id FROM t WHERE x = %s'\n"
        "def f(cursor):\n"
        "    cursor.execute(Q)\n"
        'U = f"UPDATE {t} SET a = 1"\n'
    )
    assert len(sql_in(planted)) == 3


def test_no_sql_string_outside_migrations():
    found = [line for path in project_files() for line in sql_in(path)]
    assert not found, "SQL written by hand:\n" + "\n".join(found)
