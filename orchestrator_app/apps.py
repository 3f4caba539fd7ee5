from django.apps import AppConfig


class OrchestratorAppConfig(AppConfig):
    name = "orchestrator_app"
    label = "orchestrator_app"
    verbose_name = "Agent orchestrator"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Wiring only: system checks (and the agent configuration's), a deleted attachment's
        # uploaded file, the cached permission answers, the lease watch.
        from django.db.models.signals import post_delete

        from sessions_app import agents
        from sessions_app.models import Attachment

        from . import checks
        from .api.permissions import connect_invalidation
        from .loop.files import remote_delete
        from .mcp import checks as mcp_checks
        from .notifications import checks as notification_checks  # noqa: F401
        from .oauth import checks as oauth_checks  # noqa: F401  (registers the OAuth checks)
        from .schedules import checks as schedule_checks  # noqa: F401
        from .webhooks import checks as webhook_checks  # noqa: F401

        # An agent version's model surface is refused where it is saved, as at startup.
        agents.add_config_check(checks.surface_problems)
        agents.add_config_check(checks.spend_cap_problems)
        # ... and so are MCP servers that are not registered.
        agents.add_config_check(mcp_checks.mcp_server_problems)
        # The agent form's tool checkboxes.
        agents.add_choices("TOOLS", tool_choices)

        # Remote MCP servers: their tools a tool source of the registry, the servers the agent
        # form's list (mcp/tools.py).
        from .mcp import tools as mcp_tools

        mcp_tools.connect()

        post_delete.connect(remote_delete, sender=Attachment, dispatch_uid="ahentic_remote_file")
        # The cached agent permission answers, dropped when a user's grants change.
        connect_invalidation()

        # The mails a user gets while away (approval waiting, scheduled run ended).
        from .notifications import services as notifications

        notifications.connect()

        # Each django-q2 worker process watches for runs whose worker died (recovery.py).
        from django_q.signals import post_spawn

        from .control.recovery import start_watch

        post_spawn.connect(start_watch, dispatch_uid="ahentic_lease_watch")

        # Outbound webhooks: a receiver per public signal writes delivery rows and enqueues.
        from .webhooks import events as webhook_events

        webhook_events.connect()
        # A scheduled run's log row ends when its run does (the tick settles it otherwise).
        # These receivers read nothing of the session's row: they hear the signals by its key.
        from .schedules.services import on_run_finished
        from .signals import on_session_key, run_finished, schedule_run_finished

        on_session_key(run_finished, on_run_finished)

        # OpenTelemetry: the approvals waiting, counted when a metric reader collects; the
        # runs and the schedule firings by outcome.
        from sessions_app.models import Session

        from . import telemetry

        telemetry.count_approvals_with(
            lambda: Session.objects.filter(status=Session.Status.AWAITING_HUMAN).count()
        )
        on_session_key(run_finished, telemetry.on_run_finished)
        on_session_key(schedule_run_finished, telemetry.on_schedule_run_finished)


def tool_choices() -> list[tuple[str, str]]:
    """(name, label) of every registered tool, for the agent form's checkboxes."""
    from .tools import all_tools

    return [(tool.name, str(tool.human_label)) for tool in all_tools()]
