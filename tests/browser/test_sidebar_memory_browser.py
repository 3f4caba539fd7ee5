"""The sidebar's "What I remember" panel: what the chat's agent keeps about the user, a file
the agent writes during the chat appearing when its run ends, delete one and forget all (each
confirmed).

In a real browser (Playwright + Debian's chromium) against the live server and the local
Messages API server; the fixtures and the skip rule are those of ``test_sidebar_browser``.
"""

import pytest

from tests.support.browser import expect, new_chat, open_home, screenshot, send, status_is

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("llm_strict"),
]


def remembering_default_agent():
    """The site's default agent (a flushed database has none), keeping memory per user."""
    from sessions_app import agents
    from sessions_app.models import Agent

    agent = Agent.objects.filter(is_default=True).first() or Agent.objects.create(
        slug="default", name="Assistant", is_default=True
    )
    agents.version_save(agent, config={"MEMORY": "user"})
    return agent


def test_what_i_remember_lists_the_agents_memory_and_forgets_on_request(page, llm, owner):  # noqa: F811
    from orchestrator_app.testing.localapi import text_reply, tool_call, tool_reply
    from sessions_app import memory
    from sessions_app.models import MemoryChange, MemoryFile

    agent = remembering_default_agent()
    memory.command(
        agent.pk,
        owner.pk,
        {"command": "create", "path": "/memories/prefs.md", "file_text": "Prefers tea"},
        mode="user",
        writer=memory.Writer("agent", user=owner),
    )
    page.on("dialog", lambda dialog: dialog.accept())
    open_home(page)
    new_chat(page)
    panel = page.locator("details.ahentic-memory")
    expect(panel.locator("summary")).to_have_text("What I remember (1)")
    panel.locator("summary").click()
    expect(panel.locator("li .ahentic-child-title")).to_have_text(["prefs.md"])

    llm.enqueue(
        tool_reply(
            tool_call(
                "memory",
                {"command": "create", "path": "/memories/tone.md", "file_text": "Brief answers"},
            )
        )
    )
    llm.enqueue(text_reply("I'll keep it brief."))
    send(page, "Please keep answers brief, and remember that.")
    status_is(page, "idle")
    expect(panel.locator("li .ahentic-child-title")).to_have_text(["prefs.md", "tone.md"])
    screenshot(page, "sidebar-memory")

    panel.get_by_role("button", name="Forget prefs.md").click()
    expect(panel.locator("li .ahentic-child-title")).to_have_text(["tone.md"])
    assert list(MemoryFile.objects.values_list("path", flat=True)) == ["tone.md"]

    panel.get_by_role("button", name="Forget everything").click()
    expect(panel.locator("li")).to_have_text(["Nothing yet."])
    expect(panel.locator("summary")).to_have_text("What I remember (0)")
    assert not MemoryFile.objects.exists()
    assert sorted(MemoryChange.objects.filter(author="user").values_list("path", "command")) == [
        ("prefs.md", "delete"),
        ("tone.md", "delete"),
    ]
