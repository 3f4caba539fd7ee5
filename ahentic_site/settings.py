"""Settings of the demo site (and the base of the test settings).

Not part of the installable app: a host site copies the few lines it needs (see docs/install.md).
"""

import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("AHENTIC_VAR_DIR", BASE_DIR / "var"))

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "ahentic-demo-insecure-key-change-me")
DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.sites",
    "django.contrib.flatpages",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI's files, served locally (no CDN)
    "django_q",
    "oauth2_provider",  # the MCP endpoint's OAuth authorization server (orchestrator_app/oauth/)
    "sessions_app",
    "artifacts_app",
    "orchestrator_app",
    # The demo's own admin customizations (ahentic_site/admin.py): an app so that every process,
    # the worker included, autodiscovers them.
    "ahentic_site",
]

# drf-spectacular describes the API (orchestrator_app/api/schema.py); the demo serves a Swagger
# UI page for it at /api-docs/.
REST_FRAMEWORK = {"DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema"}
SPECTACULAR_SETTINGS = {
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
}

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # The user's language from the browser's Accept-Language (one of LANGUAGES below).
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django.contrib.flatpages.middleware.FlatpageFallbackMiddleware",
]

ROOT_URLCONF = "ahentic_site.urls"
SITE_ID = 1

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

WSGI_APPLICATION = "ahentic_site.wsgi.application"


def sqlite_database(path):
    """SQLite tuned for a web process and a worker writing at once.

    WAL lets readers run beside the writer; IMMEDIATE takes the write lock at BEGIN, so two
    writers queue on ``timeout`` instead of failing with "database is locked" mid-transaction.
    """
    return {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": path,
        "OPTIONS": {
            "transaction_mode": "IMMEDIATE",
            "timeout": 30,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        },
    }


DATABASES = {"default": sqlite_database(VAR_DIR / "demo.sqlite3")}
# Keep connections between requests and django-q2 tasks: a reconnect per task cost a third of
# the step throughput on PostgreSQL (see docs/howto/production.md).
DATABASES["default"]["CONN_MAX_AGE"] = 60
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = []
LANGUAGE_CODE = "en-us"
# The languages the app ships (README "Languages"): a German browser gets German.
LANGUAGES = [("en", "English"), ("de", "Deutsch")]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
# Where default_storage keeps attachments (never served by URL: the API's owner-only route
# reads them).
MEDIA_ROOT = VAR_DIR / "media"
# The site's own login (any user; the admin's admits staff only): the MCP endpoint's OAuth
# consent page sends the user there first.
LOGIN_URL = "/accounts/login/"
# The MCP endpoint's OAuth authorization server (docs/howto/connectors.md): django-oauth-toolkit
# configured as the endpoint needs it.
from orchestrator_app.oauth import OAUTH2_PROVIDER as _AHENTIC_OAUTH2_PROVIDER  # noqa: E402

OAUTH2_PROVIDER = {**_AHENTIC_OAUTH2_PROVIDER}

# django-q2 with the embedded ORM broker. ``timeout`` covers the worst step: a model call with
# its SDK retries (LLM_TIMEOUT_S x (LLM_MAX_RETRIES + 1)) plus tools; ``retry`` must exceed it
# or q2 re-delivers a task that is still running. Recovery of lost steps is our own code
# (leases + ahentic_recover), so a failed task is acknowledged, never retried by q2.
Q_CLUSTER = {
    "name": "ahentic",
    "orm": "default",
    "workers": 2,
    "timeout": 900,
    "retry": 960,
    "max_attempts": 1,
    "ack_failures": True,
    "catch_up": False,
    "poll": 0.25,
    "label": "Task queue",
    # The webhook deliveries' own queue (AHENTIC["WEBHOOK_CLUSTER"]): a receiver that never
    # answers holds one of these workers, never a chat's. manage.py ahentic_demo starts it;
    # elsewhere: Q_CLUSTER_NAME=ahentic_webhooks manage.py qcluster.
    "ALT_CLUSTERS": {
        "ahentic_webhooks": {"workers": 1, "timeout": 60, "retry": 90, "poll": 1},
    },
}

# The agent's mails (docs/howto/notifications.md) are printed by the demo's processes.
EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"
DEFAULT_FROM_EMAIL = "Ahentic demo <agent@localhost>"

AHENTIC = {
    "MODEL": os.environ.get("AHENTIC_MODEL", "claude-sonnet-5-5"),
    "ADMIN_SIDEBAR": True,
    # The page the links in mails open (the chat opens in its sidebar): the address the demo
    # serves (manage.py ahentic_demo --addrport sets AHENTIC_SITE_URL for its processes); unset,
    # the links use the address the chat was used on.
    "SITE_URL": os.environ.get("AHENTIC_SITE_URL", ""),
    # The agent works on flat pages, and reads groups (ahentic_site/admin.py makes them
    # read-only for the agent's requests).
    "ADMIN_TOOLS": ["flatpages.flatpage", "auth.group"],
    # The demo's webhook endpoint is this site's own receiver page (/demo/webhooks/), on
    # 127.0.0.1: a private address, refused unless allowed.
    "WEBHOOK_ALLOW_PRIVATE": True,
    "WEBHOOK_CLUSTER": "ahentic_webhooks",
    # The demo's ticket MCP server runs on http://127.0.0.1:<port> (manage.py ahentic_demo).
    "MCP_ALLOW_INSECURE_LOCAL": DEBUG,
    # Encrypts MCP credentials at rest. A real site reads its own keys from the environment
    # (Fernet.generate_key()); this fixed one is for the demo only.
    "VAULT_KEYS": [
        os.environ.get("AHENTIC_VAULT_KEY", "ZGVtby1vbmx5LXZhdWx0LWtleS1ub3Qtc2VjcmV0ISE=")
    ],
}
if os.environ.get("ANTHROPIC_API_KEY") == "offline-demo":
    # The offline demo model (manage.py ahentic_demo without a key) thinks and cites a web page.
    AHENTIC.update({"THINKING": "adaptive", "WEB_SEARCH": {"max_uses": 3}})

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {
        "ahentic": {"handlers": ["console"], "level": os.environ.get("AHENTIC_LOG", "INFO")},
    },
}

_DEMO_OTEL_CONSOLE = os.environ.get("AHENTIC_DEMO_OTEL_CONSOLE") == "1"
_DEMO_OTEL_OTLP = os.environ.get("AHENTIC_DEMO_OTEL_OTLP") == "1"
if _DEMO_OTEL_CONSOLE or _DEMO_OTEL_OTLP:
    # `AHENTIC_DEMO_OTEL_CONSOLE=1 make demo`: every span of the agent's runs is printed by the
    # process that ends it; `AHENTIC_DEMO_OTEL_OTLP=1 make demo`: every span is sent over
    # OTLP/HTTP to OTEL_EXPORTER_OTLP_ENDPOINT (http://localhost:4318 unless set), e.g. a local
    # Jaeger or Phoenix (docs/howto/observability.md). A real site configures its SDK and
    # exporter the same way, once, before it serves (the SDK comes with the dev extra, the OTLP
    # exporter with the otel extra).
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        ConsoleSpanExporter,
        SimpleSpanProcessor,
    )

    _provider = TracerProvider(resource=Resource.create({"service.name": "ahentic-demo"}))
    if _DEMO_OTEL_CONSOLE:
        _provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
    if _DEMO_OTEL_OTLP:
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError as exc:
            from django.core.exceptions import ImproperlyConfigured

            raise ImproperlyConfigured(
                "AHENTIC_DEMO_OTEL_OTLP=1 needs the OTLP exporter: pip install "
                '"django-ahentic[otel]" (or opentelemetry-exporter-otlp-proto-http)'
            ) from exc
        _provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(_provider)
