"""Goals, skills, workflows, the soul and view modes: what the system prompt holds, and why.

Goal ids are only known once a message created them, so goal tests run a run step by step
(``tasks.run_step``; the step's own enqueue of the next one is dropped by the test transaction)
and script each model answer after reading the ids it needs.
"""

import json

import pytest
from django.core.checks import run_checks
from django.test import override_settings

from orchestrator_app import tasks
from orchestrator_app.testing.localapi import text_reply, tool_call, tool_reply
from sessions_app.conf import ahentic_settings
from sessions_app.models import Session
from tests.support.api import API, payload_of, session_url, transcript_of
from tests.support.factories import GoalFactory, SessionFactory
from tests.support.model import model_requests

pytestmark = pytest.mark.usefixtures("llm_strict")

SEO_BODY = "Put the page's main keyword in its first heading."
LAUNCH_BODY = "1. Plan the page.\n2. Draft it as an artifact.\n3. Publish it."
REVIEW_BODY = "Read the page aloud, then fix every sentence that trips you."


def write(path, name: str, description: str, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nname: {name}\ndescription: {description}\n---\n{body}\n")


@pytest.fixture
def expertise(llm, settings, tmp_path):
    """A skill and two workflows in the configured directories (beside the bundled ones)."""
    write(tmp_path / "skills" / "seo.md", "seo_writing", "Write web copy that ranks.", SEO_BODY)
    write(
        tmp_path / "workflows" / "launch.md",
        "launch_page",
        "Plan, draft and publish a landing page.",
        LAUNCH_BODY,
    )
    write(
        tmp_path / "workflows" / "review.md",
        "review_page",
        "Review a page's copy.",
        REVIEW_BODY,
    )
    settings.AHENTIC = {
        **settings.AHENTIC,
        "SKILL_DIRS": [str(tmp_path / "skills")],
        "WORKFLOW_DIRS": [str(tmp_path / "workflows")],
    }


def start_run(client, session, content: str) -> dict:
    """Post a message; its run's first step is not executed yet."""
    response = client.post(session_url(session, "messages"), {"content": content}, format="json")
    assert response.status_code == 202, response.content
    return response.json()


def run_step(client, session) -> dict:
    tasks.run_step(str(session.pk), Session.objects.get(pk=session.pk).run_seq)
    return payload_of(client, session)


def post_and_run(client, run_tasks, session, content: str) -> dict:
    response = run_tasks(
        client.post, session_url(session, "messages"), {"content": content}, format="json"
    )
    assert response.status_code == 202, response.content
    return payload_of(client, session)


def main_requests(llm) -> list[dict]:
    return [entry["json"] for entry in model_requests(llm, ahentic_settings.MODEL)]


def section(body: dict, header: str) -> str:
    """The system block that starts with ``header`` ("" when there is none)."""
    return next((b["text"] for b in body["system"] if b["text"].startswith(header)), "")


def results(client, session) -> list[dict]:
    """Tool results, oldest first: ``{"tool", "ok", "error", "body"}``."""
    return [
        {
            "tool": m["meta"]["tool"],
            "ok": m["meta"]["ok"],
            "error": m["meta"].get("error"),
            "body": json.loads(m["content"]),
        }
        for m in transcript_of(client, session)
        if m["kind"] == "tool_response"
    ]


# --- goals ------------------------------------------------------------------------------------


def step_goals(body: dict) -> str:
    """The goals section of the newest step context a request carries ("" when none)."""
    for message in reversed(body["messages"]):
        for block in reversed(message["content"]):
            if block["type"] == "text" and block["text"].startswith("[Context for this step"):
                sections = block["text"].split("\n\n")
                return next((p for p in sections if p.startswith("Goals")), "")
    return ""


def test_a_message_starts_no_goal_until_the_model_sets_one(owner_client, session, llm, run_tasks):
    llm.enqueue(
        tool_reply(tool_call("set_goal", {"description": "Write the about page"})),
        text_reply("Working on it."),
    )

    body = post_and_run(owner_client, run_tasks, session, "Please write the about page")

    [goal] = body["goals"]
    assert goal["description"] == "Write the about page"
    assert goal["status"] == "active"
    assert goal["subGoals"] == []
    first, second = main_requests(llm)
    assert step_goals(first) == ""
    assert f"[active] #{goal['id']} Write the about page" in step_goals(second)
    # Goals ride in the step context of the newest turn, never in the system prompt.
    assert first["system"] == second["system"]
    assert not any("Write the about page" in b["text"] for b in second["system"])


def test_goals_nest_two_levels_and_complete(owner_client, session, llm):
    start_run(owner_client, session, "Plan the launch")
    llm.enqueue(tool_reply(tool_call("set_goal", {"description": "Plan the launch"})))
    run_step(owner_client, session)
    root = results(owner_client, session)[-1]["body"]["id"]
    llm.enqueue(
        tool_reply(tool_call("set_goal", {"description": "Find sources", "parentId": root}))
    )
    run_step(owner_client, session)
    sub = results(owner_client, session)[-1]["body"]["id"]
    llm.enqueue(tool_reply(tool_call("set_goal", {"description": "Too deep", "parentId": sub})))
    run_step(owner_client, session)
    llm.enqueue(tool_reply(tool_call("complete_goal", {"id": sub})))
    run_step(owner_client, session)
    llm.enqueue(text_reply("Sources found."))
    body = run_step(owner_client, session)

    _, first, deeper, completed = results(owner_client, session)
    assert first["ok"] is True
    assert (deeper["ok"], deeper["error"]) == (False, "goal_too_deep")
    assert completed["ok"] is True
    assert body["goals"] == [
        {
            "id": root,
            "description": "Plan the launch",
            "status": "active",
            "subGoals": [
                {"id": sub, "description": "Find sources", "status": "completed", "subGoals": []}
            ],
        }
    ]
    requests = main_requests(llm)
    assert f"[active] #{root} Plan the launch" in step_goals(requests[1])
    assert f"[active] #{sub} Find sources" in step_goals(requests[2])
    assert "Too deep" not in step_goals(requests[3])
    assert f"[completed] #{sub} Find sources" in step_goals(requests[4])


def test_the_payload_shows_active_goals_and_only_the_latest_completed_ones(owner_client, session):
    from datetime import timedelta

    from django.utils import timezone

    old = [GoalFactory(session=session, description=f"Old {i}") for i in range(7)]
    active = GoalFactory(session=session, description="Still going")
    for i, goal in enumerate(old):
        goal.status, goal.completed_at = "completed", timezone.now() + timedelta(minutes=i)
        goal.save()

    goals = payload_of(owner_client, session)["goals"]

    # The five completed last, and the active goal, in the order they were set.
    assert [g["description"] for g in goals] == [
        "Old 2",
        "Old 3",
        "Old 4",
        "Old 5",
        "Old 6",
        "Still going",
    ]
    assert active.pk == goals[-1]["id"]


def test_a_full_goals_window_keeps_the_active_goals_before_the_completed_ones(
    owner_client, session, settings
):
    """The window is filled active goals first, however old they are and however many goals
    were completed since."""
    from datetime import timedelta

    from django.utils import timezone

    settings.AHENTIC = {**settings.AHENTIC, "GOALS_WINDOW": 3}
    first = GoalFactory(session=session, description="First active")
    done = [GoalFactory(session=session, description=f"Done {i}") for i in range(4)]
    for i, goal in enumerate(done):
        goal.status, goal.completed_at = "completed", timezone.now() + timedelta(minutes=i)
        goal.save()
    last = GoalFactory(session=session, description="Last active")

    goals = payload_of(owner_client, session)["goals"]

    assert [g["description"] for g in goals] == ["First active", "Done 3", "Last active"]
    assert [g["id"] for g in goals] == [first.pk, done[3].pk, last.pk]


def test_completing_a_goal_that_does_not_exist_is_a_tool_error(owner_client, session, llm):
    start_run(owner_client, session, "Plan the launch")
    llm.enqueue(tool_reply(tool_call("complete_goal", {"id": 987654})), text_reply("Oops."))
    run_step(owner_client, session)
    run_step(owner_client, session)

    [result] = results(owner_client, session)
    assert (result["ok"], result["error"]) == (False, "goal_missing")


def test_goal_tools_cannot_reach_another_sessions_goals(owner_client, session, other, llm):
    foreign = GoalFactory(session=SessionFactory(owner=other), description="Someone else's")
    start_run(owner_client, session, "Plan the launch")
    llm.enqueue(
        tool_reply(
            tool_call("set_goal", {"description": "Hijack", "parentId": foreign.pk}),
            tool_call("complete_goal", {"id": foreign.pk}),
        ),
        text_reply("Neither worked."),
    )
    run_step(owner_client, session)
    run_step(owner_client, session)

    nested, completed = results(owner_client, session)
    assert (nested["ok"], nested["error"]) == (False, "goal_missing")
    assert (completed["ok"], completed["error"]) == (False, "goal_missing")
    foreign.refresh_from_db()
    assert (foreign.status, foreign.sub_goals.count()) == ("active", 0)


def test_a_completed_goal_leaves_the_step_context_after_five_conversation_messages(
    owner_client, session, llm
):
    start_run(owner_client, session, "Write the intro")
    llm.enqueue(tool_reply(tool_call("set_goal", {"description": "Write the intro"})))
    run_step(owner_client, session)
    goal = results(owner_client, session)[-1]["body"]["id"]
    llm.enqueue(tool_reply(tool_call("complete_goal", {"id": goal})), text_reply("Intro written."))
    run_step(owner_client, session)
    run_step(owner_client, session)  # conversation messages since completion: 1 (the reply)
    start_run(owner_client, session, "Now the outro")  # 2
    llm.enqueue(text_reply("Outro written."))
    run_step(owner_client, session)  # 3
    start_run(owner_client, session, "Add a title")  # 4
    llm.enqueue(
        tool_reply(tool_call("echo", {"text": "title"}), text="Checking the title."),  # 5
        text_reply("Title added."),
    )
    run_step(owner_client, session)
    run_step(owner_client, session)

    shown = [f"#{goal} Write the intro" in step_goals(b) for b in main_requests(llm)]
    # Requests: set_goal (none yet), complete_goal, after it (0 later), outro (2), title (4),
    # after the echo (5).
    assert shown == [False, True, True, True, True, False]


# --- skills and workflows ---------------------------------------------------------------------


def test_the_catalogs_list_bundled_and_configured_skills_and_workflows(owner_client, expertise):
    skills = owner_client.get(f"{API}/skills")
    workflows = owner_client.get(f"{API}/workflows")

    assert skills.status_code == workflows.status_code == 200
    assert {"name": "seo_writing", "description": "Write web copy that ranks."} in skills.json()
    assert {
        "name": "concise_writing",
        "description": "Write short, concrete copy for web pages.",
    } in skills.json()
    names = [w["name"] for w in workflows.json()]
    assert {"launch_page", "review_page", "draft_and_publish"} <= set(names)
    assert names == sorted(names)
    assert all(set(item) == {"name", "description"} for item in skills.json() + workflows.json())


@pytest.mark.parametrize("path", ["skills", "workflows"])
def test_the_catalogs_need_the_agent_permission(anon_client, noperm_client, path):
    assert anon_client.get(f"{API}/{path}").status_code in (401, 403)
    assert noperm_client.get(f"{API}/{path}").status_code == 403


def test_an_active_skill_joins_the_expertise_section_until_it_is_deactivated(
    owner_client, session, llm, run_tasks, expertise
):
    llm.enqueue(
        tool_reply(tool_call("activate_skill", {"name": "seo_writing"})),
        tool_reply(tool_call("deactivate_skill", {"name": "seo_writing"})),
        text_reply("Done."),
    )

    body = post_and_run(owner_client, run_tasks, session, "Improve the headline")

    before, active, after = main_requests(llm)
    assert SEO_BODY not in section(before, "## Expertise")
    assert f"### Skill: seo_writing\n{SEO_BODY}" in section(active, "## Expertise")
    assert SEO_BODY not in section(after, "## Expertise")
    assert [r["ok"] for r in results(owner_client, session)] == [True, True]
    assert body["activeSkills"] == []


def test_one_workflow_is_active_at_a_time(owner_client, session, llm, run_tasks, expertise):
    llm.enqueue(
        tool_reply(tool_call("activate_workflow", {"name": "launch_page"})),
        tool_reply(tool_call("activate_workflow", {"name": "review_page"})),
        tool_reply(tool_call("deactivate_workflow", {})),
        text_reply("Done."),
    )

    body = post_and_run(owner_client, run_tasks, session, "Launch the page")

    _, launch, review, none = (section(b, "## Expertise") for b in main_requests(llm))
    assert LAUNCH_BODY in launch
    assert REVIEW_BODY in review and LAUNCH_BODY not in review
    assert REVIEW_BODY not in none and LAUNCH_BODY not in none
    assert body["activeWorkflow"] is None


def test_unknown_skills_and_workflows_are_tool_errors(
    owner_client, session, llm, run_tasks, expertise
):
    llm.enqueue(
        tool_reply(
            tool_call("activate_skill", {"name": "astrology"}),
            tool_call("activate_workflow", {"name": "moon_landing"}),
        ),
        text_reply("Neither exists."),
    )

    body = post_and_run(owner_client, run_tasks, session, "Use astrology")

    skill, workflow = results(owner_client, session)
    assert (skill["ok"], skill["error"]) == (False, "unknown_skill")
    assert "seo_writing" in skill["body"]["message"]  # the error names what is available
    assert (workflow["ok"], workflow["error"]) == (False, "unknown_workflow")
    assert body["activeSkills"] == [] and body["activeWorkflow"] is None


def test_patch_activates_known_skills_and_a_workflow(
    owner_client, session, llm, run_tasks, expertise
):
    response = owner_client.patch(
        session_url(session),
        {"activeSkills": ["seo_writing", "concise_writing"], "activeWorkflow": "launch_page"},
        format="json",
    )
    assert response.status_code == 200, response.content
    assert response.json()["activeSkills"] == ["seo_writing", "concise_writing"]
    assert response.json()["activeWorkflow"] == "launch_page"

    post_and_run(owner_client, run_tasks, session, "Write the landing page")

    expertise_text = section(main_requests(llm)[0], "## Expertise")
    assert SEO_BODY in expertise_text
    assert "Lead with what the reader gets" in expertise_text  # the bundled skill's body
    assert LAUNCH_BODY in expertise_text


def test_patch_refuses_unknown_skills_and_workflows(owner_client, session, expertise):
    skill = owner_client.patch(
        session_url(session), {"activeSkills": ["seo_writing", "astrology"]}, format="json"
    )
    workflow = owner_client.patch(
        session_url(session), {"activeWorkflow": "moon_landing"}, format="json"
    )

    assert skill.status_code == 400
    assert skill.json()["code"] == "ahentic_unknown_skill"
    assert workflow.status_code == 400
    assert workflow.json()["code"] == "ahentic_unknown_workflow"
    stored = Session.objects.get(pk=session.pk)
    assert (stored.active_skills, stored.active_workflow) == ([], "")


# --- the soul, the section order, view modes ------------------------------------------------------


def test_the_system_prompt_sections_come_in_order(
    owner_client, session, llm, run_tasks, expertise, settings
):
    settings.AHENTIC = {**settings.AHENTIC, "SOUL": "You are Ada, the site's helper."}
    owner_client.patch(session_url(session), {"activeSkills": ["seo_writing"]}, format="json")

    post_and_run(owner_client, run_tasks, session, "Say hello")

    system = [b["text"] for b in main_requests(llm)[0]["system"]]
    assert system[0] == "You are Ada, the site's helper."
    assert [text.split("\n")[0] for text in system[1:]] == ["## Environment", "## Expertise"]


def test_the_soul_can_be_a_markdown_file(owner_client, session, llm, run_tasks, settings, tmp_path):
    soul = tmp_path / "soul.md"
    soul.write_text("# Soul\nYou are Bo, a careful editor.\n")
    settings.AHENTIC = {**settings.AHENTIC, "SOUL": str(soul)}

    post_and_run(owner_client, run_tasks, session, "Say hello")

    assert (
        main_requests(llm)[0]["system"][0]["text"].strip()
        == "# Soul\nYou are Bo, a careful editor."
    )


@pytest.mark.django_db(databases="__all__")
def test_a_missing_soul_file_fails_the_system_check(tmp_path):
    # Since Django 6.0 run_checks() asks every database about its features.
    existing = tmp_path / "soul.md"
    existing.write_text("You are Bo.")

    with override_settings(AHENTIC={"SOUL": str(tmp_path / "missing.md")}):
        missing = [e.id for e in run_checks()]
    with override_settings(AHENTIC={"SOUL": str(existing)}):
        present = [e.id for e in run_checks()]

    assert "ahentic.E003" in missing
    assert "ahentic.E003" not in present


@pytest.mark.parametrize(
    ("current", "following"),
    [("basic", "verbose"), ("verbose", "debug"), ("debug", "basic")],
)
def test_the_view_mode_cycles_basic_verbose_debug(current, following):
    assert Session(view_mode=current).next_view_mode() == following
