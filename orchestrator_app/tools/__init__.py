"""The tool registry: the extension point host sites use to give the agent abilities.

::

    from orchestrator_app.tools import tool, ToolError

    @tool(
        name="notes_create",
        description="...",
        input_schema={...},
        readonly=False,  # the default: a tool that is not readonly needs the user's approval
        permission=lambda user: user.has_perm("notes.add_note"),
    )
    def notes_create(ctx, input):
        ...  # return a JSON-serializable dict, or raise ToolError(code, message, hint=None)

Tools are discovered from each installed app's ``ahentic_tools`` module on first use, the
built-ins included (``orchestrator_app/ahentic_tools.py`` loads every module of this package,
so a new built-in is one new file here).
``requires_approval`` defaults to ``not readonly`` (and ``readonly`` to False, so a tool that
says nothing needs approval); ``permission(user)`` decides who may use it (system check
``ahentic.W003`` warns about a host tool that writes without one); ``runtime="browser"`` tools
have no server body (the sidebar runs them); ``artifact_field`` lets the model pass
``{"from_memory": key}``; ``label`` is what people read for the tool ("Save in the admin"):
the approval card and the chips in the sidebar's Basic view never show the registry name (the
default label is the name in words).

Two optional hooks decide what the user sees and grants for one call:

- ``preview(ctx, input) -> str``: the approval card's summary computed as the user, before any
  card. It may raise ``ToolError`` when the call cannot succeed (no permission, invalid input):
  the pipeline answers with that error and shows no card. Without it, ``summary(input)`` is used.
- ``grant_scope(input) -> str | None``: what "allow for this chat" and "always allow" cover for
  this call (default: the tool's name); None means the call is never pre-allowed.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import jsonschema
from django.utils.module_loading import autodiscover_modules

from artifacts_app.store import FROM_MEMORY
from sessions_app import agents
from sessions_app.errors import ModelFacingError

from ..json_limits import MAX_JSON_DEPTH, json_depth_exceeds
from .errors import ToolError

NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
# Names of remote MCP servers' tools (``mcp/tools.py``, a tool source); no registered tool may take one.
MCP_PREFIX = "mcp__"
# The characters of a tool result (its JSON text) the model reads of its own run's results
# (``loop/prompt.py``); an MCP result is stored cut to it (``mcp/tools.py``).
RESULT_CHARS = 8000
RUNTIMES = ("server", "browser")
# A grant key is stored in ``ToolGrant.tool_name`` (64 characters): a longer one is never granted.
GRANT_KEY_MAX = 64
SUMMARY_MAX = 300


class Summary(str):
    """A preview's text with the fields the call changes, for the approval card's diff:
    ``changes`` is a list of ``{"field", "label", "before", "after"}`` (display strings;
    ``label`` the field's name for people, its ``verbose_name``; ``before`` is None for a new
    object, both None for a field the user may not read). ``nothing_changed``: the call would
    save what is already there (``Summary.unchanged``)."""

    changes: list[dict[str, Any]]
    nothing_changed: bool

    def __new__(
        cls,
        text: str,
        changes: list[dict[str, Any]] | None = None,
        *,
        nothing_changed: bool = False,
    ) -> Summary:
        summary = super().__new__(cls, text)
        summary.changes = list(changes or [])
        summary.nothing_changed = nothing_changed
        return summary

    @classmethod
    def unchanged(cls, text: str) -> Summary:
        """The preview of a write that would change nothing (a form with no changes)."""
        return cls(text, nothing_changed=True)


@dataclass
class ToolContext:
    """What a tool receives besides its input. ``stop`` lets a tool end the run (ask_user)."""

    session: Any
    user: Any
    call_id: str
    run: int
    step: int
    stop: tuple[str, str] | None = None


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    input_schema: dict[str, Any]
    func: Callable[[ToolContext, dict[str, Any]], Any] | None
    # What people read for the tool (a lazy translation); ``human_label`` falls back to the name.
    label: str = ""
    readonly: bool = False
    # A bool, or a callable(input) -> bool for input-aware policies (a password field...).
    requires_approval: bool | Callable[[dict[str, Any]], bool] = True
    non_preallowable: bool = False
    runtime: str = "server"
    artifact_field: str | None = None
    artifact_kinds: tuple[str, ...] = ()
    permission: Callable[[Any], bool] | None = None
    timeout: float | None = None
    summary: Callable[[dict[str, Any]], str] | None = None
    preview: Callable[[ToolContext, dict[str, Any]], str] | None = None
    grant_scope: Callable[[dict[str, Any]], str | None] | None = None
    # Built-ins that always answer without approval even though they write session state.
    internal: bool = field(default=False, compare=False)
    # The module that registered it: system check ahentic.W003 tells host tools from built-ins.
    module: str = field(default="", compare=False)

    def needs_approval(self, input: dict[str, Any]) -> bool:
        if callable(self.requires_approval):
            return bool(self.requires_approval(input))
        return bool(self.requires_approval)

    @property
    def human_label(self) -> str:
        """The tool for people: its ``label``, else its name in words ("Notes create")."""
        return str(self.label) if self.label else name_in_words(self.name)

    def allowed_for(self, user) -> bool:
        return self.permission is None or bool(self.permission(user))

    def summarize(self, input: dict[str, Any]) -> str:
        """The summary from the input alone (reads nothing the user may not see)."""
        if self.summary is not None:
            try:
                return str(self.summary(input))[:SUMMARY_MAX]
            except Exception:  # a summary must never break the pipeline
                pass
        return self.human_label

    def describe(self, ctx: ToolContext, input: dict[str, Any]) -> str:
        """The summary the user sees for this call: the approval card, the progress label and
        the trace. With a ``preview`` it is computed as ``ctx.user`` and may raise a
        ``ModelFacingError`` (the call cannot succeed; show no card)."""
        if self.preview is None:
            return self.summarize(input)
        try:
            described = self.preview(ctx, input)
            text = str(described)[:SUMMARY_MAX]
            changes = getattr(described, "changes", None)
            if getattr(described, "nothing_changed", False):
                return Summary.unchanged(text)
            return Summary(text, changes) if changes else text
        except ModelFacingError:
            raise
        except Exception:  # a broken preview falls back to the input-only summary
            return self.summarize(input)

    def grant_key(self, input: dict[str, Any]) -> str | None:
        """What a session allow or a ToolGrant must name to pre-allow this call, or None when
        it must be approved every time."""
        if self.non_preallowable:
            return None
        if self.grant_scope is None:
            return self.name
        try:
            key = self.grant_scope(input)
        except Exception:  # an unreadable input is never pre-allowed
            return None
        return key if key and len(key) <= GRANT_KEY_MAX else None

    def validate(self, input: Any, *, strict: bool = False) -> str | None:
        """The validator's message for invalid input, or None when it is valid.

        A call with ``from_memory`` is checked against the model-facing schema (the key stands
        in for the artifact field) until it is expanded; ``strict`` forces the tool's own.
        """
        if json_depth_exceeds(input):
            return f"The input nests deeper than {MAX_JSON_DEPTH} levels."
        relaxed = not strict and isinstance(input, dict) and FROM_MEMORY in input
        schema = self.api_schema()["input_schema"] if relaxed else self.input_schema
        validator = jsonschema.Draft202012Validator(schema)
        error = jsonschema.exceptions.best_match(validator.iter_errors(input))
        if error is None:
            return None
        where = "/".join(str(p) for p in error.absolute_path)
        return f"{where}: {error.message}" if where else error.message

    def api_schema(self) -> dict[str, Any]:
        """The tool as sent to the model. Artifact fields also accept ``{"from_memory": key}``."""
        schema = self.input_schema
        if self.artifact_field:
            schema = {**schema, "properties": dict(schema.get("properties", {}))}
            schema["properties"][FROM_MEMORY] = {
                "type": "string",
                "description": f"Key of a staged artifact to use as `{self.artifact_field}` "
                "instead of sending the body inline.",
            }
            required = [r for r in schema.get("required", []) if r != self.artifact_field]
            schema["required"] = required
        return {"name": self.name, "description": self.description, "input_schema": schema}


_registry: dict[str, Tool] = {}
_discovered = False
_lock = threading.Lock()


def tool(
    *,
    name: str,
    description: str,
    input_schema: dict[str, Any] | None = None,
    label: str = "",
    readonly: bool = False,
    requires_approval: bool | Callable[[dict[str, Any]], bool] | None = None,
    non_preallowable: bool = False,
    runtime: str = "server",
    artifact_field: str | None = None,
    artifact_kinds: tuple[str, ...] | list[str] = (),
    permission: Callable[[Any], bool] | None = None,
    timeout: float | None = None,
    summary: Callable[[dict[str, Any]], str] | None = None,
    preview: Callable[[ToolContext, dict[str, Any]], str] | None = None,
    grant_scope: Callable[[dict[str, Any]], str | None] | None = None,
    internal: bool = False,
):
    """Register a tool. Used as a decorator; browser tools may decorate a stub."""
    if not NAME_RE.match(name):
        raise ValueError(f"Tool name {name!r} must match {NAME_RE.pattern}")
    if name.startswith(MCP_PREFIX):
        raise ValueError(f"Tool name {name!r}: the prefix {MCP_PREFIX} names MCP servers' tools")
    if runtime not in RUNTIMES:
        raise ValueError(f"Tool {name!r}: runtime must be one of {RUNTIMES}")
    schema = input_schema or {"type": "object", "properties": {}}
    jsonschema.Draft202012Validator.check_schema(schema)

    def register(func):
        definition = Tool(
            name=name,
            description=description,
            input_schema=schema,
            func=func if runtime == "server" else None,
            label=label,
            readonly=readonly,
            requires_approval=(not readonly) if requires_approval is None else requires_approval,
            non_preallowable=non_preallowable,
            runtime=runtime,
            artifact_field=artifact_field,
            artifact_kinds=tuple(artifact_kinds),
            permission=permission,
            timeout=timeout,
            summary=summary,
            preview=preview,
            grant_scope=grant_scope,
            internal=internal,
            module=getattr(func, "__module__", None) or "",
        )
        existing = _registry.get(name)
        if existing is not None and getattr(existing.func, "__qualname__", None) != getattr(
            func, "__qualname__", None
        ):
            raise ValueError(f"Tool {name!r} is already registered by {existing.func!r}")
        _registry[name] = definition
        return func

    return register


def unregister(name: str) -> None:
    _registry.pop(name, None)


def _discover() -> None:
    global _discovered
    if _discovered:
        return
    with _lock:
        if not _discovered:
            # Built-ins too: orchestrator_app/ahentic_tools.py loads every module of this package.
            autodiscover_modules("ahentic_tools")
            _discovered = True


@dataclass(frozen=True)
class ToolSource:
    """Tools a feature adds beside the registry's, named under ``prefix`` (the MCP wing's
    remote tools: ``mcp__<server>__<tool>``). ``resolve(name)`` finds one by name,
    ``session_tools(session)`` lists those a session's agent lists, ``offered_to(session,
    name)`` says whether the agent lists that one. ``setting``: the agent setting that lists
    what the source offers (the MCP wing's ``MCP_SERVERS``), when there is one: a session whose
    agent's setting is empty is offered none of its tools, and the source is not asked. A
    feature adds its source when the app is ready (``add_source``); the registry and the loop
    never import a feature."""

    prefix: str
    resolve: Callable[[str], Tool | None]
    session_tools: Callable[[Any], list[Tool]]
    offered_to: Callable[[Any, str], bool]
    setting: str | None = None


_sources: dict[str, ToolSource] = {}


def add_source(source: ToolSource) -> None:
    """Add (or replace) the tool source of ``source.prefix``."""
    _sources[source.prefix] = source


def source_of(name: str) -> ToolSource | None:
    """The source whose prefix ``name`` starts with, if any."""
    for prefix, source in _sources.items():
        if name.startswith(prefix):
            return source
    return None


def get_tool(name: str) -> Tool | None:
    """The tool named ``name``: a registered one, or a tool source's (``mcp__...``)."""
    _discover()
    source = source_of(name)
    if source is not None:
        return source.resolve(name)
    return _registry.get(name)


def name_in_words(name: str) -> str:
    """A tool name people can read when the tool has no label: ``notes_create`` -> "Notes
    create" (an MCP tool's server prefix left out)."""
    if name.startswith(MCP_PREFIX):
        name = name.rsplit("__", 1)[-1]
    return name.replace("_", " ").replace("-", " ").strip().capitalize() or name


def label_for(name: str) -> str:
    """The label of a registered tool, else its name in words. Reads no database (an MCP
    tool's label is stored with its pending call)."""
    _discover()
    registered = _registry.get(name)
    return registered.human_label if registered is not None else name_in_words(name)


def all_tools() -> list[Tool]:
    _discover()
    return sorted(_registry.values(), key=lambda t: t.name)


# The codes of ``refusal``: the model reads them in the tool result.
UNAVAILABLE = "ability_unavailable"
NO_BROWSER = "ability_no_browser"
FORBIDDEN = "ability_forbidden"
# The reasons of ``ToolPolicy.refused`` that share the code ``UNAVAILABLE``.
UNLISTED = "unlisted"
NOT_GRANTED = "not_granted"


class ToolPolicy:
    """The tool policy of one session's run, for ``user`` (the session's owner by default),
    its agent's settings read once: ``refusal`` says why the run may not call a tool. The one
    policy both sides read: ``tools_for`` offers the model the tools it allows, and the
    pipeline's ``check_call`` refuses every other call with its error, for the chat,
    sub-agents, suggested actions and the site's MCP endpoint."""

    def __init__(self, session, user=None, settings: agents.AgentSettings | None = None):
        self.session = session
        self.user = user if user is not None else session.owner
        self.settings = settings if settings is not None else agents.settings_for(session)

    @cached_property
    def site_admin_tools(self) -> bool:
        """Whether the site's ``ADMIN_TOOLS`` enables any admin model. When it enables none,
        the admin bridge is not asked: no version lists a model of it, and nobody may use
        the admin tools (``may_use_admin_tools`` is False for every user)."""
        return bool(self.settings.site["ADMIN_TOOLS"])

    @cached_property
    def admin_tools_listed(self) -> bool:
        """Whether the version's ``ADMIN_TOOLS`` names one of the site's admin models (it
        narrows the site's list, never widens it)."""
        if not self.site_admin_tools:
            # Listed unless the version narrows them (``agent_labels``), as with no model.
            return self.settings.config.get("ADMIN_TOOLS") in (None, "all")
        from .admin_tools.bridge import agent_labels, enabled_admins

        narrowed = agent_labels(self.session)
        return narrowed is None or any(label in narrowed for label in enabled_admins())

    def refused(self, tool: Tool) -> str | None:
        """Why the run may not call ``tool`` (one of ``UNLISTED``, ``NOT_GRANTED``,
        ``NO_BROWSER``, ``FORBIDDEN``), or None when it may. In order: the agent version's tools
        (``TOOLS`` for the site's tools, ``MCP_SERVERS`` for remote ones, ``ADMIN_TOOLS``
        naming none of the site's admin models), the tools granted to the session (a
        sub-agent's), a browser to run a browser tool in (``browser_available``), and the
        user's own permission (an agent never gives a user a tool they may not use). Builds no
        error: ``tools_for`` asks it of every tool."""
        from .admin_tools.bridge import ADMIN_MODULE, may_use_admin_tools

        session, name = self.session, tool.name
        source = source_of(name)
        if source is not None:
            listed = source.offered_to(session, name)
        else:
            # An agent that keeps memory (``MEMORY``) has the memory tool, whatever ``TOOLS``
            # names.
            listed = (
                self.settings.TOOLS is None
                or name in self.settings.TOOLS
                or (name == "memory" and bool(self.settings.MEMORY))
            )
            if listed and tool.module == ADMIN_MODULE:
                listed = self.admin_tools_listed
        if not listed:
            return UNLISTED
        if session.granted_tools is not None and name not in session.granted_tools:
            return NOT_GRANTED
        if tool.runtime == "browser" and not session.browser_available:
            return NO_BROWSER
        if tool.permission is may_use_admin_tools and not self.site_admin_tools:
            return FORBIDDEN
        if not tool.allowed_for(self.user):
            return FORBIDDEN
        return None

    def refusal(self, tool: Tool) -> ToolError | None:
        """The error the model reads when the run may not call ``tool`` (``refused``), or
        None when it may."""
        reason = self.refused(tool)
        name = tool.name
        if reason is None:
            return None
        if reason == UNLISTED:
            return ToolError(UNAVAILABLE, f"{name} is not one of this agent's tools.")
        if reason == NOT_GRANTED:
            return ToolError(UNAVAILABLE, f"There is no tool named {name!r} in this session.")
        if reason == NO_BROWSER:
            return ToolError(
                NO_BROWSER,
                f"{name} runs in the user's browser, and no browser serves this run (a "
                "scheduled run, an MCP client's call or a run started by the site's code).",
                hint="Do the task without browser tools, or say what the user could do in the "
                "page.",
            )
        return ToolError(FORBIDDEN, f"The user may not use {name}.")


def refusal(
    session, tool: Tool, user=None, settings: agents.AgentSettings | None = None
) -> ToolError | None:
    """Why ``session``'s run may not call ``tool`` (``ToolPolicy.refusal``), or None."""
    return ToolPolicy(session, user, settings).refusal(tool)


def tools_for(session, user, settings: agents.AgentSettings | None = None) -> list[Tool]:
    """Tools this session may offer the model (``refusal`` allows them): those of its agent
    (``TOOLS``, None: every tool) granted to the session, browser tools only when a browser
    serves the run, allowed for the user; then the tools of the MCP servers its agent lists
    (``MCP_SERVERS``: the tool sources, ``ToolSource``), sorted by name. ``settings``: the
    session's agent's settings when the caller holds them."""
    policy = ToolPolicy(session, user, settings)
    site = [t for t in all_tools() if policy.refused(t) is None]
    remote = [
        t
        for source in _sources.values()
        if source.setting is None or getattr(policy.settings, source.setting)
        for t in source.session_tools(session)
        if policy.refused(t) is None
    ]
    return site + remote
