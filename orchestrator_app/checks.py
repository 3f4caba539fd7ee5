"""System checks with stable ids for the AHENTIC and Q_CLUSTER settings."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from django.apps import apps
from django.conf import settings
from django.core.checks import Error, Tags, Warning, register

from sessions_app.conf import ahentic_settings

# The template every Django admin page extends; the sidebar must be rendered from it.
ADMIN_BASE_TEMPLATE = "admin/base_site.html"

# Worst single SDK attempt plus its backoff sleeps (the SDK caps one sleep at 8 s).
_BACKOFF_SLACK_S = 8


def _at_least(value, minimum, *, whole: bool = True) -> bool:
    """Whether a setting's value is a number of at least ``minimum``: an int when ``whole``,
    else an int or a float; never a bool (True is an int to Python)."""
    kinds = int if whole else (int, float)
    return isinstance(value, kinds) and not isinstance(value, bool) and value >= minimum


@register()
def check_queue(app_configs=None, **kwargs):
    errors = []
    q = getattr(settings, "Q_CLUSTER", {}) or {}
    timeout, retry = q.get("timeout"), q.get("retry")
    if timeout is not None and retry is not None and retry <= timeout:
        errors.append(
            Error(
                "Q_CLUSTER['retry'] must be greater than Q_CLUSTER['timeout'].",
                hint="Otherwise django-q2 re-delivers steps that are still running.",
                id="ahentic.E001",
            )
        )
    attempts = int(ahentic_settings.LLM_MAX_RETRIES) + 1
    worst_call = attempts * (int(ahentic_settings.LLM_TIMEOUT_S) + _BACKOFF_SLACK_S)
    if timeout is not None and timeout < worst_call:
        errors.append(
            Error(
                f"Q_CLUSTER['timeout'] ({timeout}s) is shorter than the worst model call "
                f"with retries ({worst_call}s).",
                hint="Raise Q_CLUSTER timeout/retry or lower AHENTIC LLM_TIMEOUT_S.",
                id="ahentic.E002",
            )
        )
    return errors


@register()
def check_ahentic_settings(app_configs=None, **kwargs):
    from pathlib import Path

    errors = []
    soul = ahentic_settings.SOUL
    if isinstance(soul, Path) or (
        isinstance(soul, str) and "\n" not in soul and soul.endswith((".md", ".txt"))
    ):
        if not Path(soul).is_file():
            errors.append(
                Error(
                    f"AHENTIC['SOUL'] names a file that does not exist: {soul}",
                    hint="Give the soul text itself or an existing path.",
                    id="ahentic.E003",
                )
            )
    prices = ahentic_settings.PRICES
    if not isinstance(prices, dict) or not all(_price_ok(p) for p in prices.values()):
        errors.append(
            Error(
                "AHENTIC['PRICES'] must map model names to "
                "{input, output, cache_write, cache_read} USD per million tokens.",
                id="ahentic.E004",
            )
        )
    errors.extend(_attachment_errors())
    if not ahentic_settings.API_KEY and not ahentic_settings.BASE_URL:
        errors.append(
            Warning(
                "No Anthropic API key and no base URL: the agent cannot answer.",
                hint="Set ANTHROPIC_API_KEY (or AHENTIC['API_KEY']), or AHENTIC['BASE_URL'] "
                "to a local Messages API server.",
                id="ahentic.W001",
            )
        )
    return errors


@register(Tags.templates)
def check_admin_sidebar(app_configs=None, **kwargs):
    """W002: ADMIN_SIDEBAR is on but the admin's base template never renders the sidebar."""
    if not ahentic_settings.ADMIN_SIDEBAR or not apps.is_installed("django.contrib.admin"):
        return []
    if _renders_sidebar(ADMIN_BASE_TEMPLATE) is not False:
        return []
    return [
        Warning(
            "AHENTIC['ADMIN_SIDEBAR'] is on, but the admin's base template "
            f"({ADMIN_BASE_TEMPLATE}) does not include the agent sidebar.",
            hint="Create templates/admin/base_site.html in a directory listed in TEMPLATES "
            "'DIRS' containing {% extends \"ahentic/admin_base_site.html\" %}, or list "
            "orchestrator_app before django.contrib.admin in INSTALLED_APPS, or add "
            "{% load ahentic %}{% ahentic_sidebar admin=True %} to the footer block of the "
            "site's own admin/base_site.html.",
            id="ahentic.W002",
        )
    ]


def _renders_sidebar(template_name: str) -> bool | None:
    """Whether the template or a template it extends uses ``{% ahentic_sidebar %}``.

    Follows ``{% extends %}`` the way rendering does (a template may extend one of the same
    name further down the loaders). None when it cannot tell: a template is missing or broken
    (rendering reports that itself), or a parent is chosen at render time. A block that a
    child overrides without ``{{ block.super }}`` is not followed: presence is enough.
    """
    from django.template import TemplateDoesNotExist, TemplateSyntaxError, Variable, loader
    from django.template.library import SimpleNode
    from django.template.loader_tags import ExtendsNode

    from .templatetags.ahentic import ahentic_sidebar

    try:
        template = getattr(loader.get_template(template_name), "template", None)
        if template is None:  # not the Django template language: nothing to inspect
            return None
        history = [template.origin]
        while True:
            nodes = template.nodelist.get_nodes_by_type(SimpleNode)
            if any(node.func is ahentic_sidebar for node in nodes):
                return True
            extends = template.nodelist.get_nodes_by_type(ExtendsNode)
            if not extends:
                return False
            parent = extends[0].parent_name.var
            if isinstance(parent, Variable) or not isinstance(parent, str):
                return None
            template, origin = template.engine.find_template(parent, skip=history)
            history.append(origin)
    except (TemplateDoesNotExist, TemplateSyntaxError):  # rendering reports these itself
        return None


def _price_ok(entry) -> bool:
    if not isinstance(entry, dict):
        return False
    try:
        return all(
            Decimal(str(entry[k])) >= 0 for k in ("input", "output", "cache_write", "cache_read")
        )
    except (KeyError, InvalidOperation, TypeError):
        return False


@register()
def check_admin_tools(app_configs=None, **kwargs):
    """``ADMIN_TOOLS`` is None, "all" or a list of installed models registered in an AdminSite."""

    from .tools.admin_tools import bridge

    value = ahentic_settings.ADMIN_TOOLS
    if value is None or value == "all":
        return []
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        return [
            Error(
                'AHENTIC["ADMIN_TOOLS"] must be None, "all" or a list of "app_label.model".',
                id="ahentic.E005",
            )
        ]
    errors = []
    for label in value:
        model = bridge.model_for_label(str(label))
        if model is None or model not in bridge.registered_admins():
            errors.append(
                Error(
                    f'AHENTIC["ADMIN_TOOLS"] names {label!r}, which is not an installed model '
                    "registered with an admin site.",
                    hint='Use "app_label.model" of a model registered in an AdminSite.',
                    id="ahentic.E006",
                )
            )
        elif model._meta.app_label in bridge.OWN_APPS:
            errors.append(
                Error(
                    f'AHENTIC["ADMIN_TOOLS"] names {label!r}: the agent never edits its own '
                    "sessions, artifacts or grants.",
                    id="ahentic.E007",
                )
            )
    return errors


@register(Tags.admin)
def check_stale_form_guard(app_configs=None, **kwargs):
    """Every ``ADMIN_TOOLS`` model's ModelAdmin, on every AdminSite that registers it, inherits
    ``StaleChangeFormMixin`` (opt-in: nothing adds it at run time)."""
    from django.apps import apps as installed

    from .tools.admin_tools import bridge
    from .tools.admin_tools.stale import StaleChangeFormMixin, is_enabled

    if not bridge.configured_labels():
        return []
    warnings = []
    seen: set[int] = set()
    for model in installed.get_models():
        if not is_enabled(model):
            continue
        for site in bridge.admin_sites():
            if not site.is_registered(model):
                continue
            model_admin = site.get_model_admin(model)
            if isinstance(model_admin, StaleChangeFormMixin) or id(model_admin) in seen:
                continue
            seen.add(id(model_admin))  # admin.site may be listed as its lazy proxy too
            warnings.append(
                Warning(
                    f"The ModelAdmin of {bridge.model_label(model)} on the admin site "
                    f"{site.name!r} ({type(model_admin).__qualname__}) lacks "
                    "StaleChangeFormMixin: a change form opened before the agent edited the "
                    "object writes the old values back when saved.",
                    hint="Add orchestrator_app.admin_mixins.StaleChangeFormMixin first in its "
                    "bases (docs/howto/admin-tools.md).",
                    obj=type(model_admin),
                    id="ahentic.W005",
                )
            )
    return warnings


def _attachment_errors() -> list:
    """``ATTACHMENT_STORAGE`` names a configured storage; the limits are positive integers;
    ``FILES_API`` is a bool and ``FILES_API_MIN_BYTES`` an integer of 0 or more."""
    from django.conf import settings

    errors = []
    alias = ahentic_settings.ATTACHMENT_STORAGE
    if alias and alias not in getattr(settings, "STORAGES", {}):
        errors.append(
            Error(
                f"AHENTIC['ATTACHMENT_STORAGE'] names no storage of STORAGES: {alias!r}",
                hint="Name an alias of settings.STORAGES, or None for default_storage.",
                id="ahentic.E008",
            )
        )
    for key in (
        "ATTACHMENT_MAX_IMAGE_BYTES",
        "ATTACHMENT_MAX_PDF_BYTES",
        "ATTACHMENT_MAX_PER_MESSAGE",
        "ATTACHMENT_MAX_PER_SESSION",
        "ATTACHMENT_MAX_IMAGE_PIXELS",
        "ATTACHMENT_QUOTA_BYTES",
    ):
        value = getattr(ahentic_settings, key)
        if key == "ATTACHMENT_QUOTA_BYTES" and value is None:
            continue  # no quota
        if not _at_least(value, 1):
            errors.append(Error(f"AHENTIC[{key!r}] must be a positive integer.", id="ahentic.E008"))
    if not isinstance(ahentic_settings.FILES_API, bool):
        errors.append(
            Error(
                "AHENTIC['FILES_API'] must be True or False.",
                hint="True sends PDFs of at least FILES_API_MIN_BYTES through the Files API.",
                id="ahentic.E008",
            )
        )
    threshold = ahentic_settings.FILES_API_MIN_BYTES
    if not _at_least(threshold, 0):
        errors.append(
            Error(
                "AHENTIC['FILES_API_MIN_BYTES'] must be an integer of 0 or more.",
                hint="PDFs of at least this many bytes go through the Files API (0: every PDF).",
                id="ahentic.E008",
            )
        )
    return errors


@register()
def check_model_surface(app_configs=None, **kwargs):
    """THINKING, THINKING_DISPLAY, EFFORT, WEB_SEARCH and WEB_FETCH (``surface``), per mode."""
    return _surface_errors(ahentic_settings, lambda key: f"AHENTIC['{key}']")


def surface_problems(conf) -> list[str]:
    """The model-surface problems of an agent version's settings, as messages (registered with
    ``agents.add_config_check``, so the admin refuses what the system checks would)."""
    return [error.msg for error in _surface_errors(conf, lambda key: key)]


def _surface_errors(conf, where) -> list:
    """The model-surface errors of ``conf`` (the site's settings or an agent version's,
    ``agents.AgentSettings``); ``where(key)`` names a setting in the messages."""
    from .loop import surface

    errors = []
    limits = {
        "agent": int(conf.MAX_OUTPUT_TOKENS),
        "ask": int(conf.MAX_OUTPUT_TOKENS),
    }
    for mode in surface.MODES:
        value = surface.thinking_setting(mode, conf)
        budget_ok = (
            isinstance(value, int)
            and not isinstance(value, bool)
            and surface.THINKING_MIN_BUDGET <= value < limits[mode]
        )
        if value not in ("off", "adaptive") and not budget_ok:
            errors.append(
                Error(
                    f'{where("THINKING")} for {mode} mode is {value!r}: give "off", '
                    f'"adaptive" or a budget of at least {surface.THINKING_MIN_BUDGET} tokens '
                    f"below MAX_OUTPUT_TOKENS ({limits[mode]}).",
                    hint="The API refuses a budget_tokens below 1024 or not below max_tokens.",
                    id="ahentic.E020",
                )
            )
        display = surface.per_mode(conf.THINKING_DISPLAY, mode)
        effort = surface.effort(mode, conf)
        if display not in (None, *surface.DISPLAYS) or effort not in (None, *surface.EFFORTS):
            errors.append(
                Error(
                    f"{where('THINKING_DISPLAY')} / {where('EFFORT')} for {mode} mode: "
                    f"display must be one of {surface.DISPLAYS}, effort one of "
                    f"{surface.EFFORTS} (or None).",
                    id="ahentic.E021",
                )
            )
        for setting in ("WEB_SEARCH", "WEB_FETCH"):
            tool = surface.per_mode(getattr(conf, setting), mode)
            if tool in (None, False, True):
                continue
            uses = tool.get("max_uses") if isinstance(tool, dict) else None
            if (
                not isinstance(tool, dict)
                or (uses is not None and (not isinstance(uses, int) or uses < 1))
                or (tool.get("allowed_domains") and tool.get("blocked_domains"))
            ):
                errors.append(
                    Error(
                        f"{where(setting)} for {mode} mode must be None or a dict of the "
                        "tool's options (max_uses >= 1; allowed_domains or blocked_domains, "
                        "not both).",
                        id="ahentic.E022",
                    )
                )
    return errors


def spend_cap_problems(conf) -> list[str]:
    """E028 for an agent version's settings, as messages (registered with
    ``agents.add_config_check``: the agent form refuses it as the system checks report it)."""
    return [error.msg for error in _spend_cap_errors(conf, lambda key: key) if error.is_serious()]


def _spend_cap_errors(conf, where) -> list:
    """E028: a USD cap (``SPEND_CAP_USD``) on a ``MODEL`` without prices, whose calls the ledger
    cannot price (``agents.model_prices``), so the cap would never be reached. W011: a capped
    agent whose ``BRAIN_MODEL`` has no prices (its titles and memory calls are not counted)."""
    from sessions_app import agents

    if not conf.SPEND_CAP_USD:
        return []
    if agents.model_prices(conf.MODEL) is None:
        return [
            Error(
                f"{where('SPEND_CAP_USD')} is set but the model {conf.MODEL!r} has no prices "
                "in AHENTIC['PRICES']: its spend is not counted, so the cap is never reached.",
                hint="Add the model's prices to AHENTIC['PRICES'] or remove the cap.",
                id="ahentic.E028",
            )
        ]
    if agents.model_prices(conf.BRAIN_MODEL) is None:
        return [
            Warning(
                f"{where('SPEND_CAP_USD')} is set but the brain model {conf.BRAIN_MODEL!r} "
                "has no prices in AHENTIC['PRICES']: its calls (titles, memory) are not "
                "counted toward the cap.",
                hint="Add the brain model's prices to AHENTIC['PRICES'].",
                id="ahentic.W011",
            )
        ]
    return []


@register()
def check_agents(app_configs=None, **kwargs):
    """The agents' rows (``sessions_app.agents``), checked as the settings are: E023 a latest
    version whose configuration ``agents.clean_config`` refuses, E024 an active agent without a
    version, E020-E022 its model surface, E028/W011 a spend cap on models without prices, W006 tools (``TOOLS``, ``APPROVAL``) that are not in
    the registry, W007 no default agent, W008 a ``ROSTER`` naming no agent. Skipped before
    ``migrate`` has created the tables (or when the database cannot be reached)."""
    from django.core.exceptions import ValidationError
    from django.db.models import JSONField, OuterRef, Subquery
    from django.db.utils import OperationalError, ProgrammingError

    from sessions_app import agents
    from sessions_app.models import Agent, AgentVersion

    from .tools import all_tools

    latest = AgentVersion.objects.filter(agent=OuterRef("pk")).order_by("-number")
    try:
        rows = list(
            Agent.objects.annotate(
                latest_number=Subquery(latest.values("number")[:1]),
                latest_config=Subquery(latest.values("config")[:1], output_field=JSONField()),
            ).order_by("slug")
        )
    except (OperationalError, ProgrammingError):
        return []  # no tables yet (before migrate): nothing to check
    messages = []
    if not any(agent.is_default and agent.active for agent in rows):
        messages.append(
            Warning(
                "No active default agent: a chat that names no agent runs with the AHENTIC "
                "settings alone.",
                hint="Make an agent the default in the admin (Agents, Make default).",
                id="ahentic.W007",
            )
        )
    slugs = {agent.slug for agent in rows}
    tool_names: set[str] | None = None
    for agent in rows:
        if agent.latest_number is None:
            if agent.active:
                messages.append(
                    Error(
                        f"The active agent {agent.slug!r} has no version: no chat can start "
                        "with it.",
                        hint="Save it in the admin (that makes version 1) or make it inactive.",
                        id="ahentic.E024",
                    )
                )
            continue
        label = f"Agent {agent.slug!r} v{agent.latest_number}"
        try:
            # Shapes only: the model surface is E020-E022's (below).
            config = agents.clean_config(agent.latest_config, registered=False)
        except ValidationError as error:
            messages.append(
                Error(
                    f"{label}: its configuration is invalid: {' '.join(error.messages)}",
                    hint="Save a corrected configuration (or roll back) in the admin.",
                    id="ahentic.E023",
                )
            )
            continue
        settings_of_version = agents.AgentSettings(config)
        messages.extend(_surface_errors(settings_of_version, lambda k, at=label: f"{at} {k}"))
        messages.extend(_spend_cap_errors(settings_of_version, lambda k, at=label: f"{at} {k}"))
        named = [*(config.get("TOOLS") or []), *(config.get("APPROVAL") or {})]
        if named:
            if tool_names is None:
                tool_names = {definition.name for definition in all_tools()}
            # MCP servers' tools are listed at run time (W017 checks their servers).
            unknown = sorted(n for n in set(named) - tool_names if not n.startswith("mcp__"))
            if unknown:
                messages.append(
                    Warning(
                        f"{label} names tools that are not registered: {', '.join(unknown)}.",
                        hint="Use names of registered tools (orchestrator_app.tools); a tool "
                        "that is not registered is never offered.",
                        id="ahentic.W006",
                    )
                )
        strangers = sorted(set(config.get("ROSTER") or []) - slugs)
        if strangers:
            messages.append(
                Warning(
                    f"{label}'s ROSTER names agents that do not exist: {', '.join(strangers)}.",
                    hint="List slugs of existing agents.",
                    id="ahentic.W008",
                )
            )
    return messages


@register()
def check_schedules(app_configs=None, **kwargs):
    """Scheduled runs (``control.schedules``): E025 ``SCHEDULE_GRACE_S`` under a minute (a
    tick runs once a minute, so due times would be missed), E026 ``SCHEDULE_MAX_FAILURES`` not
    a positive whole number, E027 a stored schedule whose cron expression or time zone is
    invalid (written outside the admin), W009 active schedules and no django-q2 schedule for
    the tick (nothing fires them), W010 an active schedule whose user may not use its agent
    (each firing fails until it pauses itself). The rows are skipped before ``migrate``."""
    from django.core.exceptions import ValidationError
    from django.db.utils import OperationalError, ProgrammingError

    from .control import schedules
    from .models import Schedule, validate_cron, validate_time_zone

    messages = []
    grace = ahentic_settings.SCHEDULE_GRACE_S
    if not _at_least(grace, 60):
        messages.append(
            Error(
                f"AHENTIC['SCHEDULE_GRACE_S'] must be a whole number of seconds, at least 60 "
                f"(it is {grace!r}).",
                hint="The tick runs once a minute: a shorter window misses due times.",
                id="ahentic.E025",
            )
        )
    failures = ahentic_settings.SCHEDULE_MAX_FAILURES
    if not _at_least(failures, 1):
        messages.append(
            Error(
                f"AHENTIC['SCHEDULE_MAX_FAILURES'] must be a positive whole number "
                f"(it is {failures!r}).",
                id="ahentic.E026",
            )
        )
    try:
        active = list(
            Schedule.objects.filter(paused=False).select_related("agent", "agent_version", "run_as")
        )
    except (OperationalError, ProgrammingError):
        return messages  # no tables yet (before migrate)
    for schedule in active:
        label = f"Schedule {schedule.name!r} ({schedule.pk})"
        try:
            validate_cron(schedule.cron)
            validate_time_zone(schedule.time_zone)
        except ValidationError as error:
            messages.append(
                Error(
                    f"{label}: {' '.join(error.messages)}",
                    hint="Correct it in the admin; until then it never fires.",
                    id="ahentic.E027",
                )
            )
            continue
        found = schedules.refusal(schedule)
        if isinstance(found, schedules.Refusal):
            messages.append(
                Warning(
                    f"{label} cannot run: {found.message}",
                    hint="Give its user the permission, choose another user or agent, or pause it.",
                    id="ahentic.W010",
                )
            )
    if active and not _tick_scheduled():
        messages.append(
            Warning(
                "There are active schedules but no django-q2 schedule runs "
                "orchestrator_app.tasks.schedule_tick: nothing fires them.",
                hint="Run migrate (orchestrator_app 0006 creates it), or add a django-q2 "
                "schedule calling it every minute.",
                id="ahentic.W009",
            )
        )
    return messages


def _tick_scheduled() -> bool:
    from django_q.models import Schedule as QSchedule

    return QSchedule.objects.filter(func="orchestrator_app.tasks.schedule_tick").exists()


def mcp_server_problems(conf) -> list[str]:
    """An agent version's ``MCP_SERVERS`` naming servers that are not registered, as messages
    (registered with ``agents.add_config_check``: refused where a version is saved; W017 reports
    them for versions saved before a server was deleted)."""
    from .models import McpServer

    named = conf.config.get("MCP_SERVERS") or []
    if not named:
        return []
    known = set(McpServer.objects.filter(slug__in=named).values_list("slug", flat=True))
    unknown = sorted(set(named) - known)
    if not unknown:
        return []
    return [f"MCP_SERVERS: no registered MCP server named {', '.join(unknown)}."]


@register()
def check_mcp(app_configs=None, **kwargs):
    """The MCP client (docs/howto/mcp-client.md): E034 credentials exist, a server takes
    per-user or site credentials, or webhook endpoints exist, and ``VAULT_KEYS`` is empty; E035
    ``VAULT_KEYS`` is not a list of Fernet keys; E036 a vault key is the ``SECRET_KEY``;
    W017 ``MCP_SERVERS`` (the settings' or an agent's latest version) names no registered
    server; W018 an active server's URL the client refuses (https, or http to a local address
    with ``MCP_ALLOW_INSECURE_LOCAL``). Skipped before ``migrate``."""
    from django.db.models import OuterRef, Subquery
    from django.db.utils import OperationalError, ProgrammingError

    from sessions_app.models import Agent, AgentVersion

    from . import vault
    from .models import McpCredential, McpServer, WebhookEndpoint
    from .tools.mcp_client import url_problem

    messages = []
    problem = vault.key_problem()
    if problem:
        messages.append(
            Error(
                problem,
                hint="Generate one with Fernet.generate_key() (cryptography).",
                id="ahentic.E035",
            )
        )
    keys = ahentic_settings.VAULT_KEYS if not problem else []
    if settings.SECRET_KEY and any(
        k in (settings.SECRET_KEY, settings.SECRET_KEY.encode()) for k in keys
    ):
        messages.append(
            Error(
                "AHENTIC['VAULT_KEYS'] holds the SECRET_KEY.",
                hint="Use keys of their own, so rotating one does not touch the other.",
                id="ahentic.E036",
            )
        )
    latest = AgentVersion.objects.filter(agent=OuterRef("pk")).order_by("-number")
    try:
        servers = list(McpServer.objects.order_by("slug"))
        needs_key = McpCredential.objects.filter(revoked_at__isnull=True).exists() or any(
            s.auth != McpServer.Auth.NONE for s in servers
        )
        hooks_need_key = WebhookEndpoint.objects.exists()
        configs = list(
            Agent.objects.filter(active=True)
            .annotate(config=Subquery(latest.values("config")[:1]))
            .values_list("slug", "config")
        )
    except (OperationalError, ProgrammingError):
        return messages  # no tables yet (before migrate)
    if (needs_key or hooks_need_key) and not ahentic_settings.VAULT_KEYS:
        holders = [
            *(["MCP servers take credentials"] if needs_key else []),
            *(["webhook endpoints have signing secrets"] if hooks_need_key else []),
        ]
        messages.append(
            Error(
                f"{' and '.join(holders).capitalize()} but AHENTIC['VAULT_KEYS'] is empty: "
                "they cannot be stored or read.",
                hint="Set AHENTIC['VAULT_KEYS'] = [<Fernet.generate_key()>] from the "
                "environment (never the SECRET_KEY).",
                id="ahentic.E034",
            )
        )
    known = {server.slug for server in servers}
    named = [("AHENTIC['MCP_SERVERS']", ahentic_settings.MCP_SERVERS or [])]
    named += [
        (f"Agent {slug!r}", (config or {}).get("MCP_SERVERS") or [])
        for slug, config in configs
        if isinstance(config, dict)
    ]
    for label, slugs in named:
        unknown = sorted(set(slugs) - known) if isinstance(slugs, list) else []
        if unknown:
            messages.append(
                Warning(
                    f"{label} names MCP servers that are not registered: {', '.join(unknown)}.",
                    hint="Register them in the admin (MCP servers) or remove the names.",
                    id="ahentic.W017",
                )
            )
    for server in servers:
        refused = url_problem(server.url) if server.active else None
        if refused:
            messages.append(
                Warning(
                    f"MCP server {server.slug!r}: {refused} Its tools are not offered.",
                    hint="Use the server's https:// URL.",
                    id="ahentic.W018",
                )
            )
    return messages


# Tools registered by this package; every other module's tools are the host's.
BUILTIN_TOOL_PACKAGE = "orchestrator_app"


@register()
def check_host_tools(app_configs=None, **kwargs):
    """W003: a host tool that changes data (not ``readonly``) has no ``permission`` function,
    so every user with the agent permission may call it (after approval, when it asks)."""
    from .tools import all_tools

    warnings = []
    for definition in all_tools():
        module = definition.module
        if module == BUILTIN_TOOL_PACKAGE or module.startswith(BUILTIN_TOOL_PACKAGE + "."):
            continue
        if definition.readonly or definition.permission is not None:
            continue
        warnings.append(
            Warning(
                f"The tool {definition.name!r} ({module or 'unknown module'}) changes data "
                "and has no permission function: every user with the agent permission may "
                "use it.",
                hint="Pass permission=lambda user: ... to @tool (for example "
                'user.has_perm("notes.add_note")), or readonly=True if it changes nothing.',
                obj=definition.name,
                id="ahentic.W003",
            )
        )
    return warnings


# Hosts that are this machine: a Messages API there is the local stand-in, not Anthropic's.
LOCAL_HOSTS = ("localhost", "localhost.localdomain", "0.0.0.0", "::")


def is_local_url(url: str) -> bool:
    """Whether ``url`` names this machine (localhost, a loopback or unspecified address)."""
    import ipaddress
    from urllib.parse import urlsplit

    try:
        host = (urlsplit(url if "//" in url else f"//{url}").hostname or "").lower()
    except ValueError:
        return False
    if not host:
        return False
    if host in LOCAL_HOSTS or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


@register(Tags.security, deploy=True)
def check_local_base_url(app_configs=None, **kwargs):
    """W004 (``check --deploy``): with ``DEBUG`` off, the model's base URL is this machine, so
    the agent answers from a local stand-in (``ahentic_localapi``), not from Claude."""
    base_url = str(ahentic_settings.BASE_URL or "")
    if settings.DEBUG or not base_url or not is_local_url(base_url):
        return []
    return [
        Warning(
            f"AHENTIC['BASE_URL'] (or ANTHROPIC_BASE_URL) is {base_url}, a local address, "
            "while DEBUG is False: the agent talks to a local stand-in, not to Claude.",
            hint="In production unset BASE_URL (and ANTHROPIC_BASE_URL) and set "
            "ANTHROPIC_API_KEY, or point BASE_URL at the real Messages API or a proxy to it.",
            id="ahentic.W004",
        )
    ]


# Seconds a webhook attempt may need past its timeout (resolving, TLS, writing the outcome).
_WEBHOOK_SLACK_S = 30


def _webhook_errors() -> list:
    wanted = {
        "WEBHOOK_TIMEOUT_S": (0.001, False, "a positive number of seconds"),
        "WEBHOOK_MAX_ATTEMPTS": (1, True, "an integer of at least 1"),
        "WEBHOOK_DISABLE_AFTER": (0, True, "an integer of at least 0 (0: never disable)"),
        "WEBHOOK_BACKOFF_S": (0, False, "a number of seconds of at least 0"),
        "WEBHOOK_LOG_DAYS": (0, True, "an integer of at least 0 (0: keep every delivery)"),
    }
    return [
        Error(f"AHENTIC[{key!r}] must be {words}.", id="ahentic.E032")
        for key, (minimum, integer, words) in wanted.items()
        if not _at_least(getattr(ahentic_settings, key), minimum, whole=integer)
    ]


@register()
def check_webhooks(app_configs=None, **kwargs):
    """E032: a webhook setting out of range. E033: an attempt could outlast the django-q2
    task timeout, which would kill the worker mid-request and retry it only after the claim
    runs out."""
    errors = _webhook_errors()
    if errors:
        return errors
    q_cluster = getattr(settings, "Q_CLUSTER", {}) or {}
    q_timeout = q_cluster.get("timeout")
    cluster = ahentic_settings.WEBHOOK_CLUSTER
    if cluster and cluster != q_cluster.get("name"):
        alt = (q_cluster.get("ALT_CLUSTERS") or {}).get(cluster)
        if isinstance(alt, dict):
            q_timeout = alt.get("timeout", q_timeout)
    needed = ahentic_settings.WEBHOOK_TIMEOUT_S + _WEBHOOK_SLACK_S
    if q_timeout is not None and q_timeout < needed:
        errors.append(
            Error(
                f"Q_CLUSTER['timeout'] ({q_timeout}s) is shorter than a webhook attempt may "
                f"take (WEBHOOK_TIMEOUT_S plus {_WEBHOOK_SLACK_S}s).",
                hint="Lower AHENTIC['WEBHOOK_TIMEOUT_S'] or raise Q_CLUSTER timeout/retry.",
                id="ahentic.E033",
            )
        )
    return errors


@register()
def check_webhook_cluster(app_configs=None, **kwargs):
    """E049: ``WEBHOOK_CLUSTER`` is not a string. W024: it names a cluster that Q_CLUSTER has
    no ``ALT_CLUSTERS`` entry for: ``Q_CLUSTER_NAME=<name> manage.py qcluster`` needs one to
    start, and without a running cluster of that name no delivery is ever attempted."""
    cluster = ahentic_settings.WEBHOOK_CLUSTER
    if not isinstance(cluster, str):
        return [
            Error(
                f"AHENTIC['WEBHOOK_CLUSTER'] must be a django-q2 cluster name, not {cluster!r}.",
                hint='"" runs deliveries on the site\'s own cluster.',
                id="ahentic.E049",
            )
        ]
    q_cluster = getattr(settings, "Q_CLUSTER", {}) or {}
    if not cluster or cluster == q_cluster.get("name"):
        return []
    alt = q_cluster.get("ALT_CLUSTERS")
    if isinstance(alt, dict) and isinstance(alt.get(cluster), dict):
        return []
    return [
        Warning(
            f"AHENTIC['WEBHOOK_CLUSTER'] is {cluster!r}, but Q_CLUSTER has no ALT_CLUSTERS "
            "entry of that name: that cluster cannot start, and deliveries wait for it.",
            hint=f'Add Q_CLUSTER["ALT_CLUSTERS"] = {{"{cluster}": {{"workers": 1}}}} and run '
            f"Q_CLUSTER_NAME={cluster} manage.py qcluster beside the site's cluster.",
            id="ahentic.W024",
        )
    ]


@register()
def check_notifications(app_configs=None, **kwargs):
    """E030: NOTIFY_APPROVAL_AFTER_S is not a whole number of seconds >= 0. E031: SITE_URL is
    not an absolute http(s) URL. W013: approval mails are on but their links can only be
    relative (no SITE_URL and no django.contrib.sites)."""
    from urllib.parse import urlsplit

    errors = []
    delay = ahentic_settings.NOTIFY_APPROVAL_AFTER_S
    if not _at_least(delay, 0):
        errors.append(
            Error(
                f"AHENTIC['NOTIFY_APPROVAL_AFTER_S'] must be a whole number of seconds >= 0, "
                f"not {delay!r}.",
                hint="300 mails after five minutes; 0 turns approval mails off.",
                id="ahentic.E030",
            )
        )
        delay = 0
    site_url = ahentic_settings.SITE_URL
    if site_url:
        parts = urlsplit(str(site_url)) if isinstance(site_url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
            errors.append(
                Error(
                    f"AHENTIC['SITE_URL'] must be an absolute http(s) URL, not {site_url!r}.",
                    hint='The address of a page that shows the sidebar, e.g. "https://example.com/".',
                    id="ahentic.E031",
                )
            )
    elif delay and not apps.is_installed("django.contrib.sites"):
        errors.append(
            Warning(
                "Approval mails are on but their links to the chat are relative: AHENTIC has "
                "no SITE_URL and django.contrib.sites is not installed.",
                hint='Set AHENTIC["SITE_URL"] to the address of a page that shows the sidebar.',
                id="ahentic.W013",
            )
        )
    return errors


@register(Tags.security, deploy=True)
def check_webhook_private_addresses(app_configs=None, **kwargs):
    """W015 (``check --deploy``): with ``DEBUG`` off, webhook URLs may reach the server's own
    network (loopback, private and link-local addresses: a metadata service, internal admin
    pages), which anyone who can edit an endpoint could point a request at."""
    if settings.DEBUG or not ahentic_settings.WEBHOOK_ALLOW_PRIVATE:
        return []
    return [
        Warning(
            "AHENTIC['WEBHOOK_ALLOW_PRIVATE'] is True while DEBUG is False: webhook URLs may "
            "reach private and loopback addresses.",
            hint="Turn it off in production unless the receivers live on the private network.",
            id="ahentic.W015",
        )
    ]


@register()
def check_outbound_networks(app_configs=None, **kwargs):
    """E043: ``OUTBOUND_ALLOWED_NETWORKS`` is not a list of networks (CIDR strings such as
    ``"10.1.2.0/24"``); an entry that does not parse would be skipped silently."""
    import ipaddress

    value = ahentic_settings.OUTBOUND_ALLOWED_NETWORKS
    if not isinstance(value, list | tuple):
        bad = [repr(value)]
    else:
        bad = []
        for entry in value:
            try:
                ipaddress.ip_network(str(entry), strict=False)
            except ValueError:
                bad.append(repr(entry))
    if not bad:
        return []
    return [
        Error(
            f"AHENTIC['OUTBOUND_ALLOWED_NETWORKS'] holds what is not a network: {', '.join(bad)}.",
            hint='Give a list of networks or addresses, e.g. ["10.1.2.0/24", "fd00:1::5"].',
            id="ahentic.E043",
        )
    ]


@register(Tags.security, deploy=True)
def check_outbound_private_addresses(app_configs=None, **kwargs):
    """W021 (``check --deploy``): with ``DEBUG`` off, ``OUTBOUND_ALLOW_PRIVATE`` lets every
    outbound request (webhooks, MCP servers, OAuth endpoints a server's metadata names) reach
    the server's own network."""
    if settings.DEBUG or not ahentic_settings.OUTBOUND_ALLOW_PRIVATE:
        return []
    return [
        Warning(
            "AHENTIC['OUTBOUND_ALLOW_PRIVATE'] is True while DEBUG is False: webhooks, MCP "
            "servers and the OAuth endpoints their metadata names may reach private, loopback "
            "and link-local addresses (a cloud metadata service included).",
            hint="Turn it off and list only the networks you need in "
            "AHENTIC['OUTBOUND_ALLOWED_NETWORKS'].",
            id="ahentic.W021",
        )
    ]


# Cache backends whose entries one process cannot see from another.
PROCESS_LOCAL_CACHES = (
    "django.core.cache.backends.locmem.LocMemCache",
    "django.core.cache.backends.dummy.DummyCache",
)


@register(deploy=True)
def check_notification_cache(app_configs=None, **kwargs):
    """W014 (``check --deploy``): approval mails are on and the default cache is per process,
    so the worker that decides to mail never sees the sidebar's polls (notifications.py)."""
    delay = ahentic_settings.NOTIFY_APPROVAL_AFTER_S
    backend = (getattr(settings, "CACHES", {}).get("default") or {}).get(
        "BACKEND", PROCESS_LOCAL_CACHES[0]
    )
    if not delay or backend not in PROCESS_LOCAL_CACHES:
        return []
    return [
        Warning(
            f"Approval mails are on, and the default cache ({backend.rsplit('.', 1)[-1]}) is "
            "not shared between processes: the worker never sees that the user watches the "
            "chat, so every approval waiting NOTIFY_APPROVAL_AFTER_S is mailed.",
            hint="Use a shared cache (Redis, Memcached, the database cache), or set "
            'AHENTIC["NOTIFY_APPROVAL_AFTER_S"] to 0.',
            id="ahentic.W014",
        )
    ]


@register()
def check_mcp_server(app_configs=None, **kwargs):
    """The MCP endpoint's settings (docs/howto/mcp-server.md): ``MCP_SERVER`` a bool
    (E038), ``MCP_CALL_WAIT_S`` a number of seconds >= 0 (E039); over 60 s a tools/call holds a
    web worker that long (W020); ``MCP_TOKENS_PER_USER`` a whole number >= 1 or None (E050);
    ``MCP_ELICITATION`` a bool (E046)."""
    errors = []
    if not isinstance(ahentic_settings.MCP_SERVER, bool):
        errors.append(
            Error(
                "AHENTIC['MCP_SERVER'] must be True or False.",
                hint="True serves the MCP endpoint (ahentic/v1/mcp); False answers 404 there.",
                id="ahentic.E038",
            )
        )
    if not isinstance(ahentic_settings.MCP_ELICITATION, bool):
        errors.append(
            Error(
                "AHENTIC['MCP_ELICITATION'] must be True or False.",
                hint=(
                    "True lets an MCP client that can ask its user take the approval of a call; "
                    "False keeps approvals in the site's agent panel."
                ),
                id="ahentic.E046",
            )
        )
    wait = ahentic_settings.MCP_CALL_WAIT_S
    if not _at_least(wait, 0, whole=False):
        errors.append(
            Error(
                "AHENTIC['MCP_CALL_WAIT_S'] must be a number of seconds, 0 or more.",
                hint="How long a tools/call waits for the tool's answer (default 20).",
                id="ahentic.E039",
            )
        )
    elif wait > 60:
        errors.append(
            Warning(
                f"AHENTIC['MCP_CALL_WAIT_S'] is {wait} s: each MCP tools/call may hold a web "
                "worker that long.",
                hint="Keep it at 60 or less; a client calls again to get a slower answer.",
                id="ahentic.W020",
            )
        )
    cap = ahentic_settings.MCP_TOKENS_PER_USER
    if cap is not None and not _at_least(cap, 1):
        errors.append(
            Error(
                f"AHENTIC['MCP_TOKENS_PER_USER'] must be a whole number of at least 1 or None, "
                f"not {cap!r}.",
                hint="20 lets each user hold twenty live tokens; None sets no cap.",
                id="ahentic.E050",
            )
        )
    return errors


@register()
def check_history(app_configs=None, **kwargs):
    """E042: HISTORY_UNDO_S is not a whole number of seconds >= 0."""
    window = ahentic_settings.HISTORY_UNDO_S
    if _at_least(window, 0):
        return []
    return [
        Error(
            f"AHENTIC['HISTORY_UNDO_S'] must be a whole number of seconds >= 0, not {window!r}.",
            hint="60 lets a deleted chat be restored for a minute; 0 deletes at once.",
            id="ahentic.E042",
        )
    ]


@register()
def check_otel_capture_content(app_configs=None, **kwargs):
    """E053: ``OTEL_CAPTURE_CONTENT`` is a bool (docs/howto/observability.md)."""
    if isinstance(ahentic_settings.OTEL_CAPTURE_CONTENT, bool):
        return []
    return [
        Error(
            "AHENTIC['OTEL_CAPTURE_CONTENT'] must be True or False.",
            hint="False records sizes and ids only; True adds prompts, replies and tool "
            "inputs and results to the spans (redacted).",
            id="ahentic.E053",
        )
    ]


@register(deploy=True)
def check_otel_capture_content_deploy(app_configs=None, **kwargs):
    """W026 (``check --deploy``): spans carry the users' conversations to the tracing backend
    while ``DEBUG`` is False."""
    if ahentic_settings.OTEL_CAPTURE_CONTENT is not True or settings.DEBUG:
        return []
    return [
        Warning(
            "AHENTIC['OTEL_CAPTURE_CONTENT'] is on: the users' prompts, the replies and tool "
            "inputs and results (redacted) go to your tracing backend.",
            hint="Turn it off unless that backend may hold the conversations.",
            id="ahentic.W026",
        )
    ]
