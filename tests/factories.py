import factory
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from sessions_app import services
from sessions_app.models import Session


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
