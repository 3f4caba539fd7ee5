"""Outbound webhooks' system checks."""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register

from sessions_app.conf import ahentic_settings

from ..checks import at_least


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
        if not at_least(getattr(ahentic_settings, key), minimum, whole=integer)
    ]


# Seconds a webhook attempt may need past its timeout (resolving, TLS, writing the outcome).
WEBHOOK_SLACK_S = 30


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
    needed = ahentic_settings.WEBHOOK_TIMEOUT_S + WEBHOOK_SLACK_S
    if q_timeout is not None and q_timeout < needed:
        errors.append(
            Error(
                f"Q_CLUSTER['timeout'] ({q_timeout}s) is shorter than a webhook attempt may "
                f"take (WEBHOOK_TIMEOUT_S plus {WEBHOOK_SLACK_S}s).",
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
