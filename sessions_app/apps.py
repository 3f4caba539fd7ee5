from django.apps import AppConfig, apps


class SessionsAppConfig(AppConfig):
    name = "sessions_app"
    label = "sessions_app"
    verbose_name = "Agent sessions"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # Connects the deletion of an attachment's file to the deletion of its row.
        from . import attachments  # noqa: F401

        # The memory admins; they build on sessions_app.admin, which cannot import them back.
        if apps.is_installed("django.contrib.admin"):
            from . import admin_memory  # noqa: F401
