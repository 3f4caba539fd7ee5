"""The app in the user's language: the sidebar's JavaScript catalog, the German catalogue.

The browser side (no English left in the German sidebar) is in test_i18n_browser.py.
"""

import re
import subprocess
import sys

from django.utils import translation

from tests.support.admin import render_tag
from tests.support.api import API
from tests.support.paths import ROOT


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
    with translation.override("en"):
        html = render_tag(owner)

    scripts = re.findall(r"<script([^>]*)>", html)
    catalog = next(i for i, attrs in enumerate(scripts) if "/ahentic/v1/jsi18n?" in attrs)
    module = next(i for i, attrs in enumerate(scripts) if "sidebar/main.js" in attrs)
    assert catalog < module
    assert 'type="module"' not in scripts[catalog]
    assert "?l=en&amp;v=" in scripts[catalog]


def test_a_german_browser_gets_the_german_catalog(client):
    response = client.get(f"{API}/jsi18n", HTTP_ACCEPT_LANGUAGE="de-DE,de;q=0.9,en;q=0.5")

    body = response.content.decode()
    assert response["Content-Language"] == "de"
    assert '"Approval needed": "Freigabe erforderlich"' in body
    assert "Plural-Forms" not in body  # the header stays out; the plural rule comes as code
    assert "(n != 1)" in body


def test_an_english_browser_gets_the_english_catalog_from_the_same_url(client):
    client.get(f"{API}/jsi18n", HTTP_ACCEPT_LANGUAGE="de")  # cached for German

    response = client.get(f"{API}/jsi18n", HTTP_ACCEPT_LANGUAGE="en")

    assert "Freigabe" not in response.content.decode()


def test_the_sidebar_is_german_for_a_german_user(owner):
    with translation.override("de"):
        html = render_tag(owner)

    assert 'aria-label="KI-Agent"' in html
    assert "Nachricht senden" in html
    assert "l=de" in re.search(r'<script src="([^"]+)"', html).group(1)


def test_every_msgid_of_the_shipped_catalogues_is_translated_and_compiled():
    # The extraction half (a msgid of the code missing from the .po) needs GNU gettext: the
    # i18n leg of .ci/run runs the whole check.
    done = subprocess.run(
        [sys.executable, ".ci/translations.py", "--po-only"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert "catalogues complete and current" in done.stdout


def test_an_error_the_user_sees_comes_in_their_language_with_the_same_code(
    owner_client, session, llm
):
    url = f"{API}/sessions/{session.pk}/messages"

    german = owner_client.post(url, {"content": " "}, format="json", HTTP_ACCEPT_LANGUAGE="de")
    english = owner_client.post(url, {"content": " "}, format="json", HTTP_ACCEPT_LANGUAGE="en")

    assert german.status_code == english.status_code == 400
    assert german.json() == {"code": "ahentic_empty_message", "detail": "Die Nachricht ist leer."}
    assert english.json() == {"code": "ahentic_empty_message", "detail": "The message is empty."}
    assert german["Content-Language"] == "de"


def test_a_message_built_with_values_is_translated_whole(owner_client, session, llm, settings):
    settings.AHENTIC = {**settings.AHENTIC, "MAX_MESSAGE_CHARS": 5}

    response = owner_client.post(
        f"{API}/sessions/{session.pk}/messages",
        {"content": "123456"},
        format="json",
        HTTP_ACCEPT_LANGUAGE="de",
    )

    assert response.json()["detail"] == "Die Nachricht hat 6 Zeichen; die Grenze liegt bei 5."
