"""The MCP endpoint's tokens in the admin: staff list them, make one for a user (its secret is
shown once, in the message after saving) and revoke them. Only the hash is stored; the writes
go through ``mcp.tokens``."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.utils import timezone

from sessions_app.admin.base import UserColumnsAdmin, UsernameColumn

from ..models import McpToken
from . import tokens as mcp_tokens


class McpTokenAddForm(forms.ModelForm):
    class Meta:
        model = McpToken
        fields = ["user", "name", "expires_at"]

    def clean_expires_at(self):
        expires_at = self.cleaned_data.get("expires_at")
        if expires_at is not None and expires_at <= timezone.now():
            raise forms.ValidationError("An expiry must be in the future.")
        return expires_at

    def clean(self):
        cleaned = super().clean()
        user = cleaned.get("user")
        problem = mcp_tokens.limit_problem(user) if user is not None else None
        if problem:
            raise forms.ValidationError(problem, code="ahentic_mcp_token_limit")
        return cleaned


@admin.register(McpToken)
class McpTokenAdmin(UserColumnsAdmin):
    list_display = [
        "name",
        "user_name",
        "prefix",
        "created_at",
        "expires_at",
        "last_used_at",
        "revoked_at",
    ]
    list_filter = ["revoked_at", "expires_at"]
    search_fields = ["name", "prefix"]
    user_relations = ["user"]
    list_select_related = ["user"]
    raw_id_fields = ["user"]
    actions = ["revoke"]
    user_name = UsernameColumn("user")

    def get_form(self, request, obj=None, change=False, **kwargs):
        if obj is None:
            kwargs["form"] = McpTokenAddForm
        return super().get_form(request, obj, change=change, **kwargs)

    def get_fields(self, request, obj=None):
        if obj is None:
            return ["user", "name", "expires_at"]
        return [
            ("user", "name"),
            "prefix",
            ("created_at", "created_by"),
            ("expires_at", "last_used_at", "revoked_at"),
        ]

    def get_readonly_fields(self, request, obj=None):
        return [] if obj is None else self.get_fields(request, obj)

    def has_change_permission(self, request, obj=None) -> bool:
        # Nothing of a token is edited; the change page shows it (view permission suffices).
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # revoke instead: a revoked token keeps the history of its calls

    def save_model(self, request, obj, form, change) -> None:
        issued = mcp_tokens.token_create(
            user=form.cleaned_data["user"],
            name=form.cleaned_data["name"],
            expires_at=form.cleaned_data.get("expires_at"),
            created_by=request.user,
        )
        obj.pk = issued.token.pk
        obj.prefix = issued.token.prefix
        obj.token_hash = issued.token.token_hash
        obj.created_at = issued.token.created_at
        messages.warning(
            request,
            f"The token for {issued.token.user.get_username()}: {issued.secret} "
            "(copy it now: it is not shown again).",
        )

    def has_revoke_permission(self, request) -> bool:
        return admin.ModelAdmin.has_change_permission(self, request)

    @admin.action(description="Revoke the selected tokens", permissions=["revoke"])
    def revoke(self, request, queryset) -> None:
        revoked = sum(mcp_tokens.token_revoke(token=token) for token in queryset)
        self.message_user(request, f"{revoked} token(s) revoked.", messages.SUCCESS)
