"""What the sidebar's Basic view says instead of internals: sentences built from the facts an
event stores (the verbose and debug views show the stored text itself).

An artifact note stores its ``action`` and the artifact's key, title and size
(``artifacts_app.store``); ``artifact_sentence`` says it as people would: "Drafted “Coffee”
(210 bytes)". Notes written before they stored facts keep their text.
"""

from __future__ import annotations

from typing import Any

from django.template.defaultfilters import filesizeformat
from django.utils.translation import gettext, gettext_lazy, ngettext


def size_words(meta: dict[str, Any]) -> str:
    """An artifact's size in human form: blocks counted, bytes as KB or MB."""
    if meta.get("kind") == "blocks" and meta.get("blockCount"):
        count = int(meta["blockCount"])
        return ngettext("%(count)d block", "%(count)d blocks", count) % {"count": count}
    return str(filesizeformat(int(meta.get("bytes") or 0)))


def artifact_sentence(meta: dict[str, Any]) -> str | None:
    """The sentence for an artifact note, or None when the note stored no facts."""
    action = meta.get("action")
    if not action:
        return None
    title = str(meta.get("title") or meta.get("key") or gettext("untitled"))
    named = {"title": title}
    if action == "staged":
        return gettext("Drafted “%(title)s” (%(size)s)") % {**named, "size": size_words(meta)}
    if action == "drafting":
        return gettext("Drafting “%(title)s” (%(size)s so far)") % {
            **named,
            "size": size_words(meta),
        }
    if action == "appended":
        return gettext("Added to “%(title)s” (%(size)s now)") % {**named, "size": size_words(meta)}
    if action == "applied":
        return gettext("Used the draft “%(title)s”") % named
    if action == "deleted":
        return gettext("Deleted the draft “%(title)s”") % named
    if action == "marked" and meta.get("status") == "stale":
        return gettext("The draft “%(title)s” is out of date") % named
    if action == "marked":
        return gettext("The draft “%(title)s” is marked %(status)s") % {
            **named,
            "status": STATUS_WORDS.get(str(meta.get("status")), gettext("changed")),
        }
    return None


STATUS_WORDS = {
    "drafting": gettext_lazy("in progress"),
    "ready": gettext_lazy("ready"),
    "applied": gettext_lazy("used"),
    "empty": gettext_lazy("empty"),
}
