"""System checks cover the agents' rows as they cover the settings (``manage.py check``)."""

from io import StringIO

import pytest
from django.core.checks import run_checks
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import OperationalError, connection

from sessions_app import agents
from sessions_app.models import Agent, AgentVersion

# As tests/site/test_checks.py: run_checks(databases=["default"]) may ask every database about its features.
pytestmark = pytest.mark.django_db(databases="__all__")


def found(check_id: str) -> list[str]:
    return [m.msg for m in run_checks(databases=["default"]) if m.id == check_id]


def agent_with(config, slug="helper") -> Agent:
    agent = Agent.objects.create(slug=slug, name=slug.title())
    # Written as a row: a version that the admin would refuse (an older release wrote it, or a
    # fixture); version_save would refuse it.
    AgentVersion.objects.create(agent=agent, number=1, config=config)
    return agent


def test_the_default_agent_from_the_migration_passes():
    assert {m.id for m in run_checks(databases=["default"]) if m.id.startswith("ahentic.")} == set()


def test_a_latest_version_with_an_invalid_configuration_is_an_error():
    agent = agent_with({"MODLE": "claude-x"})
    agents.version_save(agent, config={"MODEL": "claude-y"})  # the latest is fine again
    assert found("ahentic.E023") == []

    AgentVersion.objects.create(agent=agent, number=3, config={"MAX_STEPS_PER_RUN": 0})
    (message,) = found("ahentic.E023")
    assert "'helper' v3" in message and "MAX_STEPS_PER_RUN" in message


def test_an_active_agent_without_a_version_is_an_error():
    Agent.objects.create(slug="empty", name="Empty")
    Agent.objects.create(slug="parked", name="Parked", active=False)

    (message,) = found("ahentic.E024")
    assert "'empty'" in message


def test_tools_that_are_not_registered_are_a_warning():
    agent_with({"TOOLS": ["echo", "no_such_tool"], "APPROVAL": {"nor_this": "always_ask"}})

    (message,) = found("ahentic.W006")
    assert "no_such_tool" in message and "nor_this" in message and "echo" not in message


def test_a_roster_naming_no_agent_is_a_warning():
    agent_with({"ROSTER": ["helper", "ghost"]})

    (message,) = found("ahentic.W008")
    assert "ghost" in message and "helper," not in message


def test_no_default_agent_is_a_warning():
    Agent.objects.filter(is_default=True).update(active=False)
    assert len(found("ahentic.W007")) == 1

    Agent.objects.filter(is_default=True).delete()
    assert len(found("ahentic.W007")) == 1


@pytest.mark.parametrize(
    "config, check_id",
    [
        ({"THINKING": 10}, "ahentic.E020"),
        ({"THINKING": {"agent": "adaptive", "ask": 999_999_999}}, "ahentic.E020"),
        ({"EFFORT": "extreme"}, "ahentic.E021"),
        ({"THINKING_DISPLAY": "loud"}, "ahentic.E021"),
        ({"WEB_SEARCH": {"max_uses": 0}}, "ahentic.E022"),
        (
            {"WEB_FETCH": {"allowed_domains": ["a.test"], "blocked_domains": ["b.test"]}},
            "ahentic.E022",
        ),
    ],
)
def test_surface_values_the_settings_check_refuses_are_refused_in_a_version(config, check_id):
    agent_with(config)

    messages = found(check_id)
    assert messages and all(m.startswith("Agent 'helper' v1 ") for m in messages)


def test_a_thinking_budget_is_checked_against_the_versions_own_output_limit():
    agent_with({"THINKING": 4000, "MAX_OUTPUT_TOKENS": 2000})
    assert found("ahentic.E020")


def test_manage_py_check_database_reports_agent_errors_and_plain_check_reads_no_rows():
    agent_with({"EFFORT": "extreme"})

    # The agents' rows are a database check: `check --database default` (and migrate) report
    # them; a plain `check` (every management command's) reads no rows.
    with pytest.raises(SystemCheckError, match="ahentic.E021"):
        call_command("check", databases=["default"], stdout=StringIO(), stderr=StringIO())
    call_command("check", stdout=StringIO(), stderr=StringIO())


def test_the_checks_skip_the_agents_before_migrate():
    # A new install before ``migrate``: the agent tables do not exist yet. The database answers
    # every query on them as it would then; the checks must neither crash nor report agents.
    def no_agent_tables(execute, sql, params, many, context):
        if "sessions_app_agent" in sql:
            raise OperationalError("no such table: sessions_app_agent")
        return execute(sql, params, many, context)

    with connection.execute_wrapper(no_agent_tables):
        ids = {m.id for m in run_checks(databases=["default"])}

    assert not {"ahentic.E023", "ahentic.E024", "ahentic.W007"} & ids
