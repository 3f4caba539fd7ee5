from django.apps import AppConfig


class OrchestratorAppConfig(AppConfig):
    name = "orchestrator_app"
    label = "orchestrator_app"
    verbose_name = "Agent orchestrator"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Wiring only: register system checks.
        from . import checks  # noqa: F401
