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
    route(rf"{SESSION}/messages", views.SessionMessagePostView, "session-messages"),
    route(
        rf"{SESSION}/pending-messages/(?P<pending_id>[^/]+)",
        views.PendingMessageView,
        "session-pending-message",
    ),
    route(rf"{SESSION}/approvals", views.SessionApprovalsView, "session-approvals"),
    route(
        rf"{SESSION}/browser-results", views.SessionBrowserResultsView, "session-browser-results"
    ),
    route(rf"{SESSION}/cancel", views.SessionCancelView, "session-cancel"),
    route(rf"{SESSION}/continue", views.SessionContinueView, "session-continue"),
    route(rf"{SESSION}/actions", views.SessionActionsView, "session-actions"),
    route(rf"{SESSION}/artifacts", views.SessionArtifactsView, "session-artifacts"),
    route(rf"{SESSION}/artifacts/(?P<key>[^/]+)", views.SessionArtifactView, "session-artifact"),
    route(rf"{SESSION}/diagnostics", views.SessionDiagnosticsView, "session-diagnostics"),
    route(r"stats/tokens", views.TokenStatsView, "stats-tokens"),
    route(r"tools", views.ToolCatalogView, "tools"),
    route(r"skills", views.SkillCatalogView, "skills"),
    route(r"workflows", views.WorkflowCatalogView, "workflows"),
]
