from django.apps import AppConfig


class ArtifactsAppConfig(AppConfig):
    name = "artifacts_app"
    label = "artifacts_app"
    verbose_name = "Agent artifacts"
    default_auto_field = "django.db.models.BigAutoField"
