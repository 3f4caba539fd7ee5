"""System checks with stable ids for the AHENTIC and Q_CLUSTER settings."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from django.conf import settings
from django.core.checks import Error, Warning, register

from sessions_app.conf import ahentic_settings

# Worst single SDK attempt plus its backoff sleeps (the SDK caps one sleep at 8 s).
_BACKOFF_SLACK_S = 8


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
    """``ADMIN_TOOLS`` is None, "all" or a list of installed models registered in the admin."""
    from django.contrib import admin

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
        if model is None or model not in admin.site._registry:
            errors.append(
                Error(
                    f'AHENTIC["ADMIN_TOOLS"] names {label!r}, which is not an installed model '
                    "registered with the admin site.",
                    hint='Use "app_label.model" of a model registered in admin.site.',
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
