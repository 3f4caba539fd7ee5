"""Memory across chats: the memory tool (``memory_20250818``) on ORM rows, per agent and user.

The model's calls are scripted on the strict local Messages API (``tool_call("memory", ...)``)
and run through the tool pipeline; what they did is read back through the model's next
request (its tool_result), the API routes (``agents/{slug}/memory``) and the admin.
"""

import itertools
import json

import pytest
from django.contrib.auth import get_user_model

from orchestrator_app.testing.localapi import text_reply, tool_call, tool_reply
from sessions_app import agents
from sessions_app import memory as store
from sessions_app.conf import ahentic_settings
from sessions_app.models import Agent, MemoryChange, MemoryFile
from tests.support.api import API, post_message, result_of
from tests.support.factories import SessionFactory, UserFactory
from tests.support.model import model_requests

pytestmark = pytest.mark.usefixtures("llm_strict")

MEMORY_TOOL = {"type": "memory_20250818", "name": "memory"}
CALL_IDS = itertools.count()


def make_agent(slug: str, memory=None) -> Agent:
    agent = Agent.objects.create(slug=slug, name=slug.title())
    agents.version_save(agent, config={"MEMORY": memory} if memory else {})
    return agent


@pytest.fixture
def helper(db):
    return make_agent("helper", "user")


@pytest.fixture
def editor(db):
    return make_agent("editor", "user")


def new_chat(user, agent):
    return SessionFactory(owner=user, agent_version=agents.latest_version(agent))


def calls(llm, client, run_tasks, session, *inputs) -> list[dict]:
    """Script one model turn calling the memory tool with each input, then a final text; post
    a message and return each call's tool_result as the model read it (content parsed)."""
    scripted = [tool_call("memory", i, id=f"toolu_mem_{next(CALL_IDS)}") for i in inputs]
    before = len(model_requests(llm, ahentic_settings.MODEL))
    llm.enqueue(tool_reply(*scripted))
    llm.enqueue(text_reply("Noted."))
    post_message(client, session, run_tasks, "Remember this.")
    last = model_requests(llm, ahentic_settings.MODEL)[-1]["json"]
    assert len(model_requests(llm, ahentic_settings.MODEL)) == before + 2
    results = []
    for call in scripted:
        block = result_of(last, call["id"])
        parsed = json.loads(block["content"])
        results.append({"is_error": block.get("is_error", False), **parsed})
    return results


def text(result: dict) -> str:
    return result.get("value") or result.get("message")


def tools_sent(llm) -> list[list[dict]]:
    return [
        [{k: v for k, v in t.items() if k != "cache_control"} for t in entry["json"]["tools"]]
        for entry in model_requests(llm, ahentic_settings.MODEL)
    ]


# --- the tool definition ------------------------------------------------------------------------


def test_the_typed_memory_tool_is_sent_only_when_the_agent_keeps_memory(
    llm, owner, owner_client, run_tasks, helper
):
    plain = make_agent("plain")
    llm.enqueue(text_reply("Hi."))
    post_message(owner_client, new_chat(owner, plain), run_tasks, "Hello")
    llm.enqueue(text_reply("Hi."))
    post_message(owner_client, new_chat(owner, helper), run_tasks, "Hello")
    without, with_memory = tools_sent(llm)
    assert MEMORY_TOOL not in without
    assert not any(t.get("name") == "memory" for t in without)
    assert with_memory.count(MEMORY_TOOL) == 1
    # Never also as a custom tool with a schema.
    assert [t for t in with_memory if t.get("name") == "memory"] == [MEMORY_TOOL]


def test_memory_setting_is_checked_on_a_version():
    agent = Agent(slug="x", name="X")
    with pytest.raises(Exception, match="MEMORY"):
        agents.clean_config({"MEMORY": "everyone"})
    assert agents.clean_config({"MEMORY": "user+shared"}) == {"MEMORY": "user+shared"}
    assert agent.slug == "x"


# --- commands -----------------------------------------------------------------------------------


def test_the_six_commands_answer_with_the_documented_texts(
    llm, owner, owner_client, run_tasks, helper
):
    chat = new_chat(owner, helper)
    results = calls(
        llm,
        owner_client,
        run_tasks,
        chat,
        {"command": "view", "path": "/memories"},
        {
            "command": "create",
            "path": "/memories/prefs.md",
            "file_text": "Tea: green\nTone: brief\n",
        },
        {"command": "create", "path": "/memories/prefs.md", "file_text": "again"},
        {
            "command": "str_replace",
            "path": "/memories/prefs.md",
            "old_str": "green",
            "new_str": "black",
        },
        {"command": "insert", "path": "/memories/prefs.md", "insert_line": 0, "insert_text": "#"},
        {"command": "view", "path": "/memories/prefs.md"},
    )
    # At most 8 calls run in one step: the rest in a second turn.
    results += calls(
        llm,
        owner_client,
        run_tasks,
        chat,
        {"command": "rename", "old_path": "/memories/prefs.md", "new_path": "/memories/me/p.md"},
        {"command": "view", "path": "/memories"},
        {"command": "delete", "path": "/memories/me"},
        {"command": "view", "path": "/memories/me"},
    )
    texts = [text(r) for r in results]
    assert texts[0] == (
        "Here're the files and directories up to 2 levels deep in /memories, excluding hidden "
        "items and node_modules:\n0\t/memories"
    )
    assert texts[1] == "File created successfully at: /memories/prefs.md"
    assert results[2]["is_error"] and texts[2] == "Error: File /memories/prefs.md already exists"
    assert texts[3] == (
        "The memory file has been edited.\n     1\tTea: black\n     2\tTone: brief\n     3\t"
    )
    assert texts[4] == "The file /memories/prefs.md has been edited."
    assert texts[5] == (
        "Here's the content of /memories/prefs.md with line numbers:\n"
        "     1\t#\n     2\tTea: black\n     3\tTone: brief"
    )
    assert texts[6] == "Successfully renamed /memories/prefs.md to /memories/me/p.md"
    assert texts[7].endswith("\n25\t/memories\n25\t/memories/me\n25\t/memories/me/p.md")
    assert texts[8] == "Successfully deleted /memories/me"
    assert results[9]["is_error"]
    assert texts[9] == "The path /memories/me does not exist. Please provide a valid path."
    assert not MemoryFile.objects.exists()


def test_replace_and_insert_errors_follow_the_documentation(
    llm, owner, owner_client, run_tasks, helper
):
    chat = new_chat(owner, helper)
    results = calls(
        llm,
        owner_client,
        run_tasks,
        chat,
        {"command": "create", "path": "/memories/a.txt", "file_text": "x\ny x\n"},
        {"command": "str_replace", "path": "/memories/a.txt", "old_str": "x", "new_str": "z"},
        {"command": "str_replace", "path": "/memories/a.txt", "old_str": "q", "new_str": "z"},
        {"command": "str_replace", "path": "/memories/b.txt", "old_str": "q", "new_str": "z"},
        {"command": "insert", "path": "/memories/a.txt", "insert_line": 3, "insert_text": "w"},
        {"command": "rename", "old_path": "/memories/nope", "new_path": "/memories/c"},
        {"command": "view", "path": "/memories/a.txt", "view_range": [2, -1]},
    )
    texts = [text(r) for r in results]
    assert texts[1] == (
        "No replacement was performed. Multiple occurrences of old_str `x` in lines: 1, 2. "
        "Please ensure it is unique"
    )
    assert texts[2] == (
        "No replacement was performed, old_str `q` did not appear verbatim in /memories/a.txt."
    )
    assert texts[3] == (
        "Error: The path /memories/b.txt does not exist. Please provide a valid path."
    )
    assert texts[4] == (
        "Error: Invalid `insert_line` parameter: 3. It should be within the range of lines of "
        "the file: [0, 2]"
    )
    assert texts[5] == "Error: The path /memories/nope does not exist"
    assert texts[6] == "Here's the content of /memories/a.txt with line numbers:\n     2\ty x"
    assert all(r["is_error"] for r in results[1:6])


@pytest.mark.parametrize(
    "path",
    [
        "/memories/../etc/passwd",
        "/memories/a/../../x",
        "/etc/passwd",
        "/memoriesx/a",
        "memories/a",
        "/memories/a\\..\\b",
        "/memories/a\x07b",
        "/memories/./a",
        "/memories/%2e%2e/a",
        "",
        "/memories",
        "/memories/" + "n" * 200,
    ],
)
def test_paths_that_escape_the_root_or_name_nothing_are_refused(
    llm, owner, owner_client, run_tasks, helper, path
):
    chat = new_chat(owner, helper)
    [result] = calls(
        llm, owner_client, run_tasks, chat, {"command": "create", "path": path, "file_text": "x"}
    )
    assert result["is_error"]
    assert result["error"] == "memory_invalid_path"
    assert not MemoryFile.objects.exists()
    assert not MemoryChange.objects.exists()


def test_bounds_refuse_with_the_limit_named(
    llm, owner, owner_client, run_tasks, helper, monkeypatch
):
    monkeypatch.setattr(store, "MAX_FILES", 2)
    monkeypatch.setattr(store, "MAX_TOTAL_BYTES", 25)
    chat = new_chat(owner, helper)
    results = calls(
        llm,
        owner_client,
        run_tasks,
        chat,
        {"command": "create", "path": "/memories/big", "file_text": "x" * (32 * 1024 + 1)},
        {"command": "create", "path": "/memories/a", "file_text": "0123456789"},
        {"command": "create", "path": "/memories/b", "file_text": "0123456789"},
        {"command": "create", "path": "/memories/c", "file_text": "0"},
        {"command": "str_replace", "path": "/memories/a", "old_str": "0", "new_str": "0123456789"},
    )
    assert results[0]["error"] == "memory_file_too_large"
    assert "MAX_FILE_BYTES" in text(results[0]) and "32768" in text(results[0])
    assert not results[1]["is_error"] and not results[2]["is_error"]
    assert results[3]["error"] == "memory_too_many_files" and "MAX_FILES" in text(results[3])
    assert results[4]["error"] == "memory_full" and "MAX_TOTAL_BYTES" in text(results[4])
    assert sorted(MemoryFile.objects.values_list("path", "content")) == [
        ("a", "0123456789"),
        ("b", "0123456789"),
    ]


EURO = "\u20ac"  # three bytes in UTF-8, one character


def test_sizes_are_counted_in_utf8_bytes_not_characters(
    llm, owner, owner_client, run_tasks, helper
):
    # 10,923 euro signs are 32,769 bytes (one past MAX_FILE_BYTES) in 10,923 characters;
    # 10,922 and "ab" are exactly 32,768 bytes.
    at_limit = EURO * 10922 + "ab"
    results = calls(
        llm,
        owner_client,
        run_tasks,
        new_chat(owner, helper),
        {"command": "create", "path": "/memories/over", "file_text": EURO * 10923},
        {"command": "create", "path": "/memories/fits", "file_text": at_limit},
        {
            "command": "str_replace",
            "path": "/memories/fits",
            "old_str": "ab",
            "new_str": "a" + EURO,
        },
    )
    assert results[0]["error"] == "memory_file_too_large"
    assert "32769 bytes" in text(results[0])
    assert not results[1]["is_error"]
    assert results[2]["error"] == "memory_file_too_large"
    listed = owner_client.get(f"{API}/agents/helper/memory").json()["files"]
    assert [(f["path"], f["size"]) for f in listed] == [("/memories/fits", 32768)]
    assert owner_client.get(f"{API}/agents/helper/memory/fits").json()["content"] == at_limit


def test_the_total_of_a_memory_is_counted_in_utf8_bytes(
    llm, owner, owner_client, run_tasks, helper
):
    # Eight files of 32,766 bytes (10,922 characters each) leave 16 bytes of MAX_TOTAL_BYTES:
    # six euro signs (18 bytes, 6 characters) do not fit, five (15 bytes) do.
    full = [
        {"command": "create", "path": f"/memories/f{n}", "file_text": EURO * 10922}
        for n in range(8)
    ]
    first_chat = new_chat(owner, helper)
    assert not any(r["is_error"] for r in calls(llm, owner_client, run_tasks, first_chat, *full))
    # Memory outlives the chat: a new one of the same user and agent meets the same total.
    over, fits = calls(
        llm,
        owner_client,
        run_tasks,
        new_chat(owner, helper),
        {"command": "create", "path": "/memories/more", "file_text": EURO * 6},
        {"command": "create", "path": "/memories/last", "file_text": EURO * 5},
    )
    assert over["error"] == "memory_full" and "262146 bytes" in text(over)
    assert not fits["is_error"]
    sizes = [f["size"] for f in owner_client.get(f"{API}/agents/helper/memory").json()["files"]]
    assert sum(sizes) == 262143


def test_staff_redaction_is_bounded_in_utf8_bytes(admin_client, owner, helper):
    seed(helper, owner, "prefs.md", "phone 555-0100")
    row = MemoryFile.objects.get(path="prefs.md")
    saved = admin_client.post(
        f"/admin/sessions_app/memoryfile/{row.pk}/change/", {"content": EURO * 10923}, follow=True
    )
    assert saved.status_code == 200
    assert "at most 32768 bytes" in saved.content.decode()
    assert MemoryFile.objects.get(pk=row.pk).content == "phone 555-0100"


# Paths whose names look like other names: invisible or direction-changing characters,
# compatibility forms (full-width dots and slashes, ligatures, decomposed accents), slash
# look-alikes, and case variants of the reserved "shared" folder.
LOOKALIKE_PATHS = [
    "/memories/notes\u202efdp.md",  # RIGHT-TO-LEFT OVERRIDE
    "/memories/\u2066notes\u2069.md",  # LEFT-TO-RIGHT ISOLATE ... POP
    "/memories/pr\u200befs.md",  # ZERO WIDTH SPACE
    "/memories/\ufeffprefs.md",  # ZERO WIDTH NO-BREAK SPACE (BOM)
    "/memories/pre\u00adfs.md",  # SOFT HYPHEN
    "/memories/a\u0085b",  # NEXT LINE (a C1 control)
    "/memories/\uff0e\uff0e/x",  # FULLWIDTH FULL STOP x2
    "/memories/a\uff0fb",  # FULLWIDTH SOLIDUS
    "/memories/a\u2215b",  # DIVISION SLASH
    "/memories/\ufb01le.md",  # LATIN SMALL LIGATURE FI
    "/memories/cafe\u0301.md",  # e + COMBINING ACUTE ACCENT
    "/memories/a\u00a0b",  # NO-BREAK SPACE
    "/memories/Shared/x",
    "/memories/SHARED/x",
    "/memories/\u017fhared/x",  # LATIN SMALL LETTER LONG S
    "/memories/\uff53hared/x",  # FULLWIDTH s
]


@pytest.mark.parametrize("mode", ["user", "user+shared"])
@pytest.mark.parametrize("path", LOOKALIKE_PATHS)
def test_memory_paths_with_lookalike_characters_are_refused_with_a_code(
    llm, owner, owner_client, run_tasks, path, mode
):
    chat = new_chat(owner, make_agent("keeper", mode))
    create, rename = calls(
        llm,
        owner_client,
        run_tasks,
        chat,
        {"command": "create", "path": path, "file_text": "x"},
        {"command": "rename", "old_path": "/memories/none", "new_path": path},
    )
    for result in (create, rename):
        assert result["is_error"]
        assert result["error"] == "memory_lookalike_path"
        assert "look" in text(result)
    assert not MemoryFile.objects.exists()
    assert not MemoryChange.objects.exists()


def test_names_in_other_scripts_are_kept(llm, owner, owner_client, run_tasks, helper):
    paths = [
        "/memories/Gr\u00fc\u00dfe.md",
        "/memories/\u65e5\u672c/\u30e1\u30e2.md",
        "/memories/shared-notes",
    ]
    results = calls(
        llm,
        owner_client,
        run_tasks,
        new_chat(owner, helper),
        *({"command": "create", "path": p, "file_text": "x"} for p in paths),
    )
    assert not any(r["is_error"] for r in results)
    listed = owner_client.get(f"{API}/agents/helper/memory").json()["files"]
    assert sorted(f["path"] for f in listed) == sorted(paths)


@pytest.mark.parametrize(
    "path", ["notes%E2%80%AEfdp.md", "pr%E2%80%8Befs.md", "%EF%BC%8E%EF%BC%8E/x", "Shared/x"]
)
def test_api_paths_with_lookalike_characters_are_a_400_with_a_code(
    owner, owner_client, helper, path
):
    seed(helper, owner, "x", "kept")
    for method in (owner_client.get, owner_client.delete):
        response = method(f"{API}/agents/helper/memory/{path}")
        assert response.status_code == 400
        assert response.json()["code"] == "ahentic_memory_lookalike_path"
        assert "look" in response.json()["detail"]
    assert MemoryFile.objects.get().content == "kept"


# --- isolation and versioning -------------------------------------------------------------------


def test_memory_is_per_user_and_per_agent_and_carries_across_chats(
    llm, owner, other, owner_client, other_client, run_tasks, helper, editor
):
    calls(
        llm,
        owner_client,
        run_tasks,
        new_chat(owner, helper),
        {"command": "create", "path": "/memories/prefs.md", "file_text": "owner likes tea"},
    )
    # A new chat of the same user and agent reads it.
    [same] = calls(
        llm,
        owner_client,
        run_tasks,
        new_chat(owner, helper),
        {"command": "view", "path": "/memories/prefs.md"},
    )
    assert "owner likes tea" in text(same)
    # Another user of the same agent, and the same user with another agent, do not.
    for client, user, agent in ((other_client, other, helper), (owner_client, owner, editor)):
        [seen, listing] = calls(
            llm,
            client,
            run_tasks,
            new_chat(user, agent),
            {"command": "view", "path": "/memories/prefs.md"},
            {"command": "view", "path": "/memories"},
        )
        assert seen["is_error"] and "does not exist" in text(seen)
        assert "prefs" not in text(listing)


def test_each_change_is_recorded_with_its_author_session_and_contents(
    llm, owner, owner_client, run_tasks, helper
):
    chat = new_chat(owner, helper)
    calls(
        llm,
        owner_client,
        run_tasks,
        chat,
        {"command": "create", "path": "/memories/a", "file_text": "one"},
        {"command": "str_replace", "path": "/memories/a", "old_str": "one", "new_str": "two"},
        {"command": "view", "path": "/memories/a"},
    )
    rows = list(
        MemoryChange.objects.order_by("id").values(
            "command", "author", "by", "session", "owner", "agent", "path", "before", "after"
        )
    )
    common = {
        "author": "agent",
        "by": owner.pk,
        "session": chat.pk,
        "owner": owner.pk,
        "agent": helper.pk,
        "path": "a",
    }
    assert rows == [
        {**common, "command": "create", "before": None, "after": "one"},
        {**common, "command": "str_replace", "before": "one", "after": "two"},
    ]


def test_deleting_a_user_deletes_their_memory_and_its_changes(
    llm, owner, other, owner_client, other_client, run_tasks, helper
):
    for client, user in ((owner_client, owner), (other_client, other)):
        calls(
            llm,
            client,
            run_tasks,
            new_chat(user, helper),
            {"command": "create", "path": "/memories/a", "file_text": user.username},
        )
    get_user_model().objects.filter(pk=owner.pk).delete()
    assert list(MemoryFile.objects.values_list("content", flat=True)) == ["other"]
    assert list(MemoryChange.objects.values_list("after", flat=True)) == ["other"]


# --- shared memory ------------------------------------------------------------------------------


def test_shared_memory_is_read_by_every_user_and_written_only_by_staff(
    llm, owner, owner_client, run_tasks
):
    team = make_agent("team", "user+shared")
    staff = UserFactory(username="staff", agent_permission=True, is_staff=True)
    staff_client = type(owner_client)()
    staff_client.force_login(staff)
    [wrote] = calls(
        llm,
        staff_client,
        run_tasks,
        new_chat(staff, team),
        {"command": "create", "path": "/memories/shared/faq.md", "file_text": "Open 9-5"},
    )
    assert not wrote["is_error"]
    [listing, read, refused, off] = calls(
        llm,
        owner_client,
        run_tasks,
        new_chat(owner, team),
        {"command": "view", "path": "/memories"},
        {"command": "view", "path": "/memories/shared/faq.md"},
        {"command": "create", "path": "/memories/shared/x.md", "file_text": "mine"},
        {"command": "delete", "path": "/memories/shared/faq.md"},
    )
    assert "/memories/shared" in text(listing)
    assert "Open 9-5" in text(read)
    assert refused["error"] == "memory_shared_read_only"
    assert off["error"] == "memory_shared_read_only"
    assert list(MemoryFile.objects.values_list("owner", "path")) == [(None, "faq.md")]
    # An agent without shared memory keeps the name reserved.
    [reserved] = calls(
        llm,
        staff_client,
        run_tasks,
        new_chat(staff, make_agent("solo", "user")),
        {"command": "view", "path": "/memories/shared"},
    )
    assert reserved["error"] == "memory_shared_off"


def test_a_call_when_memory_is_off_is_refused(llm, owner, owner_client, run_tasks):
    chat = new_chat(owner, make_agent("plain"))
    [result] = calls(llm, owner_client, run_tasks, chat, {"command": "view", "path": "/memories"})
    assert result["is_error"] and result["error"] == "memory_off"


# --- the API ------------------------------------------------------------------------------------


def seed(agent, user, path: str, content: str) -> None:
    store.command(
        agent.pk,
        user.pk,
        {"command": "create", "path": f"/memories/{path}", "file_text": content},
        mode="user",
        writer=store.Writer("agent", user=user),
    )


def test_the_user_lists_reads_and_deletes_their_memory(owner, owner_client, helper):
    seed(helper, owner, "prefs.md", "tea")
    seed(helper, owner, "notes/day.md", "busy")
    listed = owner_client.get(f"{API}/agents/helper/memory")
    assert listed.status_code == 200, listed.content
    body = listed.json()
    assert body["agent"] == "helper" and body["memory"] == "user"
    assert [f["path"] for f in body["files"]] == ["/memories/notes/day.md", "/memories/prefs.md"]
    assert body["limits"] == {"fileBytes": 32768, "files": 100, "totalBytes": 262144}
    read = owner_client.get(f"{API}/agents/helper/memory/prefs.md")
    assert read.status_code == 200 and read.json()["content"] == "tea"
    gone = owner_client.delete(f"{API}/agents/helper/memory/notes/day.md")
    assert gone.status_code == 204
    assert owner_client.get(f"{API}/agents/helper/memory/notes/day.md").status_code == 404
    change = MemoryChange.objects.order_by("-id").first()
    assert (change.command, change.author, change.by_id, change.before, change.after) == (
        "delete",
        "user",
        owner.pk,
        "busy",
        None,
    )
    seed(helper, owner, "more.md", "x")
    cleared = owner_client.delete(f"{API}/agents/helper/memory")
    assert cleared.status_code == 200 and cleared.json() == {"deleted": 2}
    assert owner_client.get(f"{API}/agents/helper/memory").json()["files"] == []
    assert MemoryChange.objects.filter(author="user", command="delete").count() == 3


def test_another_users_or_agents_memory_is_a_404(owner, other, other_client, helper, editor):
    seed(helper, owner, "prefs.md", "owner's")
    assert other_client.get(f"{API}/agents/helper/memory").json()["files"] == []
    for url in (f"{API}/agents/helper/memory/prefs.md", f"{API}/agents/editor/memory/prefs.md"):
        response = other_client.get(url)
        assert response.status_code == 404
        assert response.json()["code"] == "ahentic_memory_not_found"
        assert other_client.delete(url).status_code == 404
    assert other_client.delete(f"{API}/agents/helper/memory").json() == {"deleted": 0}
    assert MemoryFile.objects.get().content == "owner's"


def test_an_agent_the_user_may_not_use_is_a_404(owner_client, noperm_client, helper):
    from django.contrib.auth.models import Group

    helper.groups.add(Group.objects.create(name="members"))
    for client in (owner_client, noperm_client):
        response = client.get(f"{API}/agents/helper/memory")
        assert response.status_code in (403, 404)
    assert owner_client.get(f"{API}/agents/helper/memory").json()["code"] == (
        "ahentic_agent_not_found"
    )
    assert owner_client.get(f"{API}/agents/nobody/memory").status_code == 404


# "a/../x" and "./x" would reach the file "x" if paths were resolved: they are refused.
@pytest.mark.parametrize(
    "path", ["../x", "a/../x", "./x", "a/../../b", "a%00b", "a%0Ab", "..", "a\\b"]
)
def test_api_paths_that_escape_are_refused(owner, owner_client, helper, path):
    seed(helper, owner, "x", "kept")
    for method in (owner_client.get, owner_client.delete):
        response = method(f"{API}/agents/helper/memory/{path}")
        assert response.status_code == 404
        assert response.json()["code"] == "ahentic_memory_not_found"
    assert MemoryFile.objects.get().content == "kept"


# --- the admin ----------------------------------------------------------------------------------


def test_staff_see_and_redact_memory_in_the_admin_with_history(admin_client, owner, helper):
    seed(helper, owner, "prefs.md", "phone 555-0100")
    seed(helper, owner, "other.md", "likes tea")
    row = MemoryFile.objects.get(path="prefs.md")
    listing = admin_client.get("/admin/sessions_app/memoryfile/", {"agent__id__exact": helper.pk})
    assert listing.status_code == 200
    assert b"/memories/prefs.md" in listing.content and b"owner" in listing.content
    page = admin_client.get(f"/admin/sessions_app/memoryfile/{row.pk}/change/")
    assert page.status_code == 200
    assert b"phone 555-0100" in page.content and b"create" in page.content  # content, history
    saved = admin_client.post(
        f"/admin/sessions_app/memoryfile/{row.pk}/change/", {"content": "phone [removed]"}
    )
    assert saved.status_code == 302
    assert MemoryFile.objects.get(pk=row.pk).content == "phone [removed]"
    change = MemoryChange.objects.order_by("-id").first()
    admin_user = get_user_model().objects.get(username="admin")
    assert (change.command, change.author, change.by_id, change.before, change.after) == (
        "redact",
        "staff",
        admin_user.pk,
        "phone 555-0100",
        "phone [removed]",
    )
    other_row = MemoryFile.objects.get(path="other.md")
    acted = admin_client.post(
        "/admin/sessions_app/memoryfile/",
        {"action": "redact", "_selected_action": [other_row.pk]},
    )
    assert acted.status_code == 302
    assert MemoryFile.objects.get(pk=other_row.pk).content == "[redacted by staff]"
    assert MemoryChange.objects.filter(author="staff").count() == 2
    assert admin_client.get("/admin/sessions_app/memorychange/").status_code == 200
    assert admin_client.get("/admin/sessions_app/memoryfile/add/").status_code == 403
