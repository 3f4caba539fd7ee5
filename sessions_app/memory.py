"""Memory across chats: the files the memory tool keeps under ``/memories``, on ORM rows.

An agent whose version sets ``MEMORY`` keeps a tree of files per user (``"user"``) and, with
``"user+shared"``, also one shared by all its users, which the model sees under
``/memories/shared/``. Every user's tree is its own: it is read and written by ``(agent,
owner)`` only, so one user's memory never reaches another user or another agent.

Who writes: the agent in a chat (the memory tool, no approval: it is the user's own data, which
they see and delete in the sidebar), the user (delete one, delete all) and staff (redact, in the
admin). Shared memory is read in every chat of the agent but written only in chats of staff
users: a member's chat cannot put words in front of every other member.

Every write runs here (``command``, ``file_delete``, ``memory_clear``, ``redact``), in a short
transaction holding the agent's row, and records one ``MemoryChange`` per file it changes:
the author, the session, the command, the content before and after.

Paths are confined to the root: a path starts with ``/memories``; ``.`` and ``..`` segments,
backslashes, NULs and control characters, empty names and over-long names are refused before
anything is read. So are names that could pass for other names (``lookalike``): invisible and
direction-changing characters, compatibility forms that NFKC would change (full-width dots and
slashes, ligatures, decomposed accents, odd spaces), slash look-alikes, and case variants of the
reserved ``shared`` folder. Sizes (all in UTF-8 bytes, as stored) are bounded (``MAX_FILE_BYTES`` a file, ``MAX_FILES`` files and
``MAX_TOTAL_BYTES`` per memory); a write past a bound is refused with a message naming it.

Result texts follow Anthropic's memory tool (``memory_20250818``) documentation.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError
from django.db.models import Sum

from . import db
from .models import Agent, MemoryChange, MemoryFile, Session

ROOT = "/memories"
SHARED = "shared"  # the shared memory's directory under the root, when the agent has one
MODES = (None, "user", "user+shared")
COMMANDS = ("view", "create", "str_replace", "insert", "delete", "rename")

# Bounds: a file, the files and the bytes of one memory (a user's, or an agent's shared one).
MAX_FILE_BYTES = 32 * 1024
MAX_FILES = 100
MAX_TOTAL_BYTES = 256 * 1024
MAX_PATH_CHARS = 255
MAX_NAME_CHARS = 128
MAX_LINES = 999_999
SNIPPET_LINES = 4
LISTING_DEPTH = 2


class MemoryError(Exception):  # noqa: A001 - the memory tool's error, not the builtin's
    """A command that cannot be done; ``message`` is the text the model (or user) reads."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Tree:
    """One memory: an agent's files of one user (``owner_id``) or shared (``owner_id`` None)."""

    agent_id: int
    owner_id: int | None

    def files(self):
        return db.primary(MemoryFile).filter(agent_id=self.agent_id, owner_id=self.owner_id)


@dataclass(frozen=True)
class Writer:
    """Who writes: ``author`` ("agent", "user", "staff"), the person, the chat (agent only)."""

    author: str
    user: Any = None
    session: Session | None = None


# --- paths --------------------------------------------------------------------------------------

# Unicode categories never in a name: controls, format characters (bidirectional controls,
# zero-width characters, the BOM, the soft hyphen...), private use, surrogates, unassigned,
# line and paragraph separators.
REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Co", "Cs", "Cn", "Zl", "Zp"})
# Slashes that NFKC leaves alone: fraction and division slash, set minus, big solidi, and the
# combining overlays that draw a slash through the character before them.
SLASH_LOOKALIKES = frozenset("\u2044\u2215\u2216\u29f5\u29f8\u29f9\u0338\u20e5")


def _char_name(char: str) -> str:
    return f"U+{ord(char):04X} {unicodedata.name(char, 'unnamed character')}"


def lookalike(parts: list[str]) -> str | None:
    """Why a name of ``parts`` (a path's names under the root) could pass for another name,
    or None. The one check of memory paths, for the tool and the API alike."""
    for index, part in enumerate(parts):
        for char in part:
            if unicodedata.category(char) in REFUSED_CATEGORIES or char in SLASH_LOOKALIKES:
                return f"the name {part!r} has an invisible or look-alike character ({_char_name(char)})"
        if unicodedata.normalize("NFKC", part) != part:
            changed = next((c for c in part if unicodedata.normalize("NFKC", c) != c), None)
            what = _char_name(changed) if changed else "a decomposed accent"
            return (
                f"the name {part!r} has a compatibility form ({what}); write it as NFKC "
                f"would: {unicodedata.normalize('NFKC', part)!r}"
            )
        if index == 0 and part != SHARED and part.casefold() == SHARED:
            return f"the name {part!r} looks like the reserved folder {SHARED!r}"
    return None


def normalise(path: Any, *, field: str = "path") -> str:
    """``path`` relative to the root ("" for the root itself), or ``MemoryError``: a path is a
    string starting with ``/memories``, with no ``.`` or ``..`` segment, no backslash, NUL or
    control character, no name that looks like another (``lookalike``: code
    ``memory_lookalike_path``), and names of at most ``MAX_NAME_CHARS`` characters."""
    if not isinstance(path, str) or not path:
        raise MemoryError("memory_invalid_path", f"Error: `{field}` must be a path under {ROOT}.")
    shown = path[:300]
    if any(ord(c) < 32 or c == "\x7f" for c in path) or "\\" in path:
        raise MemoryError(
            "memory_invalid_path",
            f"Error: The path {shown!r} has a backslash or a control character.",
        )
    if path != ROOT and not path.startswith(ROOT + "/"):
        raise MemoryError(
            "memory_invalid_path", f"Error: The path {shown} is outside {ROOT}: paths start {ROOT}."
        )
    parts = [p for p in path[len(ROOT) :].split("/") if p]
    why = lookalike(parts)
    if why is not None:
        raise MemoryError(
            "memory_lookalike_path",
            f"Error: The path {shown!r} is refused: {why}. Names must not look like other names.",
        )
    for part in parts:
        if part in (".", "..") or "%2e" in part.lower() or "%2f" in part.lower():
            raise MemoryError(
                "memory_invalid_path",
                f"Error: The path {shown} has a '{part}' segment: paths stay inside {ROOT}.",
            )
        if len(part) > MAX_NAME_CHARS:
            raise MemoryError(
                "memory_invalid_path", f"Error: A name is longer than {MAX_NAME_CHARS} characters."
            )
    relative = "/".join(parts)
    if len(relative) > MAX_PATH_CHARS - len(ROOT) - 1:
        raise MemoryError(
            "memory_invalid_path", f"Error: The path is longer than {MAX_PATH_CHARS} characters."
        )
    return relative


def shown(relative: str) -> str:
    return f"{ROOT}/{relative}" if relative else ROOT


@dataclass(frozen=True)
class Place:
    """Where a model's path points: a tree and the path inside it."""

    tree: Tree
    relative: str  # inside the tree
    path: str  # as the model writes it (normalised)
    shared: bool


def place(agent_id: int, owner_id: int, relative: str, mode: str | None) -> Place:
    """The tree a normalised path is in: ``shared/...`` is the shared memory when the agent
    has one (``"user+shared"``), and refused otherwise (the name stays reserved)."""
    head, _, rest = relative.partition("/")
    if head == SHARED:
        if mode != "user+shared":
            raise MemoryError(
                "memory_shared_off",
                f"Error: {ROOT}/{SHARED} is not available: this agent has no shared memory.",
            )
        return Place(Tree(agent_id, None), rest, shown(relative), True)
    return Place(Tree(agent_id, owner_id), relative, shown(relative), False)


# --- reading ------------------------------------------------------------------------------------


def human_size(size: int) -> str:
    if size < 1024:
        return str(size)
    for unit in ("K", "M"):
        size_f = size / 1024
        if size_f < 1024 or unit == "M":
            return f"{size_f:.1f}{unit}"
        size = int(size_f)
    return str(size)  # pragma: no cover


def numbered(lines: list[str], first: int = 1) -> str:
    return "\n".join(f"{n:>6}\t{line}" for n, line in enumerate(lines, start=first))


def _under(files, relative: str):
    return files.filter(path__startswith=relative + "/") if relative else files


def _file(tree: Tree, relative: str) -> MemoryFile | None:
    if not relative:
        return None
    return tree.files().filter(path=relative).first()


def _is_dir(tree: Tree, relative: str) -> bool:
    return not relative or _under(tree.files(), relative).exists()


def view(where: Place, view_range: Any = None, *, with_shared: bool = False) -> str:
    found = _file(where.tree, where.relative)
    if found is not None:
        return _view_file(where.path, found.content, view_range)
    if not _is_dir(where.tree, where.relative) and not (where.shared and not where.relative):
        raise MemoryError(
            "memory_not_found",
            f"The path {where.path} does not exist. Please provide a valid path.",
        )
    rows = list(_under(where.tree.files(), where.relative).values_list("path", "size"))
    prefix = where.path
    entries: dict[str, int] = {}
    for path, size in rows:
        inner = path[len(where.relative) + 1 :] if where.relative else path
        parts = inner.split("/")
        if any(p.startswith(".") or p == "node_modules" for p in parts):
            continue
        for depth in range(1, min(len(parts), LISTING_DEPTH) + 1):
            key = "/".join(parts[:depth])
            entries[key] = entries.get(key, 0) + size
    if with_shared and not where.relative and not where.shared:
        shared_rows = Tree(where.tree.agent_id, None).files().aggregate(total=Sum("size"))
        entries[SHARED] = shared_rows["total"] or 0
    total = sum(size for _, size in rows)
    lines = [f"{human_size(total)}\t{prefix}"]
    lines += [f"{human_size(entries[key])}\t{prefix}/{key}" for key in sorted(entries)]
    return (
        f"Here're the files and directories up to {LISTING_DEPTH} levels deep in {prefix}, "
        "excluding hidden items and node_modules:\n" + "\n".join(lines)
    )


def _view_file(path: str, content: str, view_range: Any) -> str:
    lines = content.split("\n")
    if content.endswith("\n"):
        lines.pop()
    if len(lines) > MAX_LINES:
        raise MemoryError(
            "memory_too_long", f"File {path} exceeds maximum line limit of 999,999 lines."
        )
    first = 1
    if view_range is not None:
        ok = (
            isinstance(view_range, list)
            and len(view_range) == 2
            and all(isinstance(n, int) and not isinstance(n, bool) for n in view_range)
        )
        start, end = view_range if ok else (0, 0)
        if not ok or start < 1 or start > max(len(lines), 1) or (end != -1 and end < start):
            raise MemoryError(
                "memory_invalid_range",
                f"Error: Invalid `view_range` parameter: {view_range}. It should be [start, end] "
                f"within the lines of the file: [1, {len(lines)}] (end -1: to the end).",
            )
        first = start
        lines = lines[start - 1 :] if end == -1 else lines[start - 1 : end]
    return f"Here's the content of {path} with line numbers:\n{numbered(lines, first)}"


def files(agent: Agent, owner) -> list[MemoryFile]:
    """The user's own memory files of ``agent`` (path order)."""
    return list(Tree(agent.pk, owner.pk).files().order_by("path"))


# --- writing ------------------------------------------------------------------------------------


def _size(text: str) -> int:
    return len(text.encode("utf-8"))


def _check_bounds(tree: Tree, path: str, content: str, replacing: MemoryFile | None) -> None:
    size = _size(content)
    if size > MAX_FILE_BYTES:
        raise MemoryError(
            "memory_file_too_large",
            f"Error: {path} would be {size} bytes; a memory file holds at most "
            f"{MAX_FILE_BYTES} bytes (MAX_FILE_BYTES). Keep it shorter or split it.",
        )
    stats = tree.files().aggregate(total=Sum("size"))
    count = tree.files().count()
    total = (stats["total"] or 0) + size - (replacing.size if replacing else 0)
    if replacing is None and count >= MAX_FILES:
        raise MemoryError(
            "memory_too_many_files",
            f"Error: This memory already holds {count} files, the most it may (MAX_FILES = "
            f"{MAX_FILES}). Delete or merge files first.",
        )
    if total > MAX_TOTAL_BYTES:
        raise MemoryError(
            "memory_full",
            f"Error: This memory would hold {total} bytes; it holds at most {MAX_TOTAL_BYTES} "
            "bytes (MAX_TOTAL_BYTES). Delete or shorten files first.",
        )


def _record(tree: Tree, writer: Writer, relative: str, command: str, before, after) -> None:
    MemoryChange.objects.using(db.write_alias(MemoryChange)).create(
        agent_id=tree.agent_id,
        owner_id=tree.owner_id,
        path=relative,
        command=command,
        author=writer.author,
        by=writer.user,
        session=writer.session,
        before=before,
        after=after,
    )


def _locked(tree: Tree):
    """The agent's row locked: writes to any of its memories take turns (short blocks)."""
    db.primary(Agent).select_for_update().filter(pk=tree.agent_id).first()


def _put(tree: Tree, writer: Writer, relative: str, content: str, command: str, found) -> None:
    path = shown(relative)
    _check_bounds(tree, path, content, found)
    if found is None:
        MemoryFile.objects.using(db.write_alias(MemoryFile)).create(
            agent_id=tree.agent_id,
            owner_id=tree.owner_id,
            path=relative,
            content=content,
            size=_size(content),
        )
    else:
        tree.files().filter(pk=found.pk).update(content=content, size=_size(content))
    _record(tree, writer, relative, command, found.content if found else None, content)


def _parent_is_file(tree: Tree, relative: str) -> str | None:
    parts = relative.split("/")
    for depth in range(1, len(parts)):
        parent = "/".join(parts[:depth])
        if tree.files().filter(path=parent).exists():
            return parent
    return None


def _missing(path: str, valid: bool = False) -> MemoryError:
    tail = ". Please provide a valid path." if valid else ""
    return MemoryError("memory_not_found", f"Error: The path {path} does not exist{tail}")


def command(
    agent_id: int,
    owner_id: int,
    input: dict[str, Any],  # noqa: A002 - the tool's input
    *,
    mode: str | None,
    writer: Writer,
    may_write_shared: bool = False,
) -> str:
    """Run one memory tool command for the user ``owner_id`` of agent ``agent_id`` and return
    the text the model reads, or raise ``MemoryError`` with it."""
    name = input.get("command")
    if name not in COMMANDS:
        raise MemoryError(
            "memory_unknown_command",
            f"Error: Unknown command {name!r}; one of {', '.join(COMMANDS)}.",
        )
    if name == "rename":
        old = place(agent_id, owner_id, normalise(input.get("old_path"), field="old_path"), mode)
        new = place(agent_id, owner_id, normalise(input.get("new_path"), field="new_path"), mode)
        targets = [old, new]
    else:
        targets = [place(agent_id, owner_id, normalise(input.get("path")), mode)]
    where = targets[0]
    if name == "view":
        return view(where, input.get("view_range"), with_shared=mode == "user+shared")
    for target in targets:
        if target.shared and not may_write_shared:
            raise MemoryError(
                "memory_shared_read_only",
                f"Error: {ROOT}/{SHARED} is read-only in this chat: only staff write the "
                "agent's shared memory.",
            )
        if not target.relative:
            raise MemoryError(
                "memory_invalid_path",
                f"Error: {target.path} is the memory directory itself; name a file under it.",
            )
    try:
        with db.atomic(MemoryFile):
            _locked(where.tree)
            return _write(name, input, targets, writer)
    except IntegrityError:
        raise MemoryError(
            "memory_conflict", "Error: Another change to this memory came first; try again."
        ) from None


def _write(name: str, input: dict[str, Any], targets: list[Place], writer: Writer) -> str:
    where = targets[0]
    tree, relative, path = where.tree, where.relative, where.path
    found = _file(tree, relative)
    if name == "create":
        text = input.get("file_text")
        if not isinstance(text, str):
            raise MemoryError("memory_invalid_input", "Error: `file_text` must be a string.")
        if found is not None or _is_dir(tree, relative):
            raise MemoryError("memory_exists", f"Error: File {path} already exists")
        parent = _parent_is_file(tree, relative)
        if parent is not None:
            raise MemoryError(
                "memory_not_a_directory", f"Error: {shown(parent)} is a file, not a directory."
            )
        _put(tree, writer, relative, text, "create", None)
        return f"File created successfully at: {path}"
    if name == "str_replace":
        if found is None:
            raise _missing(path, valid=True)
        old, new = input.get("old_str"), input.get("new_str", "")
        if not isinstance(old, str) or not old or not isinstance(new, str):
            raise MemoryError(
                "memory_invalid_input", "Error: `old_str` (not empty) and `new_str` are strings."
            )
        count = found.content.count(old)
        if count == 0:
            raise MemoryError(
                "memory_no_match",
                f"No replacement was performed, old_str `{old}` did not appear verbatim in {path}.",
            )
        if count > 1:
            lines = _lines_starting(found.content, old)
            raise MemoryError(
                "memory_ambiguous",
                f"No replacement was performed. Multiple occurrences of old_str `{old}` in lines: "
                f"{', '.join(map(str, lines))}. Please ensure it is unique",
            )
        at = found.content.index(old)
        content = found.content.replace(old, new, 1)
        _put(tree, writer, relative, content, "str_replace", found)
        line = found.content.count("\n", 0, at) + 1
        return "The memory file has been edited.\n" + _snippet(content, line, new)
    if name == "insert":
        if found is None:
            raise _missing(path)
        text, line = input.get("insert_text"), input.get("insert_line")
        if not isinstance(text, str) or not isinstance(line, int) or isinstance(line, bool):
            raise MemoryError(
                "memory_invalid_input",
                "Error: `insert_line` must be a whole number and `insert_text` a string.",
            )
        lines = found.content.split("\n")
        if found.content.endswith("\n"):
            lines.pop()
        if not 0 <= line <= len(lines):
            raise MemoryError(
                "memory_invalid_line",
                f"Error: Invalid `insert_line` parameter: {line}. It should be within the range "
                f"of lines of the file: [0, {len(lines)}]",
            )
        added = text[:-1].split("\n") if text.endswith("\n") else text.split("\n")
        content = "\n".join(lines[:line] + added + lines[line:])
        if found.content.endswith("\n") or not found.content:
            content += "\n"
        _put(tree, writer, relative, content, "insert", found)
        return f"The file {path} has been edited."
    if name == "delete":
        gone = [found] if found is not None else list(_under(tree.files(), relative))
        if not gone:
            raise _missing(path)
        for row in gone:
            _record(tree, writer, row.path, "delete", row.content, None)
        tree.files().filter(pk__in=[row.pk for row in gone]).delete()
        return f"Successfully deleted {path}"
    # rename
    new = targets[1]
    moving = [found] if found is not None else list(_under(tree.files(), relative))
    if not moving:
        raise _missing(path)
    if new.relative == relative or new.relative.startswith(relative + "/"):
        raise MemoryError(
            "memory_invalid_path", f"Error: Cannot move {path} into itself ({new.path})."
        )
    if _file(new.tree, new.relative) is not None or _is_dir(new.tree, new.relative):
        raise MemoryError("memory_exists", f"Error: The destination {new.path} already exists")
    parent = _parent_is_file(new.tree, new.relative)
    if parent is not None:
        raise MemoryError(
            "memory_not_a_directory", f"Error: {shown(parent)} is a file, not a directory."
        )
    for row in moving:
        to = new.relative + row.path[len(relative) :]
        if new.tree != tree:
            _check_bounds(new.tree, shown(to), row.content, None)
        _record(tree, writer, row.path, "rename", row.content, None)
        if new.tree == tree:
            tree.files().filter(pk=row.pk).update(path=to)
            _record(tree, writer, to, "rename", None, row.content)
        else:
            tree.files().filter(pk=row.pk).delete()
            _put(new.tree, writer, to, row.content, "rename", None)
    return f"Successfully renamed {path} to {new.path}"


def _lines_starting(content: str, old: str) -> list[int]:
    lines, start = [], content.find(old)
    while start != -1:
        line = content.count("\n", 0, start) + 1
        if line not in lines:
            lines.append(line)
        start = content.find(old, start + 1)
    return lines


def _snippet(content: str, line: int, new: str) -> str:
    lines = content.split("\n")
    last = line + new.count("\n")
    first = max(1, line - SNIPPET_LINES)
    end = min(len(lines), last + SNIPPET_LINES)
    return numbered(lines[first - 1 : end], first)


# --- the user's and staff's writes --------------------------------------------------------------


def file_delete(agent: Agent, owner, relative: str, *, writer: Writer) -> bool:
    """Delete one file of ``owner``'s memory of ``agent`` (versioned). False when absent."""
    tree = Tree(agent.pk, owner.pk)
    with db.atomic(MemoryFile):
        _locked(tree)
        found = _file(tree, relative)
        if found is None:
            return False
        _record(tree, writer, found.path, "delete", found.content, None)
        tree.files().filter(pk=found.pk).delete()
    return True


def memory_clear(agent: Agent, owner, *, writer: Writer) -> int:
    """Delete every file of ``owner``'s memory of ``agent`` (each versioned); how many."""
    tree = Tree(agent.pk, owner.pk)
    with db.atomic(MemoryFile):
        _locked(tree)
        gone = list(tree.files())
        for row in gone:
            _record(tree, writer, row.path, "delete", row.content, None)
        tree.files().filter(pk__in=[row.pk for row in gone]).delete()
    return len(gone)


def redact(file: MemoryFile, content: str, *, staff) -> None:
    """Staff replace a file's content (a redaction; an empty content deletes the file)."""
    tree = Tree(file.agent_id, file.owner_id)
    writer = Writer(MemoryChange.Author.STAFF, user=staff)
    with db.atomic(MemoryFile):
        _locked(tree)
        found = _file(tree, file.path)
        if found is None or found.content == content:
            return
        if content:
            if _size(content) > MAX_FILE_BYTES:
                raise MemoryError(
                    "memory_file_too_large", f"A memory file holds at most {MAX_FILE_BYTES} bytes."
                )
            tree.files().filter(pk=found.pk).update(content=content, size=_size(content))
            _record(tree, writer, found.path, "redact", found.content, content)
        else:
            _record(tree, writer, found.path, "redact", found.content, None)
            tree.files().filter(pk=found.pk).delete()
