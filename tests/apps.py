from django.apps import AppConfig


class AhenticTestsConfig(AppConfig):
    """Installs ``tests`` as an app so tool discovery imports ``tests.ahentic_tools``.

    That is how the test tools reach every process that runs steps: this test process and a
    real ``qcluster`` worker started by the integration tests (tests.settings_worker).
    """

    name = "tests"
    label = "ahentic_tests"
    default_auto_field = "django.db.models.BigAutoField"
