"""The app in the user's language: the sidebar's JavaScript catalog, the German catalogue.

The browser side (no English left in the German sidebar) is in test_i18n_browser.py.
"""

import re

from .conftest import API
from .test_sidebar_tag import render_tag


def test_the_javascript_catalog_is_a_script_the_browser_may_cache(client):
    response = client.get(f"{API}/jsi18n")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/javascript")
    body = response.content.decode()
    assert "django.gettext = function" in body
    assert "django.ngettext = function" in body
    assert "max-age=86400" in response["Cache-Control"]
    assert response.has_header("Last-Modified")


def test_the_sidebar_loads_the_catalog_as_a_classic_script_before_its_modules(owner):
    html = render_tag(owner)

    scripts = re.findall(r"<script([^>]*)>", html)
    catalog = next(i for i, attrs in enumerate(scripts) if "/ahentic/v1/jsi18n?" in attrs)
    module = next(i for i, attrs in enumerate(scripts) if "sidebar/main.js" in attrs)
    assert catalog < module
    assert 'type="module"' not in scripts[catalog]
    assert "l=en-us" in scripts[catalog]
