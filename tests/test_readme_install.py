"""The README's install steps work pasted into a brand-new ``django-admin startproject`` site.

tests/host_project.py makes that site from the README's snippets and runs its system checks
(``check`` with no warning, ``check --deploy``, ``ahentic.W002`` without the admin template),
its migrations and an authenticated API call over HTTP. .ci/wheel-leg runs the same script
against the built wheel instead of this checkout.
"""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOST_PROJECT = ROOT / "tests" / "host_project.py"
URLS_IMPORT = "from django.urls import include\n"


def make_host_site(readme: Path, dest: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-I", str(HOST_PROJECT), "--readme", str(readme), "--dest", str(dest)],
        cwd=dest.parent,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_readme_install_steps_make_a_working_site(tmp_path):
    result = make_host_site(ROOT / "README.md", tmp_path / "site")

    assert result.returncode == 0, result.stdout + result.stderr
    assert "host site: manage.py check without the admin template: ok" in result.stdout
    assert "GET /ahentic/v1/sessions -> 200" in result.stdout
    assert "the session list shows the new session" in result.stdout
    assert "the admin page renders the sidebar" in result.stdout


def test_a_readme_snippet_that_does_not_work_pasted_fails_the_build(tmp_path):
    readme = tmp_path / "README.md"
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert URLS_IMPORT in text
    readme.write_text(text.replace(URLS_IMPORT, ""), encoding="utf-8")

    result = make_host_site(readme, tmp_path / "site")

    assert result.returncode == 1
    assert "NameError: name 'include' is not defined" in result.stderr
