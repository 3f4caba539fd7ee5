"""System checks with stable ids for the AHENTIC and Q_CLUSTER settings: the run engine's and
the app's own. Each feature wing keeps its checks in its package (``mcp/checks.py``,
``schedules/checks.py``, ``webhooks/checks.py``, ``notifications/checks.py``); ``apps.py``
loads them. A check that reads rows is tagged ``Tags.database`` (Django runs it for
``migrate``, ``check --database``, and the test runner) and reads nothing without a
database."""

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


def at_least(value, minimum, *, whole: bool = True) -> bool:
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
                    hint="Add orchestrator_app.admin.mixins.StaleChangeFormMixin first in its "
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
        if not at_least(value, 1):
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
    if not at_least(threshold, 0):
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
    """THINKING, THINKING_DISPLAY, EFFORT, WEB_SEARCH and WEB_FETCH (``loop.prompt``), per mode."""
    return _surface_errors(ahentic_settings, lambda key: f"AHENTIC['{key}']")


def surface_problems(conf) -> list[str]:
    """The model-surface problems of an agent version's settings, as messages (registered with
    ``agents.add_config_check``, so the admin refuses what the system checks would)."""
    return [error.msg for error in _surface_errors(conf, lambda key: key)]


def _surface_errors(conf, where) -> list:
    """The model-surface errors of ``conf`` (the site's settings or an agent version's,
    ``agents.AgentSettings``); ``where(key)`` names a setting in the messages."""
    from .loop import prompt

    errors = []
    limits = {
        "agent": int(conf.MAX_OUTPUT_TOKENS),
        "ask": int(conf.MAX_OUTPUT_TOKENS),
    }
    for mode in prompt.MODES:
        value = prompt.thinking_setting(mode, conf)
        budget_ok = (
            isinstance(value, int)
            and not isinstance(value, bool)
            and prompt.THINKING_MIN_BUDGET <= value < limits[mode]
        )
        if value not in ("off", "adaptive") and not budget_ok:
            errors.append(
                Error(
                    f'{where("THINKING")} for {mode} mode is {value!r}: give "off", '
                    f'"adaptive" or a budget of at least {prompt.THINKING_MIN_BUDGET} tokens '
                    f"below MAX_OUTPUT_TOKENS ({limits[mode]}).",
                    hint="The API refuses a budget_tokens below 1024 or not below max_tokens.",
                    id="ahentic.E020",
                )
            )
        display = prompt.per_mode(conf.THINKING_DISPLAY, mode)
        effort = prompt.effort(mode, conf)
        if display not in (None, *prompt.DISPLAYS) or effort not in (None, *prompt.EFFORTS):
            errors.append(
                Error(
                    f"{where('THINKING_DISPLAY')} / {where('EFFORT')} for {mode} mode: "
                    f"display must be one of {prompt.DISPLAYS}, effort one of "
                    f"{prompt.EFFORTS} (or None).",
                    id="ahentic.E021",
                )
            )
        for setting in ("WEB_SEARCH", "WEB_FETCH"):
            tool = prompt.per_mode(getattr(conf, setting), mode)
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
    cannot price (``conf.model_prices``), so the cap would never be reached. W011: a capped
    agent whose ``BRAIN_MODEL`` has no prices (its titles and memory calls are not counted)."""
    from sessions_app.conf import model_prices

    if not conf.SPEND_CAP_USD:
        return []
    if model_prices(conf.MODEL) is None:
        return [
            Error(
                f"{where('SPEND_CAP_USD')} is set but the model {conf.MODEL!r} has no prices "
                "in AHENTIC['PRICES']: its spend is not counted, so the cap is never reached.",
                hint="Add the model's prices to AHENTIC['PRICES'] or remove the cap.",
                id="ahentic.E028",
            )
        ]
    if model_prices(conf.BRAIN_MODEL) is None:
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


@register(Tags.database)
def check_agents(app_configs=None, databases=None, **kwargs):
    """The agents' rows (``sessions_app.agents``; run with the database checks: ``migrate``,
    ``check --database default``, the test runner; reads nothing otherwise): E023 a latest
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

    if not databases:
        return []
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


@register()
def check_history(app_configs=None, **kwargs):
    """E042: HISTORY_UNDO_S is not a whole number of seconds >= 0."""
    window = ahentic_settings.HISTORY_UNDO_S
    if at_least(window, 0):
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


@register()
def check_vault(app_configs=None, **kwargs):
    """The vault's keys (``vault.py``: MCP credentials, webhook secrets): E035 ``VAULT_KEYS``
    is not a list of Fernet keys; E036 a vault key is the ``SECRET_KEY``. E034 (secrets to
    keep and no key) reads rows: ``mcp/checks.py``."""
    from . import vault

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
    return messages
