"""The sidebar's translations: Django's JavaScript catalog of this app's ``djangojs`` domain.

``ahentic/sidebar.html`` loads it as a classic script before the ES modules (``sidebar/i18n.js``
reads ``window.django``). The catalog changes only with a deploy, so it is cached: on the
server per language (``cache_page`` keys on the active language and the full URL), in the
browser for a day. The URL carries the language and a stamp of the compiled catalogs, so a
language switch or a deploy with new translations fetches a fresh copy.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlencode

from django.urls import reverse
from django.utils.translation import get_language
from django.views.decorators.cache import cache_page
from django.views.decorators.http import last_modified
from django.views.i18n import JavaScriptCatalog

LOCALE_DIR = Path(__file__).resolve().parent / "locale"
CACHE_SECONDS = 24 * 60 * 60


def _compiled_at() -> datetime:
    """When the newest compiled sidebar catalog was written (without any: now, the start)."""
    stamps = [path.stat().st_mtime for path in LOCALE_DIR.glob("*/LC_MESSAGES/djangojs.mo")]
    return datetime.fromtimestamp(int(max(stamps, default=time.time())), tz=UTC)


COMPILED_AT = _compiled_at()

javascript_catalog = cache_page(
    CACHE_SECONDS, key_prefix=f"ahentic-jsi18n-{int(COMPILED_AT.timestamp())}"
)(
    last_modified(lambda request, **kwargs: COMPILED_AT)(
        JavaScriptCatalog.as_view(packages=["orchestrator_app"])
    )
)


def catalog_url() -> str:
    """The catalog's URL for the active language."""
    query = urlencode({"l": get_language() or "", "v": int(COMPILED_AT.timestamp())})
    return f"{reverse('ahentic:jsi18n')}?{query}"
