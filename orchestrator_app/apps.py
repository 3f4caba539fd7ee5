from django.apps import AppConfig, apps


class OrchestratorAppConfig(AppConfig):
    name = "orchestrator_app"
    label = "orchestrator_app"
    verbose_name = "Agent orchestrator"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Wiring only: register system checks, and delete a deleted attachment's uploaded file.
        from django.db.models.signals import post_delete

        from sessions_app.models import Attachment

        from . import checks  # noqa: F401
        from .loop.files import remote_delete

        post_delete.connect(remote_delete, sender=Attachment, dispatch_uid="ahentic_remote_file")

        if apps.is_installed("django.contrib.admin"):
            from django.core.signals import request_started

            from .tools.admin_tools.stale import guard_admin_sites

            # The stale change-form check on the ADMIN_TOOLS models' ModelAdmins, on every
            # AdminSite: applied at each request, as sites and registrations may come later.
            request_started.connect(guard_admin_sites, dispatch_uid="ahentic_stale_forms")
