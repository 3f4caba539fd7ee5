"""The suite's own layout (docs/development/layout.md, "Tests"): test modules live in their area's
folder, never flat in tests/; what they share is in tests/support/ or a conftest's fixtures, so no
test module imports another test module, nor a conftest."""

import ast
import re
from pathlib import Path

from tests.support.paths import ROOT

TESTS = ROOT / "tests"


def module_name(path: Path, root: Path) -> str:
    return ".".join(path.relative_to(root).with_suffix("").parts)


def imported_modules(path: Path, root: Path) -> list[tuple[int, str]]:
    """(line, dotted module) for every import of the file, function-level ones included; a
    ``from package import name`` counts as importing ``package.name`` too (it may be a module)."""
    package = module_name(path, root).rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                anchor = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{anchor}.{base}" if base else anchor
            found.append((node.lineno, base))
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return found


def forbidden_imports(path: Path, root: Path = ROOT) -> list[str]:
    """The test modules (``test_*``) and conftest files ``path`` imports, as ``line: module``."""
    return [
        f"{line}: {name}"
        for line, name in imported_modules(path, root)
        if name.startswith("tests.") and re.fullmatch(r"test_\w+|conftest", name.rsplit(".", 1)[-1])
    ]


def all_test_modules() -> list[Path]:
    return sorted(TESTS.rglob("test_*.py"))


def test_no_test_module_imports_another_test_module_or_a_conftest():
    offenders = {
        str(path.relative_to(ROOT)): found
        for path in all_test_modules()
        if (found := forbidden_imports(path))
    }
    assert not offenders, (
        "test modules importing other test modules or a conftest (move what they share into "
        f"tests/support/ or a conftest fixture): {offenders}"
    )


def test_the_check_sees_relative_absolute_and_function_level_imports(tmp_path):
    area = tmp_path / "tests" / "runs"
    area.mkdir(parents=True)
    module = area / "test_example.py"
    module.write_text(
        "from .test_other import helper\n"
        "from . import test_sibling\n"
        "from ..conftest import API\n"
        "from tests.support.api import post\n"
        "def test_it():\n"
        "    from tests.features.mcp.test_mcp_client import tickets\n"
        "    import tests.api.test_words\n",
        encoding="utf-8",
    )

    assert forbidden_imports(module, tmp_path) == [
        "1: tests.runs.test_other",
        "2: tests.runs.test_sibling",
        "3: tests.conftest",
        "6: tests.features.mcp.test_mcp_client",
        "7: tests.api.test_words",
    ]


def test_every_test_module_is_in_an_area_the_layout_page_lists():
    layout = (ROOT / "docs" / "development" / "layout.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `(tests/[\w/]+/)` \|", layout, re.MULTILINE))
    folders = {str(path.parent.relative_to(ROOT)) + "/" for path in all_test_modules()}
    assert "tests/" not in folders, "test modules flat in tests/: move each into its area"
    assert folders <= listed, f"test folders missing from layout.md: {sorted(folders - listed)}"
    assert listed <= folders | {"tests/support/"}, (
        f"layout.md lists test folders that hold no test module: {sorted(listed - folders)}"
    )
