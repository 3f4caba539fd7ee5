"""System checks validate the settings at startup with stable ids."""

import pytest
from django.core.checks import run_checks

# run_checks(databases=["default"]) runs what `manage.py check` runs; since Django 6.0 that includes the model
# checks that ask each database about its features (JSONField support), so it needs the
# test databases, all of them (tests/settings.py has a second one for the router test).
pytestmark = pytest.mark.django_db(databases="__all__")


def ids():
    return {
        message.id
        for message in run_checks(databases=["default"])
        if message.id.startswith("ahentic.")
    }


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


# --- email notifications -----------------------------------------------------------------------


@pytest.mark.parametrize("delay", [-1, "300", 2.5, None])
def test_a_bad_approval_mail_delay_is_e030(settings, delay):
    settings.AHENTIC = {**settings.AHENTIC, "NOTIFY_APPROVAL_AFTER_S": delay}
    assert "ahentic.E030" in ids()


@pytest.mark.parametrize("url", ["example.com", "/chat/", "ftp://example.com/", 42])
def test_a_site_url_that_is_not_absolute_http_is_e031(settings, url):
    settings.AHENTIC = {**settings.AHENTIC, "SITE_URL": url}
    assert "ahentic.E031" in ids()


def test_relative_mail_links_are_w013_unless_the_sites_framework_or_site_url_is_there(settings):
    settings.AHENTIC = {**settings.AHENTIC, "SITE_URL": ""}
    assert "ahentic.W013" not in ids()  # django.contrib.sites is installed here
    settings.INSTALLED_APPS = [a for a in settings.INSTALLED_APPS if a != "django.contrib.sites"]
    assert "ahentic.W013" in ids()
    settings.AHENTIC = {**settings.AHENTIC, "SITE_URL": "https://example.com/"}
    assert {"ahentic.W013", "ahentic.E031"}.isdisjoint(ids())


def test_a_per_process_cache_with_approval_mails_is_w014_on_deploy(settings):
    def deploy_ids():
        return {m.id for m in run_checks(include_deployment_checks=True, databases=["default"])}

    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    assert "ahentic.W014" in deploy_ids()
    assert "ahentic.W014" not in ids()  # a deployment concern only
    settings.AHENTIC = {**settings.AHENTIC, "NOTIFY_APPROVAL_AFTER_S": 0}
    assert "ahentic.W014" not in deploy_ids()
    settings.AHENTIC = {**settings.AHENTIC, "NOTIFY_APPROVAL_AFTER_S": 300}
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.db.DatabaseCache"}}
    assert "ahentic.W014" not in deploy_ids()


def test_otel_capture_content_must_be_a_bool_e053(settings):
    settings.AHENTIC = {**settings.AHENTIC, "OTEL_CAPTURE_CONTENT": "yes"}
    assert "ahentic.E053" in ids()
    settings.AHENTIC = {**settings.AHENTIC, "OTEL_CAPTURE_CONTENT": True}
    assert "ahentic.E053" not in ids()


def test_otel_content_capture_in_production_is_w026_on_deploy(settings):
    def deploy_ids():
        return {m.id for m in run_checks(include_deployment_checks=True, databases=["default"])}

    settings.AHENTIC = {**settings.AHENTIC, "OTEL_CAPTURE_CONTENT": True}
    settings.DEBUG = False
    assert "ahentic.W026" in deploy_ids()
    assert "ahentic.W026" not in ids()  # a deployment concern only
    settings.AHENTIC = {**settings.AHENTIC, "OTEL_CAPTURE_CONTENT": False}
    assert "ahentic.W026" not in deploy_ids()


def test_manage_py_check_reads_no_rows_and_the_database_checks_do():
    """``manage.py check`` (no database) reads none of the app's rows; the checks that read
    rows are tagged ``database`` and run for ``migrate``, ``check --database`` and the test
    runner."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from sessions_app.models import Agent

    Agent.objects.create(slug="empty", name="Empty", active=True)  # no version: E024
    with CaptureQueriesContext(connection) as plain:
        found = {m.id for m in run_checks() if m.id.startswith("ahentic.")}
    read = [q["sql"] for q in plain.captured_queries]
    assert [sql for sql in read if "sessions_app_" in sql or "orchestrator_app_" in sql] == []
    assert [sql for sql in read if "django_q_" in sql] == []
    assert "ahentic.E024" not in found
    assert "ahentic.E024" in {m.id for m in run_checks(databases=["default"])}
