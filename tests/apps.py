from django.apps import AppConfig


class AhenticTestsConfig(AppConfig):
    """Installs ``tests`` as an app so tool discovery imports ``tests.ahentic_tools``.

    That is how the test tools reach every process that runs steps: this test process and a
    real ``qcluster`` worker started by the integration tests (tests.settings_worker).
    """

    name = "tests"
    label = "ahentic_tests"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        import os

        path = os.environ.get("AHENTIC_TEST_CONNECTIONS_LOG")
        if path:
            # A real worker (tests/settings_worker.py) writes a line naming the thread of every
            # database connection it opens (Django's ``connection_created``).
            import threading

            from django.db.backends.signals import connection_created

            def opened(sender, connection, **kwargs):
                with open(path, "a") as log:
                    log.write(f"{threading.current_thread().name}\n")

            connection_created.connect(opened, weak=False, dispatch_uid="ahentic_test_connections")
