"""Checks the built wheel: the app and nothing else, valid classifiers, a CHANGELOG section.

    python .ci/wheel_contents.py dist/django_ahentic-X-py3-none-any.whl

Every file git tracks under the three app packages must be in the wheel (templates, static
files, migrations, skills: the package data an editable install never misses); the demo site,
the tests and the benchmarks must not be. Classifiers must be ones PyPI accepts
(trove-classifiers), and CHANGELOG.md must have a section for the built version.
"""

import re
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

from trove_classifiers import classifiers as known_classifiers

APPS = ("sessions_app", "artifacts_app", "orchestrator_app")
NOT_SHIPPED = ("ahentic_site/", "tests/", "bench/", "templates/")

wheel = Path(sys.argv[1])
version = wheel.name.split("-")[1]
archive = zipfile.ZipFile(wheel)
shipped = set(archive.namelist())
metadata = Parser().parsestr(
    archive.read(f"django_ahentic-{version}.dist-info/METADATA").decode("utf-8")
)
tracked = subprocess.run(
    ["git", "ls-files", *APPS], capture_output=True, text=True, check=True
).stdout.split()

problems = [f"missing from the wheel: {name}" for name in tracked if name not in shipped]
problems += [f"not part of the app: {n}" for n in sorted(shipped) if n.startswith(NOT_SHIPPED)]
problems += [
    f"unknown classifier: {c}"
    for c in metadata.get_all("Classifier", [])
    if c not in known_classifiers
]
changelog = Path("CHANGELOG.md").read_text(encoding="utf-8")
if not re.search(rf"^## \[{re.escape(version)}\]", changelog, re.M):
    problems.append(f"CHANGELOG.md has no '## [{version}]' section for the built version")

print(
    f"wheel leg: {wheel.name}: {len(shipped)} files, {len(tracked)} tracked app files, "
    f"{len(metadata.get_all('Classifier', []))} classifiers, "
    f"Requires-Dist {metadata.get_all('Requires-Dist')}"
)
if problems:
    sys.exit("wheel leg: " + "\nwheel leg: ".join(problems))
