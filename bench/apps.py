from django.apps import AppConfig


class NoLeaseWatchConfig(AppConfig):
    """The recovery bench's baseline: disconnects the lease watch (orchestrator_app.control.recovery)
    in the worker processes, leaving the ``ahentic_recover`` schedule alone to resume runs."""

    name = "bench"
    label = "ahentic_bench"

    def ready(self) -> None:
        from django_q.signals import post_spawn

        post_spawn.disconnect(dispatch_uid="ahentic_lease_watch")
