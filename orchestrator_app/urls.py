"""Mount with ``path("ahentic/v1/", include("orchestrator_app.urls"))``.

Every route answers with and without a trailing slash.
"""

from django.urls import re_path

from .api import views

SESSION = r"sessions/(?P<session_id>[^/]+)"


def route(pattern: str, view, name: str):
    return re_path(rf"^{pattern}/?$", view.as_view(), name=name)


app_name = "ahentic"
urlpatterns = [
    route(r"sessions", views.SessionListView, "sessions"),
    route(SESSION, views.SessionDetailView, "session"),
    route(rf"{SESSION}/messages", views.SessionMessagesView, "session-messages"),
    route(rf"{SESSION}/diagnostics", views.SessionDiagnosticsView, "session-diagnostics"),
    route(r"stats/tokens", views.TokenStatsView, "stats-tokens"),
]
