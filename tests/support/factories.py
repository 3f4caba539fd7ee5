from datetime import datetime

import factory
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from artifacts_app import store
from artifacts_app.models import Artifact
from orchestrator_app.models import Schedule, UsageRecord
from orchestrator_app.schedules import services as schedules
from sessions_app import agents, services
from sessions_app.models import Agent, Goal, Session


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.com")
    password = factory.PostGenerationMethodCall("set_password", "pw")

    @factory.post_generation
    def agent_permission(self, create, extracted, **kwargs):
        """``UserFactory(agent_permission=True)`` grants ``sessions_app.use_agent``."""
        if create and extracted:
            self.user_permissions.add(
                Permission.objects.get(codename="use_agent", content_type__app_label="sessions_app")
            )
        if create:
            self.save()


class SessionFactory(factory.django.DjangoModelFactory):
    """Sessions are created through the service, like the API does."""

    class Meta:
        model = Session

    owner = factory.SubFactory(UserFactory, agent_permission=True)
    title = None
    mode = Session.Mode.AGENT

    @classmethod
    def _create(cls, model_class, *args, **kwargs):
        return services.session_create(**kwargs)


class GoalFactory(factory.django.DjangoModelFactory):
    """A goal row made directly, for payload and admin tests (the model's set_goal tool goes
    through ``sessions_app.services.goal_create``)."""

    class Meta:
        model = Goal

    session = factory.SubFactory(SessionFactory)
    description = factory.Sequence(lambda n: f"Goal {n}")


class ArtifactFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Artifact

    session = factory.SubFactory(SessionFactory)
    """A ready Markdown artifact with the payload shape the store writes (``{content}``)."""

    key = factory.Sequence(lambda n: f"draft-{n}")
    kind = Artifact.Kind.MARKDOWN
    status = Artifact.Status.READY
    title = "Draft"
    payload = factory.LazyAttribute(lambda a: {"content": f"# {a.title}"})
    bytes = factory.LazyAttribute(lambda a: store.encoded_bytes(a.payload))


class UsageRecordFactory(factory.django.DjangoModelFactory):
    """One model call in the ledger (written by the orchestrator in production)."""

    class Meta:
        model = UsageRecord

    session = factory.SubFactory(SessionFactory)
    user = factory.LazyAttribute(lambda r: r.session.owner if r.session else None)
    model = "claude-sonnet-5-5"
    input_tokens = 100
    output_tokens = 10


def agent_create(slug: str, **fields) -> Agent:
    """An agent with a first version that overrides nothing (as staff save one in the admin)."""
    agent = Agent.objects.create(slug=slug, name=fields.pop("name", slug.title()), **fields)
    agents.version_save(agent, config={})
    return agent


def schedule_create(run_as, agent: Agent, *, now: datetime | None = None, **fields) -> Schedule:
    """A schedule validated and saved as the admin saves one: its first due time after
    ``now``. Defaults: "Site digest" every 5 minutes, UTC, a new chat each firing."""
    schedule = Schedule(
        name=fields.pop("name", "Site digest"),
        agent=agent,
        run_as=run_as,
        cron=fields.pop("cron", "*/5 * * * *"),
        time_zone=fields.pop("time_zone", "UTC"),
        first_message=fields.pop("first_message", "Write the site digest."),
        **fields,
    )
    schedule.full_clean()
    return schedules.schedule_save(schedule, now=now)
