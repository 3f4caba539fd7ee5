"""System checks validate the settings at startup with stable ids."""

import pytest
from django.core.checks import run_checks


def ids():
    return {message.id for message in run_checks() if message.id.startswith("ahentic.")}


def test_the_test_settings_pass_every_check():
    assert ids() == set()


def test_a_retry_not_above_the_timeout_fails(settings):
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "timeout": 900, "retry": 900}
    assert "ahentic.E001" in ids()


def test_a_timeout_shorter_than_the_worst_model_call_fails(settings):
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "timeout": 100, "retry": 200}
    assert "ahentic.E002" in ids()


@pytest.mark.parametrize(
    "prices",
    [
        {"claude-x": {"input": 3, "output": 15}},
        {"claude-x": {"input": "cheap", "output": 1, "cache_read": 1, "cache_write": 1}},
        ["not", "a", "dict"],
    ],
)
def test_a_malformed_price_table_fails(settings, prices):
    settings.AHENTIC = {**settings.AHENTIC, "PRICES": prices}
    assert "ahentic.E004" in ids()


def test_a_complete_price_table_passes(settings):
    settings.AHENTIC = {
        **settings.AHENTIC,
        "PRICES": {"claude-x": {"input": 3, "output": 15, "cache_read": 0.3, "cache_write": 3.75}},
    }
    assert "ahentic.E004" not in ids()


def test_no_key_and_no_base_url_is_a_warning(settings):
    settings.AHENTIC = {**settings.AHENTIC, "API_KEY": "", "BASE_URL": ""}
    assert "ahentic.W001" in ids()
