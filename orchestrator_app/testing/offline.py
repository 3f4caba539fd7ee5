"""The offline demo model: a scripted tour served by the local Messages API server.

``make demo`` without ``ANTHROPIC_API_KEY`` (and ``manage.py ahentic_localapi --offline`` on a
host site) answers every message with this responder, so the whole loop (plan card, a tool
call, the final reply) can be seen without network access.
"""

from __future__ import annotations

import json
import re
from typing import Any

from django.utils.text import slugify

from sessions_app import media

from ..control.toolcalls import failure_text
from ..loop.prompt import CONTEXT_HEADER, OTHER_AGENTS_HEADING
from ..tools import label_for
from .localapi import (
    LocalResponse,
    cited_text,
    reply,
    text_reply,
    tool_call,
    tool_reply,
    web_search_blocks,
    with_thinking,
)

TOUR_PLAN = [
    {"id": "read", "content": "Read your message", "status": "completed"},
    {"id": "plan", "content": "Show how a plan card looks", "status": "in_progress"},
    {"id": "reply", "content": "Answer in the chat", "status": "pending"},
]


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message["role"] != "user":
            continue
        content = message["content"]
        if isinstance(content, str):
            return content
        texts = [
            b.get("text", "")
            for b in content
            if b.get("type") == "text" and not b.get("text", "").startswith(CONTEXT_HEADER)
        ]
        if texts:
            return texts[-1]
    return ""


def _last_user_images(messages: list[dict[str, Any]]) -> list[tuple[str, tuple[int, int] | None]]:
    """The images of the newest user message (also inside its tool results): each one's
    media type and its size read from the header bytes of the request's base64 data."""
    for message in reversed(messages):
        if message["role"] != "user":
            continue
        content = message["content"] if isinstance(message["content"], list) else []
        blocks = [*content]
        for block in content:
            if block.get("type") == "tool_result" and isinstance(block.get("content"), list):
                blocks.extend(block["content"])
        found = []
        for block in blocks:
            source = block.get("source") or {} if isinstance(block, dict) else {}
            if block.get("type") == "image" and source.get("type") == "base64":
                data = media.decoded(source) or b""
                found.append((str(source.get("media_type")), media.image_size(data)))
        return found
    return []


def image_reply(messages: list[dict[str, Any]]) -> LocalResponse | None:
    """An attached image: what the offline model can see of it, its type and size."""
    images = _last_user_images(messages)
    if not images:
        return None
    seen = [
        f"a {kind.removeprefix('image/').upper()} image of {size[0]}x{size[1]} pixels"
        if size
        else f"a {kind} image"
        for kind, size in images
    ]
    return text_reply(
        f"(Offline demo model) I see {', '.join(seen)}. With ANTHROPIC_API_KEY set for the web "
        "and worker processes, Claude reads what is in it."
    )


def brain_reply(body: dict[str, Any]) -> LocalResponse:
    """Naming and memory requests (no tools): a title from the first user line, or a summary."""
    system = " ".join(b.get("text", "") for b in body.get("system") or [])
    text = _last_user_text(body.get("messages") or [])
    if "Name this conversation" in system:
        first = next((line for line in text.splitlines() if line.startswith("user:")), text)
        words = first.removeprefix("user:").split()[:6]
        return text_reply(_first_upper(" ".join(words)) or "Demo chat")
    return text_reply("- (Offline memory) " + " ".join(text.split())[:300])


def _first_upper(text: str) -> str:
    """``text`` with a capital first letter; the rest keeps the case the user wrote ("Django",
    "AWS"), which ``str.capitalize`` would lower."""
    return text[:1].upper() + text[1:]


def _tool_results(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [b for b in content if b.get("type") == "tool_result"]


def _page_title(result: dict[str, Any]) -> str:
    raw = result.get("content")
    if isinstance(raw, list):
        raw = " ".join(b.get("text", "") for b in raw if isinstance(b, dict))
    try:
        return str(json.loads(raw).get("title") or "")
    except (TypeError, ValueError, AttributeError):
        return ""


def _parsed(block: dict[str, Any]) -> dict[str, Any]:
    """A tool_result block's JSON object (empty when it is not one)."""
    raw = block.get("content")
    if isinstance(raw, list):
        raw = " ".join(b.get("text", "") for b in raw if isinstance(b, dict))
    try:
        result = json.loads(raw)
    except (TypeError, ValueError):
        result = {}
    return result if isinstance(result, dict) else {}


def _newest_results(messages: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict]]:
    """The calls the newest user turn answers: each (tool_use block, parsed result), with
    ``is_error`` copied into the result as ``_is_error``."""
    if len(messages) < 2 or not isinstance(messages[-2].get("content"), list):
        return []
    uses = {b.get("id"): b for b in messages[-2]["content"] if b.get("type") == "tool_use"}
    found = []
    for block in _tool_results(messages[-1].get("content") or []):
        use = uses.get(block.get("tool_use_id")) or {}
        found.append((use, {**_parsed(block), "_is_error": bool(block.get("is_error"))}))
    return found


def _answered(messages: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Tool name -> parsed result, for the calls the newest user turn answers successfully
    (a failed call is ``failure_reply``'s to report, never read as done)."""
    return {
        str(use.get("name") or ""): result
        for use, result in _newest_results(messages)
        if not result["_is_error"]
    }


def _history(messages: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Every answered call the request holds, oldest first: (tool_use block, parsed result)."""
    uses: dict[str, dict[str, Any]] = {}
    found = []
    for message in messages:
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if block.get("type") == "tool_use":
                uses[block.get("id")] = block
            elif block.get("type") == "tool_result" and block.get("tool_use_id") in uses:
                parsed = {**_parsed(block), "_is_error": bool(block.get("is_error"))}
                found.append((uses[block["tool_use_id"]], parsed))
    return found


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


def failure_reply(messages: list[dict[str, Any]]) -> LocalResponse | None:
    """The newest tool results, read: after a denial, that the change was not made (and the
    user's reason); after an error, what failed and why. None when no call failed, or when
    the user sent a new message instead of deciding (that message is answered instead)."""
    newest = _newest_results(messages)
    failed = [(use, result) for use, result in newest if result["_is_error"]]
    if not failed:
        return None
    remembered = memory_failure(messages)
    if remembered is not None:
        return remembered
    denied = [(use, r) for use, r in failed if r.get("error") == "user_denied"]
    if denied:
        use, result = denied[0]
        reason = str(result.get("reason") or "")
        if reason == "user_redirect":
            return None
        text = (
            "(Offline demo model) I did not make the change: you denied "
            f"“{_lower_first(label_for(str(use.get('name') or '')))}”"
        )
        if reason and reason != "user_denied":
            text += f" and said: “{reason}”"
        return text_reply(text + ". Tell me what to do differently, or ask for something else.")
    failed = [(use, r) for use, r in failed if r.get("error") != "skipped"] or failed
    use, result = failed[-1]
    what = _lower_first(label_for(str(use.get("name") or "")))
    why = failure_text(result) or str(result.get("error") or "it gave no reason").strip()
    return text_reply(
        f"(Offline demo model) I tried to {what}, but it failed: {why.rstrip('.')}. "
        "Nothing was changed by that step."
    )


PAGES = "flatpages.flatpage"
WRITE_PAGE = re.compile(r"\bwrite (?:a|an|the) page (?:about|on) (?P<topic>.+)", re.IGNORECASE)
LIST_PAGES = re.compile(r"\blist (?:the |all )?(?:flat ?)?pages\b", re.IGNORECASE)


def _draft(topic: str) -> str:
    return (
        f"<p>This page is about {topic}. The offline demo model drafted it as an artifact, "
        "and the admin saved it after you allowed it.</p>\n"
        f"<p>Edit it in the admin, or ask for another page about {topic}.</p>"
    )


def admin_tour(said: str, messages: list[dict[str, Any]]) -> LocalResponse | None:
    """ "write a page about X": stage the body, read the form (admin_models), then admin_save with
    from_memory (an approval card); "list the pages": admin_list. None for other messages."""
    answered = _answered(messages)
    if "admin_save" in answered:
        saved = answered["admin_save"]
        return text_reply(
            f"(Offline demo model) Done: the page “{saved.get('repr', '')}” is live at "
            f"{saved.get('url', '')}. The admin's history records the change."
        )
    if "admin_models" in answered and "stage_artifact" in answered:
        fields = {f.get("name"): f for f in answered["admin_models"].get("fields") or []}
        sites = [c[0] for c in (fields.get("sites") or {}).get("choices") or []][:1]
        key = answered["stage_artifact"].get("key", "")
        topic = WRITE_PAGE.search(said)
        title = _first_upper((topic.group("topic") if topic else key).strip(" .!?"))
        values = {"url": f"/{key}/", "title": title[:200]}
        if sites:
            values["sites"] = sites
        return tool_reply(
            tool_call(
                "admin_save",
                {"model": PAGES, "values": values, "body_field": "content", "from_memory": key},
            ),
            text="(Offline demo model) The draft is ready; saving it needs your approval.",
        )
    if answered:
        return None
    if LIST_PAGES.search(said):
        return tool_reply(
            tool_call("admin_list", {"model": PAGES}),
            text="(Offline demo model) Let me look at the flat pages.",
        )
    match = WRITE_PAGE.search(said)
    if match:
        topic = match.group("topic").strip(" .!?")
        key = slugify(topic)[:40] or "page"
        return tool_reply(
            tool_call(
                "stage_artifact",
                {
                    "key": key,
                    "kind": "html",
                    "title": topic[:100],
                    "payload": {"content": _draft(topic)},
                },
            ),
            tool_call("admin_models", {"model": PAGES}),
            text=f"(Offline demo model) Drafting a page about {topic} first.",
        )
    return None


def _listed(result: dict[str, Any]) -> str:
    rows = result.get("rows") or []
    if not rows:
        return "(Offline demo model) There are no flat pages yet. Try “write a page about coffee”."
    lines = [f"- {r.get('title', r.get('repr'))} ({r.get('url', '')})" for r in rows]
    return f"(Offline demo model) {result.get('count', len(rows))} flat page(s):\n" + "\n".join(
        lines
    )


REMEMBER = re.compile(r"^remember(?: that)? (.+)$", re.IGNORECASE)
RECALL = re.compile(r"\bwhat do you (?:remember|know about me)\b|\bwhat do i like\b", re.I)
PREFERENCES = "/memories/preferences.md"


def memory_tour(
    said: str, messages: list[dict[str, Any]], tool_names: set, results: list[dict[str, Any]]
) -> LocalResponse | None:
    """With an agent that keeps memory: "remember that X" writes X to the user's memory (a
    line added on top when the file exists); "what do you remember" (in any chat, a new one
    too) reads it back and answers in a sentence. None otherwise."""
    if "memory" not in tool_names:
        return None
    answered = _answered(messages)
    if "memory" in answered:
        if REMEMBER.match(said):
            return text_reply("(Offline demo model) Noted: I will remember that in new chats too.")
        return text_reply(f"(Offline demo model) {recalled(_result_text(results[-1]))}")
    if results:
        return None
    wish = REMEMBER.match(said)
    if wish:
        note = f"- {wish.group(1).rstrip('.')}\n"
        return tool_reply(
            tool_call("memory", {"command": "create", "path": PREFERENCES, "file_text": note}),
            text="(Offline demo model) I will write that down.",
        )
    if RECALL.search(said):
        return tool_reply(
            tool_call("memory", {"command": "view", "path": PREFERENCES}),
            text="(Offline demo model) Let me look at my notes.",
        )
    return None


def memory_failure(messages: list[dict[str, Any]]) -> LocalResponse | None:
    """A memory call that failed on the tour's own path: the notes file exists already (the
    new note goes on top of it), or there is none yet (nothing to recall)."""
    newest = _newest_results(messages)
    failed = [(u, r) for u, r in newest if r["_is_error"] and u.get("name") == "memory"]
    if not failed:
        return None
    use, result = failed[-1]
    given = use.get("input") or {}
    if result.get("error") == "memory_exists" and given.get("command") == "create":
        return tool_reply(
            tool_call(
                "memory",
                {
                    "command": "insert",
                    "path": PREFERENCES,
                    "insert_line": 0,
                    "insert_text": str(given.get("file_text") or ""),
                },
            ),
            text="(Offline demo model) Adding it to my notes.",
        )
    if result.get("error") == "memory_not_found" and given.get("command") == "view":
        return text_reply(
            "(Offline demo model) I do not remember anything about you yet. Tell me something "
            "to keep, for example “Remember that I like oat milk”."
        )
    return None


NUMBERED_LINE = re.compile(r"^\s*\d+\t")
FIRST_PERSON = (
    (re.compile(r"\bI am\b|\bI'm\b"), "you are"),
    (re.compile(r"\bI\b"), "you"),
    (re.compile(r"\bmy\b", re.I), "your"),
    (re.compile(r"\bme\b", re.I), "you"),
    (re.compile(r"\bmine\b", re.I), "yours"),
)


def _second_person(note: str) -> str:
    for pattern, replacement in FIRST_PERSON:
        note = pattern.sub(replacement, note)
    return note


def recalled(viewed: str) -> str:
    """The memory tool's view of the notes file, said back in a sentence: "You told me you
    like oat milk." (never the tool's line numbers)."""
    notes = []
    for line in viewed.splitlines()[1:]:
        note = NUMBERED_LINE.sub("", line).strip().lstrip("-*").strip().rstrip(".")
        if note:
            notes.append(_second_person(note))
    if not notes:
        return "I do not remember anything about you yet."
    said = notes[0] if len(notes) == 1 else ", ".join(notes[:-1]) + " and " + notes[-1]
    return f"You told me {said}."


def _result_text(result: dict[str, Any]) -> str:
    raw = result.get("content")
    if isinstance(raw, list):
        raw = " ".join(b.get("text", "") for b in raw if isinstance(b, dict))
    try:
        parsed = json.loads(raw)
    except (TypeError, ValueError):
        return str(raw or "")
    return (
        str(parsed.get("value") or parsed.get("message") or parsed)
        if isinstance(parsed, dict)
        else str(parsed)
    )


# The demo's "Site digest" schedule (ahentic_demo) asks for one every few minutes.
DIGEST = re.compile(r"\bdigest\b", re.IGNORECASE)
DIGEST_REPLY = (
    "(Offline demo model) Site digest: nothing needs your attention. A real model would sum up "
    "what changed since the last digest; this one comes from the demo's schedule (admin: "
    "Schedules)."
)


def demo_responder(body: dict[str, Any]) -> LocalResponse:
    """The tour: "write a page about X" drafts a flat page and saves it through the admin after
    approval; "list the pages" lists them; a "digest" gets a short one (the demo's schedule); a message mentioning "page" reads the open page in
    the browser (page_read); any other message gets a plan card, then an echo. Brain requests
    (no tools) are named or summarized."""
    if not body.get("tools"):
        return brain_reply(body)
    messages = body.get("messages") or []
    failed = failure_reply(messages)  # also first in ``demo_model``, for direct use
    if failed is not None:
        return failed
    last = messages[-1] if messages else {"content": []}
    content = last.get("content") if isinstance(last.get("content"), list) else []
    results = _tool_results(content)
    tool_names = {t.get("name") for t in body.get("tools") or []}
    said = _last_user_text(messages).strip()[:200]
    if "admin_save" in tool_names and not (results and results[-1].get("is_error")):
        answered = _answered(messages)
        if "admin_list" in answered:
            return text_reply(_listed(answered["admin_list"]))
        scripted = admin_tour(said, messages)
        if scripted is not None:
            return scripted
    if not results and DIGEST.search(said):
        return text_reply(DIGEST_REPLY)
    remembered = memory_tour(said, messages, tool_names, results)
    if remembered is not None:
        return remembered
    if not results and "page" in said.lower() and "page_read" in tool_names:
        return tool_reply(
            tool_call("page_read", {}), text="(Offline demo model) Let me read your page."
        )
    seen = image_reply(messages)
    if seen is not None:
        return seen
    title = _page_title(results[-1]) if results else ""
    if title:
        return text_reply(f"(Offline demo model) Your page is titled “{title}”.")
    if not results and "update_plan" in tool_names:
        return tool_reply(
            tool_call("update_plan", {"title": "Offline demo", "steps": TOUR_PLAN}),
            text="(Offline demo model) Let me show you a plan first.",
        )
    return text_reply(
        f"(Offline demo model) You said: “{said}”. This reply comes from the local Messages "
        "API server bundled with django-ahentic, not from a model. To talk to Claude, set "
        "ANTHROPIC_API_KEY (and no local base URL) for the web and worker processes and "
        "restart them."
    )


# --- the model's wider surface: thinking, a cited web search, Markdown, an update diff -----------

# Streamed text arrives about as fast as a person reads along (a 24-character delta each 40 ms).
HUMAN_PACE_S = 0.04
SEARCH = re.compile(r"\b(?:search|look up|cite|source)\b", re.IGNORECASE)
TABLE = re.compile(r"\b(?:table|code|markdown)\b", re.IGNORECASE)
UPDATE_PAGE = re.compile(
    r"\b(?:update|retitle|rename) (?:the |a )?(?:first )?(?:flat ?)?page\b", re.I
)
DEMO_SOURCE = {
    "url": "https://docs.djangoproject.com/en/stable/ref/contrib/flatpages/",
    "title": "The flatpages app | Django documentation",
}

MARKDOWN_REPLY = """(Offline demo model) Replies render Markdown. A table:

| Setting | Default | What it does |
| --- | --- | --- |
| `THINKING` | `"off"` | Lets the model think before it acts |
| `WEB_SEARCH` | `None` | Lets the model search the web |

And a code block:

```python
AHENTIC = {"THINKING": "adaptive", "WEB_SEARCH": {"max_uses": 3}}
```
"""


def _thinking_on(body: dict[str, Any]) -> bool:
    return (body.get("thinking") or {}).get("type") in ("enabled", "adaptive")


def _search_reply(said: str) -> LocalResponse:
    found = web_search_blocks(said[:80] or "django flatpages", [DEMO_SOURCE])
    return reply(
        [
            {"type": "text", "text": "(Offline demo model) I searched the web. "},
            *found,
            {"type": "text", "text": "Django's flat pages are "},
            cited_text(
                "simple HTML pages stored in the database and edited in the admin",
                DEMO_SOURCE["url"],
                DEMO_SOURCE["title"],
                "A flatpage is a simple object with a URL, title and content.",
            ),
            {"type": "text", "text": "."},
        ]
    )


def _created_page(messages: list[dict[str, Any]]) -> tuple[Any, str] | None:
    """The flat page this chat created last (its id) and its title now, read from the
    admin_save calls and results the request holds (a later save in this chat that retitled
    it included); None when it created none."""
    history = _history(messages)
    saves = [
        (use.get("input") or {}, result)
        for use, result in history
        if use.get("name") == "admin_save"
        and (use.get("input") or {}).get("model") == PAGES
        and not result["_is_error"]
    ]
    created = [
        (given, result)
        for given, result in saves
        if result.get("created") and result.get("id") is not None
    ]
    if not created:
        return None
    given, result = created[-1]
    page_id, title = result["id"], str((given.get("values") or {}).get("title") or "Page")
    for later, outcome in saves:
        if later.get("id") == page_id and outcome.get("changed") is not False:
            title = str((later.get("values") or {}).get("title") or title)
    return page_id, title


UPDATED = re.compile(r"^(?P<base>.*?) \(updated(?: (?P<n>\d+))?\)$")


def _next_title(title: str) -> str:
    """A title that differs from ``title``, so every "update the page" changes something:
    "Coffee" -> "Coffee (updated)" -> "Coffee (updated 2)" -> "Coffee (updated 3)"."""
    found = UPDATED.match(title)
    if found is None:
        return f"{title} (updated)"
    return f"{found.group('base')} (updated {int(found.group('n') or 1) + 1})"


def _saved(result: dict[str, Any]) -> str:
    """The reply after an update: what changed, or that nothing did (the pipeline answers a
    save of the current values without asking)."""
    if result.get("changed") is False:
        return (
            "(Offline demo model) Nothing changed: the page already had those values, so "
            "there was nothing to save or approve."
        )
    fields = ", ".join(result.get("changed") or []) or "the page"
    return (
        f"(Offline demo model) Updated “{result.get('repr', '')}” ({fields}); the admin's "
        "history has the change."
    )


def surface_tour(body: dict[str, Any]) -> LocalResponse | None:
    """ "search ..." cites a web page (when web search is on); "table" answers with a Markdown
    table and a code block; "update the page" retitles the first flat page through an approval
    card that shows the change (before -> after). None for other messages."""
    messages = body.get("messages") or []
    if not body.get("tools") or not messages:
        return None
    tools = {t.get("name") for t in body["tools"]}
    said = _last_user_text(messages).strip()[:200]
    answered = _answered(messages)
    if UPDATE_PAGE.search(said) and "admin_save" in tools:
        if "admin_save" in answered:
            return text_reply(_saved(answered["admin_save"]))
        created = _created_page(messages)
        if created is not None and not answered:
            page_id, title = created
            new = _next_title(title)
            return tool_reply(
                tool_call("admin_save", {"model": PAGES, "id": page_id, "values": {"title": new}}),
                text="(Offline demo model) Updating the page this chat created; the approval "
                "card shows the change before it is saved.",
            )
        if "admin_list" in answered:
            rows = answered["admin_list"].get("rows") or []
            if not rows:
                return text_reply("(Offline demo model) There is no flat page to update yet.")
            first = rows[0]
            title = str(first.get("title") or first.get("repr") or "Page")
            new = _next_title(title)
            return tool_reply(
                tool_call(
                    "admin_save", {"model": PAGES, "id": first["id"], "values": {"title": new}}
                ),
                text="(Offline demo model) The approval card shows the change before it is saved.",
            )
        if not answered:
            return tool_reply(
                tool_call("admin_list", {"model": PAGES}),
                text="(Offline demo model) Finding the page to update.",
            )
    if answered or (messages[-1]["role"] != "user"):
        return None
    if SEARCH.search(said) and "web_search" in tools:
        return _search_reply(said)
    if TABLE.search(said):
        return text_reply(MARKDOWN_REPLY)
    return None


# --- an MCP server's tools: the demo's ticket server (testing/demo_mcp.py) ---------------------

LIST_TICKETS = re.compile(r"\b(?:list|show)(?: me)? (?:the |all |my )?tickets\b", re.IGNORECASE)
CREATE_TICKET = re.compile(
    r"\b(?:create|open|file) (?:a |an )?(?:new )?ticket(?: (?:about|for|called|titled))?:?"
    r"\s*(?P<title>.*)",
    re.IGNORECASE,
)


def _mcp_tool(tools: set, suffix: str) -> str | None:
    """The name of an MCP tool ending in ``suffix`` (``mcp__<server>__list_tickets``)."""
    found = sorted(t for t in tools if t and t.startswith("mcp__") and t.endswith(f"__{suffix}"))
    return found[0] if found else None


def mcp_tour(body: dict[str, Any]) -> LocalResponse | None:
    """ "list the tickets" calls the ticket server's read tool (it runs unasked); "create a
    ticket about X" calls its write tool (an approval card naming the server and the tool).
    None for other messages, or when the chat's agent has no ticket server."""
    messages = body.get("messages") or []
    if not body.get("tools") or not messages:
        return None
    tools = {t.get("name") for t in body["tools"]}
    said = _last_user_text(messages).strip()[:200]
    listing, creating = _mcp_tool(tools, "list_tickets"), _mcp_tool(tools, "create_ticket")
    answered = _answered(messages)
    for name, verb in ((listing, "The server answered"), (creating, "Done")):
        if name and name in answered:
            result = answered[name]
            text = result.get("text") or result.get("message") or json.dumps(result)
            return text_reply(f"(Offline demo model) {verb}:\n\n{text}")
    if answered or messages[-1]["role"] != "user":
        return None
    if listing and LIST_TICKETS.search(said):
        return tool_reply(
            tool_call(listing, {"status": "open"}),
            text="(Offline demo model) Asking the ticket server (an MCP server).",
        )
    match = CREATE_TICKET.search(said) if creating else None
    if match:
        title = match.group("title").strip(" .!?\"'") or "A ticket from the demo"
        return tool_reply(
            tool_call(creating, {"title": title[:120]}),
            text="(Offline demo model) Creating the ticket needs your approval.",
        )
    return None


# --- a request no tool of the chat's agent serves: say so, and name the agent that can ----------

# (what the user asked for, its words in the reply, the word an agent's description must hold)
WANTS = (
    (WRITE_PAGE, "write pages", "page"),
    (LIST_PAGES, "read the site's pages", "page"),
    (UPDATE_PAGE, "change pages", "page"),
    (LIST_TICKETS, "read the ticket tracker", "ticket"),
    (CREATE_TICKET, "file tickets", "ticket"),
)


def _other_agents(body: dict[str, Any]) -> list[tuple[str, str]]:
    """(name and place, description) of the other agents the system prompt lists
    (``loop.prompt.other_agents_lines``)."""
    system = "\n".join(b.get("text", "") for b in body.get("system") or [])
    if OTHER_AGENTS_HEADING not in system:
        return []
    found = []
    for line in system.split(OTHER_AGENTS_HEADING, 1)[1].splitlines()[1:]:
        if not line.startswith("- "):
            break
        who, _, description = line[2:].partition("): ")
        found.append((who + ")", description))
    return found


def missing_tool_reply(body: dict[str, Any]) -> LocalResponse | None:
    """A tour request ("write a page about coffee", "list the tickets") in a chat whose agent
    has no tool for it: the reply says so and, in a line of its own, names the agent to pick
    (from the other agents the system prompt lists). None when the agent has the tool."""
    messages = body.get("messages") or []
    if not body.get("tools") or not messages or messages[-1]["role"] != "user":
        return None
    last = messages[-1].get("content")
    if isinstance(last, list) and _tool_results(last):
        return None
    tools = {t.get("name") for t in body["tools"]}
    said = _last_user_text(messages).strip()[:200]
    for pattern, doing, word in WANTS:
        if not pattern.search(said):
            continue
        if word == "page" and "admin_save" in tools:
            return None
        if word == "ticket" and _mcp_tool(tools, "list_tickets"):
            return None
        able = [who for who, description in _other_agents(body) if word in description.lower()]
        text = f"(Offline demo model) I cannot {doing} in this chat: none of my tools does that."
        if able:
            return text_reply(
                f"{text}\n\nPick **{able[0]}** for that: start a new chat with it (the + "
                "button) and ask again."
            )
        return text_reply(f"{text}\n\nNo agent you can use here does it; ask the site's staff.")
    return None


def demo_model(body: dict[str, Any]) -> LocalResponse:
    """The offline demo model: ``failure_reply`` after a denied or failed call, then
    ``missing_tool_reply``, ``surface_tour``, ``mcp_tour``, else ``demo_responder``; with
    thinking on, a reply opens with a short thinking block, and every reply streams at a human
    pace."""
    messages = body.get("messages") or []
    failed = failure_reply(messages) if body.get("tools") else None
    response = (
        failed
        or missing_tool_reply(body)
        or surface_tour(body)
        or mcp_tour(body)
        or demo_responder(body)
    )
    if not body.get("tools"):
        return response  # naming and memory: nobody watches them stream
    if _thinking_on(body) and response.status == 200:
        said = " ".join(_last_user_text(body.get("messages") or []).split())[:80]
        thought = f"The user wrote “{said}”. Pick the step that moves this forward and take it."
        response = with_thinking(response, thought)
    if not response.chunk_delay_s:
        response.chunk_delay_s = HUMAN_PACE_S
    return response
