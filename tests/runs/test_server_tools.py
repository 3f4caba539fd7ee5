"""Server tools (web search, web fetch): settings, history, pause_turn, citations, the ledger.

Through the HTTP API and the task entry points, with the real SDK against the local Messages API
server, which checks that every server tool result sits with its server_tool_use in the same
assistant turn and refuses an unknown tool version (``llm_strict`` fails on any refused request).
"""

from decimal import Decimal

import pytest

from orchestrator_app import llm as llm_seam
from orchestrator_app.models import UsageRecord
from orchestrator_app.testing.localapi import (
    cited_text,
    reply,
    text_reply,
    tool_call,
    web_search_blocks,
    with_thinking,
)
from sessions_app.models import Event
from tests.support import tools_for_tests  # noqa: F401  (registers echo)
from tests.support.api import post_message, session_url
from tests.support.model import without_cache_control

pytestmark = pytest.mark.usefixtures("llm_strict")

DOCS = "https://docs.example.com/hours"
SEARCH = {"max_uses": 3, "allowed_domains": ["docs.example.com"]}


@pytest.fixture
def search_on(llm, settings):
    settings.AHENTIC = {
        **settings.AHENTIC,
        "WEB_SEARCH": SEARCH,
        "WEB_FETCH": {"agent": {"max_uses": 2}},
        "PRICES": {
            "claude-sonnet-5-5": {"input": 3, "output": 15, "cache_read": 0.3, "cache_write": 3.75}
        },
    }
    return llm


def searched_reply(**kw):
    found = web_search_blocks("opening hours", [{"url": DOCS, "title": "Hours"}], id="srvtoolu_1")
    return reply(
        [
            {"type": "text", "text": "Let me look that up."},
            *found,
            {"type": "text", "text": "The shop "},
            cited_text("opens at nine", DOCS, "Hours", "We open at 9:00."),
            {"type": "text", "text": "."},
        ],
        **kw,
    )


def messages_of(client, session, view=""):
    query = f"?view={view}" if view else ""
    return client.get(session_url(session, "messages") + query).json()["messages"]


def test_a_web_search_with_citations_is_stored_whole_and_shown_with_its_sources(
    owner_client, session, search_on, run_tasks
):
    llm = search_on
    llm.enqueue(searched_reply(), text_reply("You're welcome."))

    post_message(owner_client, session, run_tasks, "When does the shop open?")
    post_message(owner_client, session, run_tasks, "Thanks")

    first, second = llm.message_requests()
    tools = {t["name"]: t for t in without_cache_control(first["tools"])}
    assert tools["web_search"] == {"type": "web_search_20260209", "name": "web_search", **SEARCH}
    assert tools["web_fetch"] == {"type": "web_fetch_20260209", "name": "web_fetch", "max_uses": 2}
    # The turn goes back exactly as the model sent it: server tool blocks and citations.
    [turn] = [m for m in second["messages"] if m["role"] == "assistant"]
    assert without_cache_control(turn["content"]) == first_response_content(llm)

    [answer] = [m for m in messages_of(owner_client, session) if "citations" in m["meta"]]
    assert answer["content"] == "Let me look that up.The shop opens at nine[1]."
    assert answer["meta"]["citations"] == [
        {"index": 1, "url": DOCS, "title": "Hours", "citedText": "We open at 9:00."}
    ]
    assert answer["meta"]["serverTools"] == [
        {"tool": "web_search", "input": {"query": "opening hours"}}
    ]


def first_response_content(llm):
    return [e for e in llm.requests if e["accepted"]][0]["response"]["content"]


@pytest.mark.parametrize(
    ("model", "search", "fetch"),
    [
        ("claude-sonnet-5-5", "web_search_20260209", "web_fetch_20260209"),
        ("claude-opus-4-6", "web_search_20260209", "web_fetch_20260209"),
        ("claude-sonnet-4-5-20250929", "web_search_20250305", "web_fetch_20250910"),
        ("claude-3-7-sonnet-latest", "web_search_20250305", "web_fetch_20250910"),
    ],
)
def test_the_server_tools_go_in_the_version_the_agents_model_takes(
    owner_client, owner, search_on, run_tasks, model, search, fetch
):
    """The versions follow the model of the session's agent version, not the site's MODEL."""
    from sessions_app import agents, services
    from sessions_app.models import Agent

    agent = Agent.objects.create(slug="older", name="Older")
    version = agents.version_save(agent, config={"MODEL": model})
    chat = services.session_create(owner=owner, agent_version=version)
    search_on.enqueue(text_reply("Done."))

    post_message(owner_client, chat, run_tasks, "Look it up")

    [request] = search_on.message_requests()
    assert request["model"] == model
    types = {t["name"]: t["type"] for t in request["tools"] if t["name"].startswith("web_")}
    assert types == {"web_search": search, "web_fetch": fetch}


def test_web_search_costs_in_the_usage_ledger(owner_client, session, search_on, run_tasks):
    search_on.enqueue(searched_reply())
    post_message(owner_client, session, run_tasks, "When does the shop open?")

    record = UsageRecord.objects.get(session=session, purpose="step")
    assert (record.web_search_requests, record.web_fetch_requests) == (1, 0)
    tokens = (
        Decimal(3) * record.input_tokens
        + Decimal(15) * record.output_tokens
        + Decimal("0.3") * record.cache_read_tokens
        + Decimal("3.75") * record.cache_write_tokens
    ) / 1_000_000
    assert record.cost_usd == (tokens + Decimal("0.01")).quantize(Decimal("0.000001"))


def test_pause_turn_continues_the_same_turn(owner_client, session, search_on, run_tasks):
    llm = search_on
    found = web_search_blocks("hours", [{"url": DOCS, "title": "Hours"}], id="srvtoolu_p")
    llm.enqueue(
        reply(found, "pause_turn"),
        reply([cited_text("Nine o'clock.", DOCS, "Hours", "We open at 9:00.")]),
        text_reply("Anytime."),
    )

    body = post_message(owner_client, session, run_tasks, "When does the shop open?")
    assert body["status"] == "idle"
    post_message(owner_client, session, run_tasks, "Thanks")

    paused, continued, later = llm.message_requests()
    # The continuation resends the paused turn as the final assistant message.
    assert continued["messages"][-1]["role"] == "assistant"
    assert without_cache_control(continued["messages"][-1]["content"]) == found
    assert without_cache_control(continued["messages"][:-1]) == without_cache_control(
        paused["messages"]
    )
    # Later the two halves are one assistant turn.
    turn = later["messages"][-2]
    assert turn["role"] == "assistant"
    assert [b["type"] for b in turn["content"]] == [
        "server_tool_use",
        "web_search_tool_result",
        "text",
    ]


def test_server_tools_follow_the_mode(owner_client, session, search_on, run_tasks):
    search_on.enqueue(text_reply("Agent."), text_reply("Ask."))
    post_message(owner_client, session, run_tasks, "One")
    post_message(owner_client, session, run_tasks, "Two", mode="ask")

    agent, ask = search_on.message_requests()
    names = lambda body: {t["name"] for t in body["tools"] if "type" in t}  # noqa: E731
    assert names(agent) == {"web_search", "web_fetch"}
    assert names(ask) == {"web_search"}  # WEB_FETCH names the agent mode only


def test_off_by_default(owner_client, session, llm, run_tasks):
    post_message(owner_client, session, run_tasks, "Hi")
    [request] = llm.message_requests()
    assert not [t for t in request["tools"] if "type" in t]
    assert "thinking" not in request and "output_config" not in request


def test_an_unknown_server_tool_version_is_refused(llm):
    with pytest.raises(llm_seam.LLMError) as refused:
        llm_seam.call_model(
            model="claude-test",
            system=[{"type": "text", "text": "You help."}],
            messages=[{"role": "user", "content": "Hi"}],
            tools=[{"type": "web_search_20990101", "name": "web_search"}],
            max_tokens=1000,
        )
    assert refused.value.status == 400
    assert "Input tag 'web_search_20990101' found using 'type'" in refused.value.detail
    llm.reset()


def test_a_server_tool_result_without_its_use_is_refused(llm):
    orphan = web_search_blocks("x", [{"url": DOCS, "title": "Hours"}])[1]
    with pytest.raises(llm_seam.LLMError) as refused:
        llm_seam.call_model(
            model="claude-test",
            system=[{"type": "text", "text": "You help."}],
            messages=[
                {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": [orphan, {"type": "text", "text": "x"}]},
                {"role": "user", "content": "More"},
            ],
            max_tokens=1000,
        )
    assert "`server_tool_use` with the same id" in refused.value.detail
    llm.reset()


def test_a_thinking_search_then_a_tool_call_keeps_the_turn_whole(
    owner_client, session, search_on, settings, run_tasks
):
    settings.AHENTIC = {**settings.AHENTIC, "THINKING": "adaptive"}
    llm = search_on
    found = web_search_blocks("hours", [{"url": DOCS, "title": "Hours"}], id="srvtoolu_t")
    llm.enqueue(
        with_thinking(
            reply([*found, tool_call("echo", {"text": "9"}, id="toolu_e")], "tool_use"),
            "Search, then echo.",
        ),
        text_reply("Echoed nine."),
    )

    post_message(owner_client, session, run_tasks, "Echo the opening hour")

    _, second = llm.message_requests()
    turn = second["messages"][-2]["content"]
    assert [b["type"] for b in turn] == [
        "thinking",
        "server_tool_use",
        "web_search_tool_result",
        "tool_use",
    ]
    assert "thinking" in second
    stored = Event.objects.get(session=session, kind=Event.Kind.AGENT_MESSAGE, content="")
    assert [b["type"] for b in stored.payload["blocks"]] == turn_types(turn)[:3]


def turn_types(turn):
    return [b["type"] for b in turn]


def test_citation_links_keep_to_http(owner_client, session, search_on, run_tasks):
    search_on.enqueue(
        reply(
            [
                *web_search_blocks("x", [{"url": "javascript:alert(1)", "title": "Bad"}]),
                cited_text("Unsafe.", "javascript:alert(1)", "Bad", "x"),
            ]
        )
    )
    post_message(owner_client, session, run_tasks, "Find it")
    [answer] = [m for m in messages_of(owner_client, session) if m["content"] == "Unsafe."]
    assert "citations" not in answer["meta"]
