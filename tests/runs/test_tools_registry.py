"""The tool registry and catalog: registration rules, GET tools, per-user permission."""

import json

import jsonschema
import pytest

from orchestrator_app.testing.localapi import text_reply, tool_call, tool_reply
from orchestrator_app.tools import get_tool, tool, unregister
from tests.support.api import API, session_url, transcript_of
from tests.support.factories import UserFactory

pytestmark = pytest.mark.usefixtures("llm_strict")


@pytest.fixture
def scratch_tools():
    """Names registered by a test; unregistered afterwards so the registry stays as it was."""
    names: list[str] = []
    yield names
    for name in names:
        unregister(name)


def catalog(client) -> dict[str, dict]:
    response = client.get(f"{API}/tools")
    assert response.status_code == 200, response.content
    return {t["name"]: t for t in response.json()}


# --- the catalog -------------------------------------------------------------------------------


def test_the_catalog_lists_the_builtins_and_the_sites_tools_with_their_flags(owner_client):
    tools = catalog(owner_client)

    for name in ("ask_user", "request_capability", "update_plan"):
        assert tools[name]["readonly"] is True
        assert tools[name]["requiresApproval"] is False
        assert tools[name]["runtime"] == "server"
    assert {k: tools["echo"][k] for k in ("readonly", "requiresApproval", "nonPreallowable")} == {
        "readonly": True,
        "requiresApproval": False,
        "nonPreallowable": False,
    }
    assert (tools["notes_create"]["readonly"], tools["notes_create"]["requiresApproval"]) == (
        False,
        True,
    )
    assert tools["payment_send"]["nonPreallowable"] is True
    assert tools["echo"]["description"] == "Echo the text back."


def test_a_tool_the_user_may_not_use_is_not_listed(owner_client, db):
    staff = UserFactory(username="staff", is_staff=True, agent_permission=True)
    staff_client = type(owner_client)()
    staff_client.force_login(staff)

    assert "staff_report" not in catalog(owner_client)
    assert "staff_report" in catalog(staff_client)


def test_a_tool_the_user_may_not_use_is_not_offered_and_a_call_to_it_is_forbidden(
    owner_client, session, llm, run_tasks, tool_calls
):
    llm.enqueue(tool_reply(tool_call("staff_report", {})), text_reply("I may not run that."))

    run_tasks(
        owner_client.post, session_url(session, "messages"), {"content": "Report"}, format="json"
    )

    offered = [t["name"] for t in llm.message_requests()[0]["tools"]]
    assert "staff_report" not in offered
    assert {"echo", "notes_create", "update_plan"} <= set(offered)
    [result] = [m for m in transcript_of(owner_client, session) if m["kind"] == "tool_response"]
    assert result["meta"]["error"] == "ability_forbidden"
    assert json.loads(result["content"])["ok"] is False
    assert tool_calls == []


def test_the_catalog_needs_the_agent_permission(noperm_client, anon_client):
    assert noperm_client.get(f"{API}/tools").status_code == 403
    assert anon_client.get(f"{API}/tools").status_code in (401, 403)
    assert noperm_client.get(f"{API}/stats/tokens").status_code == 403
    assert anon_client.get(f"{API}/stats/tokens").status_code in (401, 403)


# --- registration rules ------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["has space", "dots.not.allowed", "", "x" * 65, "ünïcode"])
def test_a_tool_name_outside_the_allowed_pattern_is_rejected(name):
    with pytest.raises(ValueError, match="must match"):
        tool(name=name, description="Bad name.")(lambda ctx, input: {})
    assert get_tool(name) is None


def test_a_tool_with_an_invalid_input_schema_is_rejected():
    bad_schema = {"type": "object", "properties": {"n": {"type": "integr"}}}

    with pytest.raises(jsonschema.SchemaError):
        tool(name="bad_schema", description="Bad schema.", input_schema=bad_schema)(
            lambda ctx, input: {}
        )
    assert get_tool("bad_schema") is None


def test_an_unknown_runtime_is_rejected():
    with pytest.raises(ValueError, match="runtime"):
        tool(name="odd_runtime", description="?", runtime="mainframe")(lambda ctx, input: {})


def test_a_name_taken_by_another_function_is_rejected(scratch_tools):
    def first(ctx, input):
        return {}

    def second(ctx, input):
        return {}

    tool(name="scratch_taken", description="First.", readonly=True)(first)
    scratch_tools.append("scratch_taken")

    with pytest.raises(ValueError, match="already registered"):
        tool(name="scratch_taken", description="Second.", readonly=True)(second)
    assert get_tool("scratch_taken").func is first


def test_requires_approval_defaults_to_not_readonly(scratch_tools):
    tool(name="scratch_reader", description="Reads.", readonly=True)(lambda ctx, input: {})
    tool(name="scratch_writer", description="Writes.")(lambda ctx, input: {})
    tool(name="scratch_quiet", description="Writes.", requires_approval=False)(
        lambda ctx, input: {}
    )
    scratch_tools.extend(["scratch_reader", "scratch_writer", "scratch_quiet"])

    assert get_tool("scratch_reader").requires_approval is False
    assert get_tool("scratch_writer").requires_approval is True
    assert get_tool("scratch_writer").readonly is False
    assert get_tool("scratch_quiet").requires_approval is False


def test_a_tool_with_an_artifact_field_accepts_from_memory_in_the_schema_the_model_sees(
    owner_client, session, llm, run_tasks, scratch_tools
):
    schema = {
        "type": "object",
        "properties": {"title": {"type": "string"}, "body": {"type": "string"}},
        "required": ["title", "body"],
    }
    tool(
        name="scratch_page_write",
        description="Write a page.",
        input_schema=schema,
        artifact_field="body",
        artifact_kinds=("markdown",),
    )(lambda ctx, input: {"ok": True})
    scratch_tools.append("scratch_page_write")
    llm.enqueue(text_reply("Ok."))

    run_tasks(owner_client.post, session_url(session, "messages"), {"content": "Hi"}, format="json")

    [sent] = [t for t in llm.message_requests()[0]["tools"] if t["name"] == "scratch_page_write"]
    properties = sent["input_schema"]["properties"]
    assert properties["from_memory"]["type"] == "string"
    assert set(properties) == {"title", "body", "from_memory"}
    assert sent["input_schema"]["required"] == ["title"]
    # The registered schema itself is unchanged: validation still sees the original.
    assert get_tool("scratch_page_write").input_schema == schema
    tools = [t["name"] for t in llm.message_requests()[0]["tools"]]
    assert len(tools) == len(set(tools))
