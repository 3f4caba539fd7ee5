"""The MCP endpoint's OAuth clients and the users' connections in the admin (registered from
``orchestrator_app/admin.py``). Staff approve a client that waits (``MCP_OAUTH_CLIENT_APPROVAL``)
or revoke one (every connection to it ends, its tokens are deleted at once); a user's
connection can be revoked the same way. Rows are written by ``services.py`` only."""

from __future__ import annotations

from django.contrib import admin, messages

from ..models import OAuthClient, OAuthConnection
from . import services


@admin.action(description="Approve the selected clients", permissions=["change"])
def approve(model_admin, request, queryset):
    done = sum(
        services.client_decide(review=review, status=OAuthClient.Status.APPROVED, by=request.user)
        for review in queryset
    )
    model_admin.message_user(request, f"Approved {done} client(s).", messages.SUCCESS)


@admin.action(
    description="Revoke the selected clients (their tokens stop working)", permissions=["change"]
)
def revoke(model_admin, request, queryset):
    done = sum(
        services.client_decide(review=review, status=OAuthClient.Status.REVOKED, by=request.user)
        for review in queryset
    )
    model_admin.message_user(request, f"Revoked {done} client(s).", messages.SUCCESS)


@admin.register(OAuthClient)
class OAuthClientAdmin(admin.ModelAdmin):
    list_display = ["__str__", "client_id", "source", "redirect_uris", "status", "created_at"]
    list_filter = ["status"]
    search_fields = ["application__name", "application__client_id"]
    actions = [approve, revoke]
    readonly_fields = ["application", "status", "created_at", "decided_at", "decided_by"]
    list_select_related = ["application"]

    @admin.display(description="client id")
    def client_id(self, review):
        return review.application.client_id

    @admin.display(description="registered by")
    def source(self, review):
        return review.application.get_registration_source_display()

    @admin.display(description="redirect URIs")
    def redirect_uris(self, review):
        return review.application.redirect_uris

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        # The actions need it; the form itself shows nothing to edit.
        return super().has_change_permission(request, obj)


@admin.action(description="Revoke the selected connections", permissions=["change"])
def revoke_connections(model_admin, request, queryset):
    done = sum(services.connection_revoke(connection=c) for c in queryset)
    model_admin.message_user(request, f"Revoked {done} connection(s).", messages.SUCCESS)


@admin.register(OAuthConnection)
class OAuthConnectionAdmin(admin.ModelAdmin):
    list_display = ["__str__", "user", "scope", "created_at", "revoked_at"]
    list_filter = ["revoked_at"]
    actions = [revoke_connections]
    readonly_fields = ["user", "application", "token", "scope", "created_at", "revoked_at"]
    list_select_related = ["token", "user"]

    def has_add_permission(self, request):
        return False
