"""System checks validate the settings at startup with stable ids."""

import pytest
from django.core.checks import run_checks

# run_checks() runs what `manage.py check` runs; since Django 6.0 that includes the model
# checks that ask each database about its features (JSONField support), so it needs the
# test databases, all of them (tests/settings.py has a second one for the router test).
pytestmark = pytest.mark.django_db(databases="__all__")


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


def with_template_dirs(settings, *dirs):
    settings.TEMPLATES = [{**settings.TEMPLATES[0], "DIRS": list(dirs)}]


def admin_base_site(tmp_path, body):
    (tmp_path / "admin").mkdir()
    (tmp_path / "admin" / "base_site.html").write_text(body)
    return tmp_path


def test_the_admin_sidebar_with_the_shipped_admin_template_passes(settings):
    # The demo's templates/admin/base_site.html extends ahentic/admin_base_site.html.
    settings.AHENTIC = {**settings.AHENTIC, "ADMIN_SIDEBAR": True}
    assert "ahentic.W002" not in ids()


def test_the_admin_sidebar_on_djangos_own_admin_template_is_a_warning(settings):
    # Without the site's override, django.contrib.admin (listed before orchestrator_app)
    # supplies admin/base_site.html, which has no sidebar.
    settings.AHENTIC = {**settings.AHENTIC, "ADMIN_SIDEBAR": True}
    with_template_dirs(settings)
    assert "ahentic.W002" in ids()


def test_the_admin_sidebar_off_needs_no_admin_template(settings):
    settings.AHENTIC = {**settings.AHENTIC, "ADMIN_SIDEBAR": False}
    with_template_dirs(settings)
    assert "ahentic.W002" not in ids()


def test_a_site_admin_template_without_the_sidebar_is_a_warning(settings, tmp_path):
    settings.AHENTIC = {**settings.AHENTIC, "ADMIN_SIDEBAR": True}
    with_template_dirs(
        settings,
        admin_base_site(
            tmp_path, '{% extends "admin/base.html" %}{% block branding %}Acme{% endblock %}'
        ),
    )
    assert "ahentic.W002" in ids()


def test_a_site_admin_template_that_adds_the_sidebar_passes(settings, tmp_path):
    # The site keeps its own admin/base_site.html, extends Django's (same name, further down
    # the loaders) and renders the sidebar in the footer block.
    settings.AHENTIC = {**settings.AHENTIC, "ADMIN_SIDEBAR": True}
    with_template_dirs(
        settings,
        admin_base_site(
            tmp_path,
            '{% extends "admin/base_site.html" %}{% load ahentic %}'
            "{% block footer %}{{ block.super }}{% ahentic_sidebar admin=True %}{% endblock %}",
        ),
    )
    assert "ahentic.W002" not in ids()
