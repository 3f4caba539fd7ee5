"""Agents: their versions and the settings a session's runs read (who may use which:
``sessions_app.access``).

An ``Agent`` row says who may use it and where it shows; an ``AgentVersion`` holds what shapes
its runs, as overrides of the site's ``AHENTIC`` settings (``AGENT_KEYS``: a key a version
leaves out is the site's value, so the settings dict stays every agent's default). Versions
are never rewritten: a save, a rollback included, is a new version, and a session keeps the
version it started with (``Session.agent_version``), so a change never alters a chat mid-way.

The site's default agent (``is_default``) is created by migration ``0010_agents`` with a
version that overrides nothing: an install that only has settings runs as before.

This module is the one write path for both models.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from decimal import ROUND_UP, Decimal
from typing import Any

from django.core.exceptions import ValidationError
from django.db.models import Max

from . import access, db
from .conf import ahentic_settings
from .models import Agent, AgentVersion, Session

# The AHENTIC keys a version may override (their values checked by ``_value_problem``, and the
# model surface's by the system checks).
SITE_KEYS = (
    "MODEL",
    "BRAIN_MODEL",
    "SOUL",
    "THINKING",
    "THINKING_DISPLAY",
    "EFFORT",
    "WEB_SEARCH",
    "WEB_FETCH",
    "MAX_STEPS_PER_RUN",
    "MAX_STEPS_PER_RUN_CONTENT_WORK",
    "MAX_OUTPUT_TOKENS",
    "MAX_OUTPUT_TOKENS_CONTENT_WORK",
    "CONTEXT_BUDGET_TOKENS",
    "ADMIN_TOOLS",
    "MCP_SERVERS",
)
# Keys only a version has, with their value when a version leaves them out.
AGENT_ONLY_DEFAULTS: dict[str, Any] = {
    "TOOLS": None,  # registry names the agent may use; None: every tool the user may use
    "SKILLS": None,  # skill names it may activate; None: every skill of the site
    "WORKFLOWS": None,  # workflow names it may follow; None: every workflow of the site
    "APPROVAL": {},  # tool name -> "always_ask" or "always_allow"
    "SPEND_CAP_USD": None,  # a session's cost past which its runs stop; None: no cap
    "ROSTER": [],  # slugs of the agents its sub-agents may be
    "MODE": None,  # the mode a new chat starts in ("agent" or "ask"); None: "agent"
    "MEMORY": None,  # the memory tool: None (off), "user" or "user+shared" (sessions_app.memory)
}
AGENT_KEYS = (*SITE_KEYS, *AGENT_ONLY_DEFAULTS)
# Who may continue a chat past its spend cap (``spend_cap_past``), in the Django admin's words.
EXCEED_SPEND_CAP = "sessions_app.exceed_spend_cap"
APPROVALS = ("always_ask", "always_allow")


class AgentNotFound(Exception):
    """No active agent (or version) of that name the user may use: a 404 to the API."""


class AgentSettings:
    """The settings a session's runs read: its version's ``config`` over ``AHENTIC``.

    The keys a version may set (``AGENT_KEYS``) are resolved when it is made, so a step that
    resolves its agent's settings once and hands them down reads each as a plain attribute;
    ``site`` holds the site's own values of ``SITE_KEYS`` (what a version narrows, such as
    ``ADMIN_TOOLS``). Any other ``AHENTIC`` key is read from the site's settings when asked
    for."""

    def __init__(self, config: dict[str, Any]):
        self.config = dict(config)
        self.site = ahentic_settings.read(SITE_KEYS)
        for key in SITE_KEYS:
            setattr(self, key, self.config[key] if key in self.config else self.site[key])
        for key, default in AGENT_ONLY_DEFAULTS.items():
            setattr(self, key, self.config.get(key, default))

    def __getattr__(self, name: str) -> Any:
        config = self.__dict__["config"]
        if name in config:
            return config[name]
        if name in AGENT_ONLY_DEFAULTS:
            return AGENT_ONLY_DEFAULTS[name]
        return getattr(ahentic_settings, name)


# --- reading ------------------------------------------------------------------------------------

# Versions never change, so a process keeps their configs by id (bounded, least recently used
# first). Tests that reuse ids in rolled-back transactions clear it (``clear_cache``).
_KEPT_VERSIONS = 512
_kept: OrderedDict[int, dict[str, Any]] = OrderedDict()
_kept_lock = threading.Lock()


def clear_cache() -> None:
    with _kept_lock:
        _kept.clear()


def _config(version_id: int) -> dict[str, Any]:
    with _kept_lock:
        found = _kept.get(version_id)
        if found is not None:
            _kept.move_to_end(version_id)
            return found
    config = (
        db.primary(AgentVersion).filter(pk=version_id).values_list("config", flat=True).first()
    ) or {}
    with _kept_lock:
        _kept[version_id] = config
        while len(_kept) > _KEPT_VERSIONS:
            _kept.popitem(last=False)
    return config


def settings_for(session: Session) -> AgentSettings:
    """The settings the runs of ``session`` read (its pinned version over ``AHENTIC``)."""
    if session.agent_version_id is None:
        return AgentSettings({})
    return AgentSettings(_config(session.agent_version_id))


def spend_cap(session: Session) -> float | None:
    """The session's cap in USD: its own ``spend_cap_usd`` when staff set one, else its
    agent's ``SPEND_CAP_USD``; None: no cap."""
    if session.spend_cap_usd is not None:
        return float(session.spend_cap_usd)
    return settings_for(session).SPEND_CAP_USD


def spend_cap_reached(session: Session) -> bool:
    """Whether the session's cost reached its cap (``spend_cap``; no cap: never)."""
    cap = spend_cap(session)
    return cap is not None and session.cost_usd is not None and float(session.cost_usd) >= cap


def spend_cap_past(session: Session) -> Decimal | None:
    """The cap a "continue past the cap" gives the chat: its spend so far plus one more of its
    cap in effect (``spend_cap``; the agent's ``SPEND_CAP_USD`` when staff set the chat's to 0).
    None when there is nothing to add (no cap, or caps of 0)."""
    step = spend_cap(session) or settings_for(session).SPEND_CAP_USD
    if not step:
        return None
    spent = session.cost_usd or Decimal(0)
    return (spent + Decimal(str(step))).quantize(Decimal("0.0001"), rounding=ROUND_UP)


def roster(session: Session) -> list[tuple[str, str, str]]:
    """(slug, name, description) of the agents the session's agent may hand work to
    (``ROSTER``) that its user may use, in the roster's order."""
    slugs = list(settings_for(session).ROSTER)
    if not slugs:
        return []
    found = {
        agent.slug: agent
        for agent in Agent.objects.filter(slug__in=slugs, active=True).prefetch_related("groups")
    }
    usable = {agent.slug for agent in access.usable(session.owner, found.values())}
    return [(slug, found[slug].name, found[slug].description) for slug in slugs if slug in usable]


def other_agents(session: Session) -> list[Agent]:
    """The active agents besides the session's own that its owner may use (a new chat's
    picker offers them), by name: what the agent names when a request needs a tool it lacks.
    The agents with their groups, and the user's groups once (``access.usable``)."""
    return usable_agents(session.owner, besides_version=session.agent_version_id)


def latest_version(agent: Agent) -> AgentVersion | None:
    return agent.versions.order_by("-number").first()


def default_agent() -> Agent | None:
    return Agent.objects.filter(is_default=True, active=True).first()


def default_version() -> AgentVersion | None:
    """The default agent's latest version (None without a default agent: the settings alone)."""
    agent = default_agent()
    return latest_version(agent) if agent is not None else None


def usable_agents(user, place: str | None = None, *, besides_version=None) -> list[Agent]:
    """The active agents ``user`` may use (by name), shown on ``place`` ("site" or "admin")
    when given, less the agent of version ``besides_version`` (a pk) when given."""
    agents = Agent.objects.filter(active=True).prefetch_related("groups")
    if place:
        agents = agents.filter(shows_on__in=[place, Agent.Place.BOTH])
    if besides_version is not None:
        agents = agents.exclude(versions=besides_version)
    return access.usable(user, agents)


def version_for_new_session(user, slug: str | None = None, number: int | None = None):
    """The version a new chat of ``user`` pins: the named agent's (the default agent's when
    none is named), its latest or version ``number``. ``AgentNotFound`` for an agent or
    version that does not exist, is inactive, or the user may not use."""
    agent = Agent.objects.filter(slug=slug).first() if slug else default_agent()
    if agent is None:
        if slug:
            raise AgentNotFound(slug)
        return None  # no default agent (deleted by staff): the settings alone
    if not access.may_use(user, agent):
        raise AgentNotFound(agent.slug)
    versions = agent.versions.order_by("-number")
    version = versions.filter(number=number).first() if number else versions.first()
    if version is None:
        raise AgentNotFound(f"{agent.slug} v{number}")
    return version


# --- writing ------------------------------------------------------------------------------------


def clean_config(config: Any, *, registered: bool = True) -> dict[str, Any]:
    """``config`` checked as a version's overrides: a JSON object of ``AGENT_KEYS`` with values
    of the right shape, and (``registered``) what the checks apps registered refuse (the system
    checks report those under their own ids). ``ValidationError`` names every problem."""
    if not isinstance(config, dict):
        raise ValidationError("An agent's configuration is a JSON object.")
    problems = []
    for key, value in config.items():
        if key not in AGENT_KEYS:
            problems.append(f"{key}: not a setting an agent may set ({', '.join(AGENT_KEYS)}).")
            continue
        problem = _value_problem(key, value)
        if problem:
            problems.append(f"{key}: {problem}")
    if registered and not problems:
        # The checks the orchestrator registers (the model surface: thinking, effort, server
        # tools), run on the version's settings as the system checks run them on AHENTIC.
        settings = AgentSettings(config)
        for check in _config_checks:
            problems += check(settings)
    if problems:
        raise ValidationError(problems)
    return dict(config)


_config_checks: list[Callable[[AgentSettings], list[str]]] = []


def add_config_check(check: Callable[[AgentSettings], list[str]]) -> None:
    """Have ``clean_config`` also run ``check`` (an app's ``ready()`` registers it): the
    problems it returns for a version's settings, as messages."""
    if check not in _config_checks:
        _config_checks.append(check)


# What the admin's agent form offers for ``TOOLS`` and ``MCP_SERVERS``: the apps that register
# tools and servers (this app cannot import them) add a provider from their ``ready()``.
_choices: dict[str, Callable[[], list[tuple[str, str]]]] = {}


def add_choices(key: str, provider: Callable[[], list[tuple[str, str]]]) -> None:
    """Have the agent form offer ``provider()``'s (value, label) pairs for the list ``key``
    (``"TOOLS"``: registered tool names; ``"MCP_SERVERS"``: server slugs)."""
    _choices[key] = provider


def choices(key: str) -> list[tuple[str, str]]:
    """The (value, label) pairs offered for ``key``; none when no app provides them."""
    provider = _choices.get(key)
    return list(provider()) if provider is not None else []


def _value_problem(key: str, value: Any) -> str | None:
    if key in ("MODEL", "BRAIN_MODEL"):
        return None if isinstance(value, str) and value.strip() else "a model name."
    if key == "SOUL":
        return None if value is None or isinstance(value, str) else "text or null."
    if key.startswith(("MAX_", "CONTEXT_")):
        return None if isinstance(value, int) and value > 0 else "a positive whole number."
    if key == "ROSTER":
        ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
        return None if ok else "a list of names."
    if key == "ADMIN_TOOLS":
        ok = value is None or (isinstance(value, list) and all(isinstance(v, str) for v in value))
        return None if ok else "null (the site's) or a list of app_label.model labels."
    if key == "MCP_SERVERS":
        ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
        return None if ok else "a list of MCP server slugs."
    if key in ("TOOLS", "SKILLS", "WORKFLOWS"):
        ok = value is None or (isinstance(value, list) and all(isinstance(v, str) for v in value))
        return None if ok else "null (all of them) or a list of names."
    if key == "APPROVAL":
        ok = isinstance(value, dict) and all(v in APPROVALS for v in value.values())
        return None if ok else f"an object of tool name -> one of {', '.join(APPROVALS)}."
    if key == "SPEND_CAP_USD":
        ok = value is None or (isinstance(value, int | float) and value > 0)
        return None if ok else "null or a positive amount in USD."
    if key == "MODE":
        return None if value in (None, "agent", "ask") else 'null, "agent" or "ask".'
    if key == "MEMORY":
        ok = value in (None, "user", "user+shared")
        return None if ok else 'null (off), "user" or "user+shared".'
    return None  # THINKING, EFFORT, WEB_*: checked by the system checks as the settings are


def version_save(
    agent: Agent, *, config: dict[str, Any], user=None, note: str = ""
) -> AgentVersion:
    """A new version of ``agent`` with ``config`` (checked), numbered after its latest, in a
    short transaction holding the agent's row."""
    config = clean_config(config)
    with db.atomic(AgentVersion):
        db.primary(Agent).select_for_update().filter(pk=agent.pk).first()
        last = agent.versions.aggregate(last=Max("number"))["last"] or 0
        return AgentVersion.objects.create(
            agent=agent, number=last + 1, config=config, note=note[:255], created_by=user
        )


def default_set(agent: Agent) -> None:
    """Make ``agent`` the site's default agent (the one a chat naming none pins)."""
    with db.atomic(Agent):
        Agent.objects.exclude(pk=agent.pk).filter(is_default=True).update(is_default=False)
        Agent.objects.filter(pk=agent.pk).update(is_default=True)


def rollback(version: AgentVersion, *, user=None) -> AgentVersion:
    """A new latest version with ``version``'s configuration (history is never rewritten)."""
    return version_save(
        version.agent, config=version.config, user=user, note=f"Rolled back to v{version.number}"
    )


def config_diff(old: dict[str, Any], new: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """(key, before, after) for every key whose effective value differs between two configs
    (a key left out reads as the site's value)."""
    before, after = AgentSettings(old), AgentSettings(new)
    changed = []
    for key in AGENT_KEYS:
        if key in old or key in new:
            a, b = getattr(before, key), getattr(after, key)
            if a != b:
                changed.append((key, a, b))
    return changed
