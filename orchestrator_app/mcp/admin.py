"""MCP servers in the admin: staff register a server, set the site's token for it, enable
its tools and choose each tool's policy; "Refresh tools" lists them from the server now.
Credentials are listed (never their secrets: ``hint`` only) and may be revoked.
"""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.utils.html import escape

from sessions_app.admin.base import ReadOnlyAdmin, UsernameColumn

from ..errors import AhenticError
from ..models import McpCredential, McpServer, McpTool
from . import credentials
from . import tools as mcp_tools
from .client import url_problem


class McpServerForm(forms.ModelForm):
    url = forms.URLField(
        max_length=500,
        assume_scheme="https",
        help_text=McpServer._meta.get_field("url").help_text,
    )
    site_token = forms.CharField(
        required=False,
        strip=True,
        widget=forms.PasswordInput(render_value=False),
        help_text='For authentication "site": the bearer token every call sends. Leave it '
        "empty to keep the current one; it is stored encrypted and never shown again.",
    )

    class Meta:
        model = McpServer
        fields = [
            "name",
            "slug",
            "url",
            "active",
            "auth",
            "readonly_default_allow",
            "timeout_s",
            "oauth_client_id",
        ]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # The admin renders help text as HTML: the model's "mcp__<slug>__<tool>" would lose
        # "<slug>" and "<tool>" as unknown tags.
        self.fields["slug"].help_text = escape(McpServer._meta.get_field("slug").help_text)
        # The token in use (its hint only) is said here, under the one "Site token" field.
        found = (
            McpCredential.objects.filter(
                server=self.instance, user__isnull=True, revoked_at__isnull=True
            ).first()
            if self.instance.pk
            else None
        )
        if found is not None:
            current = f" The current one ends {found.hint}."
            self.fields["site_token"].help_text += escape(current)

    def clean_url(self):
        url = self.cleaned_data["url"]
        problem = url_problem(url)
        if problem:
            raise forms.ValidationError(problem)
        return url


class McpToolInline(admin.TabularInline):
    model = McpTool
    extra = 0
    fields = ["name", "read_only", "enabled", "policy"]
    readonly_fields = ["name", "read_only"]
    can_delete = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False  # rows come from the server's list ("Refresh tools")

    @admin.display(description="readOnlyHint", boolean=True)
    def read_only(self, obj: McpTool) -> bool | None:
        listed = {
            mcp_tools.setting_name(t.get("name") or ""): t for t in obj.server.tool_list or []
        }
        item = listed.get(obj.name)
        return None if item is None else bool(item.get("readOnly"))


@admin.action(description="Refresh tools (list them from the server now)")
def refresh_tools(model_admin, request, queryset):
    for server in queryset:
        problem = mcp_tools.tools_refresh(server, user=request.user)
        if problem:
            model_admin.message_user(request, f"{server.name}: {problem}", messages.ERROR)
        else:
            count = len(server.tool_list)
            model_admin.message_user(request, f"{server.name}: {count} tools listed.")


@admin.register(McpServer)
class McpServerAdmin(admin.ModelAdmin):
    form = McpServerForm
    list_display = ["name", "slug", "url", "auth", "active", "tool_count", "tools_fetched_at"]
    list_filter = ["active", "auth"]
    search_fields = ["name", "slug", "url"]
    prepopulated_fields = {"slug": ["name"]}
    readonly_fields = ["tools_fetched_at", "tools_error"]
    inlines = [McpToolInline]
    actions = [refresh_tools]
    fieldsets = [
        (None, {"fields": ["name", "slug", "url", "active", "timeout_s"]}),
        (
            "Authentication",
            {"fields": ["auth", "site_token", "oauth_client_id"]},
        ),
        ("Tools", {"fields": ["readonly_default_allow", "tools_fetched_at", "tools_error"]}),
    ]

    @admin.display(description="tools")
    def tool_count(self, obj: McpServer) -> int:
        return len(obj.tool_list or [])

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        token = form.cleaned_data.get("site_token")
        if token:
            try:
                credentials.bearer_save(server=obj, user=None, token=token)
            except AhenticError as exc:
                self.message_user(
                    request, f"The site token was not saved: {exc.detail}", messages.ERROR
                )


@admin.action(description="Revoke the selected credentials")
def revoke_credentials(model_admin, request, queryset):
    done = 0
    for credential in queryset.filter(revoked_at__isnull=True).select_related("server", "user"):
        done += credentials.revoke(server=credential.server, user=credential.user)
    model_admin.message_user(request, f"{done} revoked.")


@admin.register(McpCredential)
class McpCredentialAdmin(ReadOnlyAdmin):
    """Secrets never appear: the list and the detail show the token's hint only."""

    list_display = [
        "server",
        "user_name",
        "kind",
        "hint",
        "expires_at",
        "last_used_at",
        "revoked_at",
    ]
    list_filter = ["server", "kind"]
    user_relations = ["user"]
    list_select_related = ["server", "user"]
    fields = [
        ("server", "user"),
        ("kind", "hint"),
        ("expires_at", "scope"),
        ("created_at", "last_used_at", "revoked_at"),
    ]
    actions = [revoke_credentials]
    user_name = UsernameColumn("user")

    def has_change_permission(self, request, obj=None) -> bool:
        # The revoke action needs it; every field stays read-only (ReadOnlyAdmin).
        return admin.ModelAdmin.has_change_permission(self, request, obj)
