"""The MCP wing's system checks: the client's servers and credentials, the site's endpoint."""

from __future__ import annotations

from django.core.checks import Error, Tags, Warning, register

from sessions_app.conf import ahentic_settings

from ..checks import at_least


def mcp_server_problems(conf) -> list[str]:
    """An agent version's ``MCP_SERVERS`` naming servers that are not registered, as messages
    (registered with ``agents.add_config_check``: refused where a version is saved; W017 reports
    them for versions saved before a server was deleted)."""
    from ..models import McpServer

    named = conf.config.get("MCP_SERVERS") or []
    if not named:
        return []
    known = set(McpServer.objects.filter(slug__in=named).values_list("slug", flat=True))
    unknown = sorted(set(named) - known)
    if not unknown:
        return []
    return [f"MCP_SERVERS: no registered MCP server named {', '.join(unknown)}."]


@register(Tags.database)
def check_mcp(app_configs=None, databases=None, **kwargs):
    """The MCP client's rows (docs/howto/mcp-client.md; run with the database checks, reads
    nothing otherwise): E034 credentials exist, a server takes per-user or site credentials, or
    webhook endpoints exist, and ``VAULT_KEYS`` is empty; W017 ``MCP_SERVERS`` (the settings'
    or an agent's latest version) names no registered server; W018 an active server's URL the
    client refuses (https, or http to a local address with ``MCP_ALLOW_INSECURE_LOCAL``).
    Skipped before ``migrate``."""
    from django.db.models import OuterRef, Subquery
    from django.db.utils import OperationalError, ProgrammingError

    from sessions_app.models import Agent, AgentVersion

    from ..models import McpCredential, McpServer, WebhookEndpoint
    from .client import url_problem

    if not databases:
        return []
    messages = []
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
    if not at_least(wait, 0, whole=False):
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
    if cap is not None and not at_least(cap, 1):
        errors.append(
            Error(
                f"AHENTIC['MCP_TOKENS_PER_USER'] must be a whole number of at least 1 or None, "
                f"not {cap!r}.",
                hint="20 lets each user hold twenty live tokens; None sets no cap.",
                id="ahentic.E050",
            )
        )
    return errors
