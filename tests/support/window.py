"""The context window as the model receives it: cache reads, request prefixes, tool pairs."""

from orchestrator_app.loop import context, prompt
from orchestrator_app.tools import tools_for
from tests.support.model import without_cache_control


def read_share(later_usages: list[dict]) -> float:
    read = sum(u["cache_read_input_tokens"] for u in later_usages)
    total = sum(
        u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"]
        for u in later_usages
    )
    return read / total


def starts_with(longer: list, shorter: list) -> bool:
    return without_cache_control(longer[: len(shorter)]) == without_cache_control(shorter)


def assert_tool_pairs_intact(body: dict) -> None:
    """Every tool_use is answered in the next message and every tool_result has its call."""
    messages = body["messages"]
    for i, message in enumerate(messages):
        uses = [b["id"] for b in message["content"] if b["type"] == "tool_use"]
        results = [b["tool_use_id"] for b in message["content"] if b["type"] == "tool_result"]
        if results:
            previous = messages[i - 1]["content"] if i else []
            assert sorted(results) == sorted(
                b["id"] for b in previous if b["type"] == "tool_use"
            ), f"messages[{i}] answers calls its previous message did not make"
        if uses:
            answered = [
                b["tool_use_id"] for b in messages[i + 1]["content"] if b["type"] == "tool_result"
            ]
            assert sorted(uses) == sorted(answered), f"messages[{i}] has unanswered calls"


def fixed_tokens(session) -> int:
    """Tokens of the tools and the system prompt, which every request carries."""
    session.refresh_from_db()
    system, _ = prompt.system_blocks(session)
    tools = prompt.tool_definitions(tools_for(session, session.owner))
    return context.estimate({"system": system, "tools": tools})
