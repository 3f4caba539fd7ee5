"""No SQL is written by hand outside migrations, and no ORM internals are used: every
statement comes from Django's documented ORM API.

The test walks the project's Python source (the apps, the demo site and the benches; migrations
and the tests themselves excepted) and fails on a string that reads as an SQL statement, on a
call that runs SQL text (``cursor.execute``, ``.raw()``, ``.extra()``, ``RawSQL``), on an
import from ``django.db.models.sql`` (the ORM's query internals) and on a cursor taken from a
connection (``connection.cursor()``, ``connections[alias].cursor()``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.support.paths import ROOT

SOURCES = ("sessions_app", "artifacts_app", "orchestrator_app", "ahentic_site", "bench")
# Settings, not statements: the demo's SQLite connection options (Django's documented
# ``init_command``) switch the journal to WAL so the web process and the worker share the file.
CONFIGURATION = {ROOT / "ahentic_site" / "settings.py"}
# Database maintenance, not a query: the permission bench refreshes PostgreSQL's planner
# statistics after its bulk load of 20,000 members, as autovacuum would shortly after (the
# one cursor taken outside migrations).
MAINTENANCE = {ROOT / "bench" / "permission.py": "ANALYZE"}
# The ORM's query internals (``UpdateQuery``, ``Query``, compilers...): not a public API.
INTERNAL_MODULE = "django.db.models.sql"
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


def imports_internals(node: ast.AST) -> str | None:
    """The internal module an import statement reaches, if any."""
    names: list[str] = []
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
    for name in names:
        if name == INTERNAL_MODULE or name.startswith(INTERNAL_MODULE + "."):
            return name
    return None


def takes_a_cursor(call: ast.Call) -> str | None:
    """``connection.cursor()``, ``connections["default"].cursor()`` and the like."""
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr == "cursor":
        target = ast.unparse(func.value)
        if "connection" in target.lower():
            return f"{target}.cursor"
    return None


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
        elif isinstance(node, ast.Call):
            runs = runs_sql_text(node)
            args = [arg.value for arg in node.args if isinstance(arg, ast.Constant)]
            maintenance = path in MAINTENANCE and args == [MAINTENANCE[path]]
            if runs and not maintenance:
                found.append(f"{name}:{node.lineno}: calls {runs}()")
            cursor = takes_a_cursor(node)
            if cursor and path not in MAINTENANCE:
                found.append(f"{name}:{node.lineno}: calls {cursor}()")
        elif isinstance(node, ast.Import | ast.ImportFrom):
            internal = imports_internals(node)
            if internal:
                found.append(f"{name}:{node.lineno}: imports {internal}")
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


def test_the_walk_would_see_orm_internals_and_cursors(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text(
        "from django.db import connection, connections\n"
        "from django.db.models.sql import UpdateQuery\n"
        "from django.db.models.sql.compiler import SQLCompiler\n"
        "from django.db.models import sql\n"
        "import django.db.models.sql.query\n"
        "from django.db.models import F, QuerySet\n"
        "def f():\n"
        "    with connection.cursor() as c:\n"
        "        pass\n"
        "    connections['default'].cursor()\n"
    )
    found = sql_in(planted)
    assert len(found) == 6, found
    assert sum("imports django.db.models.sql" in line for line in found) == 4
    assert sum(".cursor()" in line for line in found) == 2


def test_no_sql_string_outside_migrations():
    found = [line for path in project_files() for line in sql_in(path)]
    assert not found, "SQL written by hand:\n" + "\n".join(found)
