from django.apps import AppConfig, apps


class OrchestratorAppConfig(AppConfig):
    name = "orchestrator_app"
    label = "orchestrator_app"
    verbose_name = "Agent orchestrator"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Wiring only: register system checks.
        from . import checks  # noqa: F401

        if apps.is_installed("django.contrib.admin"):
            from django.core.signals import request_started

            from .tools.admin_tools.stale import guard_admin_sites

            # The stale change-form check on the ADMIN_TOOLS models' ModelAdmins, on every
            # AdminSite: applied at each request, as sites and registrations may come later.
            request_started.connect(guard_admin_sites, dispatch_uid="ahentic_stale_forms")
