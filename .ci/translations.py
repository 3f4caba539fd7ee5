"""The shipped translations: complete, and current with the code.

    .venv/bin/python .ci/translations.py            # check (the i18n leg of .ci/run)
    .venv/bin/python .ci/translations.py --po-only  # check the committed files only
    .venv/bin/python .ci/translations.py --update   # refresh the .po files, compile the .mo

For every app with a ``locale/`` directory and every language in it:

- extraction (needs GNU gettext): ``makemessages`` over a copy of the app; each msgid the code
  has must be in the committed ``.po`` ("missing"), each msgid of the ``.po`` must still be in
  the code ("obsolete");
- each entry is translated and not fuzzy, and keeps the msgid's placeholders (``%(name)s``);
- the committed ``.mo`` says what the ``.po`` says (compared through Python's ``gettext``, so
  msgfmt's version does not matter).

Every problem is printed with its msgid: the list is a translator's to-do list. ``--update``
runs the same ``makemessages`` in place (new msgids arrive untranslated, changed ones fuzzy)
and then ``compilemessages``.
"""

from __future__ import annotations

import argparse
import ast
import gettext
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APPS = ("sessions_app", "artifacts_app", "orchestrator_app")
# Third-party files under static/ that are not ours to translate.
JS_IGNORE = ("static/ahentic/vendor/*",)
PLACEHOLDER = re.compile(r"%\(\w+\)[sd]|\{\w+\}")


@dataclass
class Entry:
    msgid: str
    msgid_plural: str | None = None
    msgctxt: str | None = None
    msgstr: dict[int, str] = field(default_factory=dict)
    flags: set[str] = field(default_factory=set)

    @property
    def key(self) -> tuple[str | None, str]:
        return (self.msgctxt, self.msgid)


def _unquote(text: str) -> str:
    return ast.literal_eval(text)


def parse_po(path: Path) -> list[Entry]:
    """The entries of a .po file (the header and obsolete ``#~`` entries left out)."""
    entries: list[Entry] = []
    current: Entry | None = None
    target: tuple[str, int] | None = None
    flags: set[str] = set()

    def finish():
        nonlocal current
        if current is not None and current.msgid:
            entries.append(current)
        current = None

    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#~"):
            if not line:
                finish()
                flags = set()
            continue
        if line.startswith("#,"):
            flags |= {flag.strip() for flag in line[2:].split(",")}
            continue
        if line.startswith("#"):
            continue
        keyword, _, rest = line.partition(" ")
        if keyword.startswith('"'):
            text = _unquote(line)
        else:
            text = _unquote(rest)
        if keyword in ("msgctxt", "msgid") and current is not None and target[0] == "msgstr":
            finish()
        if keyword == "msgctxt":
            current = Entry(msgid="", msgctxt=text, flags=flags)
            target = ("msgctxt", 0)
        elif keyword == "msgid":
            if current is None:
                current = Entry(msgid="", flags=flags)
            current.msgid = text
            target = ("msgid", 0)
        elif keyword == "msgid_plural":
            current.msgid_plural = text
            target = ("msgid_plural", 0)
        elif keyword.startswith("msgstr"):
            index = int(keyword[7:-1]) if keyword.startswith("msgstr[") else 0
            current.msgstr[index] = text
            target = ("msgstr", index)
        elif keyword.startswith('"') and current is not None:
            kind, index = target
            if kind == "msgstr":
                current.msgstr[index] += text
            elif kind == "msgctxt":
                current.msgctxt += text
            else:
                setattr(current, kind, getattr(current, kind) + text)
    finish()
    return entries


def catalogues() -> list[tuple[str, str, str, Path]]:
    """(app, language, domain, .po path) of every committed catalogue."""
    found = []
    for app in APPS:
        for po in sorted((ROOT / app / "locale").glob("*/LC_MESSAGES/*.po")):
            found.append((app, po.parent.parent.name, po.stem, po))
    return found


def makemessages(app_dir: Path, language: str, domain: str) -> None:
    """Django's makemessages for one app, run in ``app_dir`` (the app or a copy of it)."""
    command = [sys.executable, "-m", "django", "makemessages", "-l", language, "-d", domain]
    command += ["--add-location", "file", "--no-obsolete"]
    if domain == "djangojs":
        for pattern in JS_IGNORE:
            command += ["--ignore", pattern]
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "ahentic_site.settings",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    run(command, app_dir, env)


def run(command: list[str], cwd: Path, env: dict) -> None:
    # ``python -m`` puts the working directory (an app's folder) first on sys.path, where the
    # app's own ``mcp`` package would hide the mcp SDK: PYTHONSAFEPATH leaves it off.
    env = {**env, "PYTHONSAFEPATH": "1"}
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"translations: {' '.join(command[2:])} failed in {cwd}:\n{done.stderr}")


def compilemessages(app_dir: Path) -> None:
    command = [sys.executable, "-m", "django", "compilemessages"]
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "ahentic_site.settings"}
    env["PYTHONPATH"] = str(ROOT)
    run(command, app_dir, env)


def extracted(app: str, language: str, domain: str) -> set[tuple[str | None, str]]:
    """The msgids the code of ``app`` has now (makemessages over a copy, from scratch)."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / app
        shutil.copytree(
            ROOT / app, copy, ignore=shutil.ignore_patterns("*.po", "*.mo", "__pycache__")
        )
        makemessages(copy, language, domain)
        po = copy / "locale" / language / "LC_MESSAGES" / f"{domain}.po"
        return {entry.key for entry in parse_po(po)} if po.exists() else set()


def mo_differences(mo: Path, entries: list[Entry]) -> list[str]:
    """The msgids the compiled catalogue translates otherwise than the .po says."""
    with mo.open("rb") as handle:
        translations = gettext.GNUTranslations(handle)
    # A count for each plural form: the first n the language's rule gives that form.
    counts: dict[int, int] = {}
    for n in range(200):
        counts.setdefault(translations.plural(n), n)
    wrong = []
    for entry in entries:
        done = "fuzzy" not in entry.flags and entry.msgstr and all(entry.msgstr.values())
        if entry.msgid_plural is None:
            expected = entry.msgstr[0] if done else entry.msgid
            if entry.msgctxt is None:
                got = translations.gettext(entry.msgid)
            else:
                got = translations.pgettext(entry.msgctxt, entry.msgid)
            if got != expected:
                wrong.append(entry.msgid)
            continue
        for index, n in counts.items():
            expected = entry.msgstr.get(index) if done else None
            if expected is None:
                expected = entry.msgid if n == 1 else entry.msgid_plural
            if entry.msgctxt is None:
                got = translations.ngettext(entry.msgid, entry.msgid_plural, n)
            else:
                got = translations.npgettext(entry.msgctxt, entry.msgid, entry.msgid_plural, n)
            if got != expected:
                wrong.append(entry.msgid)
                break
    return wrong


def check(po_only: bool) -> list[str]:
    problems = []
    if not catalogues():
        return ["no catalogue found under <app>/locale/"]
    for app, language, domain, po in catalogues():
        where = f"{po.relative_to(ROOT)}"
        entries = parse_po(po)
        for entry in entries:
            wanted = [entry.msgid, entry.msgid_plural] if entry.msgid_plural else [entry.msgid]
            texts = list(entry.msgstr.values())
            if "fuzzy" in entry.flags:
                problems.append(f"{where}: fuzzy: {entry.msgid!r}")
            elif not texts or not all(texts):
                problems.append(f"{where}: untranslated: {entry.msgid!r}")
            else:
                expected = {p for text in wanted for p in PLACEHOLDER.findall(text)}
                for text in texts:
                    got = set(PLACEHOLDER.findall(text))
                    if got != expected and not (entry.msgid_plural and got < expected):
                        problems.append(
                            f"{where}: placeholders {sorted(got)} instead of "
                            f"{sorted(expected)}: {entry.msgid!r}"
                        )
        mo = po.with_suffix(".mo")
        if not mo.exists():
            problems.append(f"{where}: no compiled {mo.name} beside it (run --update)")
        else:
            for msgid in mo_differences(mo, entries):
                problems.append(
                    f"{where}: {mo.name} is older than the .po (run --update): {msgid!r}"
                )
        if po_only:
            continue
        code = extracted(app, language, domain)
        committed = {entry.key for entry in entries}
        for _context, msgid in sorted(code - committed, key=lambda key: key[1]):
            problems.append(f"{where}: missing (in the code, not in the .po): {msgid!r}")
        for _context, msgid in sorted(committed - code, key=lambda key: key[1]):
            problems.append(f"{where}: obsolete (in the .po, not in the code): {msgid!r}")
    return problems


def _undated(text: str) -> str:
    return re.sub(r'^"POT-Creation-Date: .*\n', "", text, flags=re.M)


def update() -> None:
    for app, language, domain, po in catalogues():
        before = po.read_text(encoding="utf-8")
        makemessages(ROOT / app, language, domain)
        if _undated(po.read_text(encoding="utf-8")) == _undated(before):
            po.write_text(before, encoding="utf-8")  # only the date changed: no churn
    for app in {app for app, *_ in catalogues()}:
        compilemessages(ROOT / app)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--po-only", action="store_true", help="no extraction (no gettext)")
    parser.add_argument("--update", action="store_true", help="makemessages, compilemessages")
    args = parser.parse_args()
    if args.update:
        update()
        print("translations: .po files refreshed, .mo files compiled; now check them")
    problems = check(po_only=args.po_only)
    for problem in problems:
        print(f"translations: {problem}")
    count = len(catalogues())
    if problems:
        sys.exit(f"translations: {len(problems)} problems in {count} catalogues")
    print(f"translations: {count} catalogues complete and current")


if __name__ == "__main__":
    main()
