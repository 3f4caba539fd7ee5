"""The sidebar template tag, its place in the admin, and the demo's home page.

``{% ahentic_sidebar %}`` renders only for users who may use the agent; in the admin it also
needs ``AHENTIC["ADMIN_SIDEBAR"]``. The browser behaviour is in test_sidebar_browser.py.
"""

import re

import pytest
from django.contrib.auth.models import AnonymousUser, Permission
from django.template import Context, Template

from tests.support.admin import render_tag
from tests.support.factories import UserFactory
from tests.support.paths import ROOT

SIDEBAR_MARK = 'id="ahentic-sidebar"'


@pytest.fixture
def admin_sidebar(settings):
    def set_to(value: bool):
        settings.AHENTIC = {**settings.AHENTIC, "ADMIN_SIDEBAR": value}

    return set_to


# --- the tag --------------------------------------------------------------------------------


def test_it_renders_the_sidebar_for_a_user_with_the_agent_permission(owner):
    html = render_tag(owner)

    assert SIDEBAR_MARK in html
    assert 'data-api="/ahentic/v1/"' in html
    assert 'data-poll-ms="650"' in html
    assert 'data-browser-timeout-s="45"' in html
    assert f'data-user="{owner.pk}"' in html
    assert 'data-admin="0"' in html
    assert "/static/ahentic/sidebar/main.js" in html
    assert "/static/ahentic/sidebar.css" in html


def test_it_passes_a_csrf_token_the_api_accepts(owner):
    html = render_tag(owner)

    token = html.split('data-csrf="', 1)[1].split('"', 1)[0]
    assert len(token) >= 32


def test_it_reads_the_browser_timeout_from_the_settings(owner, settings):
    settings.AHENTIC = {**settings.AHENTIC, "BROWSER_TIMEOUT_S": 30}

    assert 'data-browser-timeout-s="30"' in render_tag(owner)


def test_it_renders_nothing_for_an_anonymous_user(db):
    assert render_tag(AnonymousUser()).strip() == ""


def test_it_renders_nothing_for_a_user_without_the_permission(noperm):
    assert render_tag(noperm).strip() == ""


def test_it_renders_nothing_for_an_inactive_user_with_the_permission(owner):
    owner.is_active = False
    owner.save()

    assert render_tag(owner).strip() == ""


def test_it_renders_for_a_superuser(db):
    assert SIDEBAR_MARK in render_tag(UserFactory(is_superuser=True))


def test_it_follows_a_custom_permission_setting(owner, settings):
    settings.AHENTIC = {**settings.AHENTIC, "PERMISSION": "auth.view_user"}
    viewer = UserFactory()
    viewer.user_permissions.add(
        Permission.objects.get(codename="view_user", content_type__app_label="auth")
    )

    assert render_tag(owner).strip() == ""
    assert SIDEBAR_MARK in render_tag(UserFactory._meta.model.objects.get(pk=viewer.pk))


def test_it_renders_nothing_without_a_request_in_the_context(owner):
    html = Template("{% load ahentic %}{% ahentic_sidebar %}").render(Context({}))

    assert html.strip() == ""


def test_the_admin_variant_needs_the_admin_sidebar_setting(owner, admin_sidebar):
    source = "{% load ahentic %}{% ahentic_sidebar admin=True %}"

    admin_sidebar(False)
    assert render_tag(owner, source).strip() == ""

    admin_sidebar(True)
    html = render_tag(owner, source)
    assert SIDEBAR_MARK in html
    assert 'data-admin="1"' in html


# --- the admin ------------------------------------------------------------------------------


def test_the_admin_shows_the_sidebar_when_admin_sidebar_is_true(admin_client, admin_sidebar):
    admin_sidebar(True)

    html = admin_client.get("/admin/").content.decode()

    assert SIDEBAR_MARK in html
    assert "Django administration" in html  # the branding is kept


def test_the_admin_has_no_sidebar_when_admin_sidebar_is_false(admin_client, admin_sidebar):
    admin_sidebar(False)

    html = admin_client.get("/admin/").content.decode()

    assert SIDEBAR_MARK not in html
    assert "Django administration" in html


def test_the_admin_login_page_has_no_sidebar(client, db, admin_sidebar):
    admin_sidebar(True)

    html = client.get("/admin/login/").content.decode()

    assert SIDEBAR_MARK not in html


def test_admin_popups_have_no_sidebar(admin_client, admin_sidebar):
    admin_sidebar(True)

    html = admin_client.get("/admin/auth/user/add/?_popup=1").content.decode()

    assert SIDEBAR_MARK not in html


# --- the demo's home page -------------------------------------------------------------------


def test_the_home_page_requires_a_login(client, db):
    response = client.get("/")

    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=/"


def test_the_home_page_shows_the_sidebar_and_a_form_to_fill(owner_client):
    response = owner_client.get("/")

    assert response.status_code == 200
    html = response.content.decode()
    assert SIDEBAR_MARK in html
    assert 'name="newsletter_email"' in html


def test_the_home_page_has_no_sidebar_for_a_user_without_the_permission(noperm_client):
    response = noperm_client.get("/")

    assert response.status_code == 200
    assert SIDEBAR_MARK not in response.content.decode()


def test_a_host_listing_the_app_before_the_admin_gets_the_sidebar_without_own_templates(
    admin_client, admin_sidebar, settings
):
    """The app's own admin/base_site.html, for a host site without a project templates dir."""
    admin_sidebar(True)
    apps = [app for app in settings.INSTALLED_APPS if app != "orchestrator_app"]
    settings.INSTALLED_APPS = ["orchestrator_app", *apps]
    settings.TEMPLATES = [{**settings.TEMPLATES[0], "DIRS": []}]

    html = admin_client.get("/admin/").content.decode()

    assert SIDEBAR_MARK in html
    assert "Django administration" in html


def test_the_sidebar_stylesheet_closes_every_rule():
    """An unclosed rule nests everything after it (CSS nesting) and silently turns it off."""
    css = ROOT / "orchestrator_app/static/ahentic/sidebar.css"
    depth = 0
    for number, line in enumerate(
        re.sub(r"/\*.*?\*/", "", css.read_text(), flags=re.S).splitlines(), 1
    ):
        depth += line.count("{") - line.count("}")
        assert depth >= 0, f"sidebar.css:{number}: a '}}' closes nothing"
        if re.match(r"^[.#a-z@:]", line) and line.rstrip().endswith("{"):
            assert depth == 1, f"sidebar.css:{number}: a rule opens inside an unclosed one"
    assert depth == 0, "sidebar.css ends inside an unclosed rule"
