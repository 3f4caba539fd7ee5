"""Outbound webhooks in the admin: endpoints (a URL, the events it wants, a signing secret)
and their delivery log.

The secret is shown in full once, on the page after the endpoint is created or its secret
rotated; everywhere else (the change page) it is masked, and the list never shows it. The
actions (send a test event, re-enable, rotate the secret, retry a delivery) call the services
in ``webhooks.delivery``; the test, re-enable and rotate actions need the change permission on
endpoints, "Retry now" the change permission on deliveries (whose pages are read-only).
"""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from sessions_app.admin.base import ReadOnlyAdmin, counted, pretty_json
from sessions_app.conf import ahentic_settings

from .. import vault
from ..models import WebhookDelivery, WebhookEndpoint
from . import delivery, transport
from .events import SUBSCRIBABLE


def masked(sealed: str) -> str:
    """``whsec_…AbCd``: enough to tell two secrets apart, not to sign with."""
    try:
        secret = vault.unseal(sealed)
    except vault.VaultError:
        return "(cannot be decrypted with VAULT_KEYS)"
    return f"whsec_…{secret[-4:]}" if secret else "-"


NO_VAULT = (
    "Signing secrets are stored encrypted: set AHENTIC['VAULT_KEYS'] (a Fernet key from the "
    "environment) first."
)


class WebhookEndpointForm(forms.ModelForm):
    url = forms.URLField(label="URL", max_length=500, assume_scheme="https")
    events = forms.MultipleChoiceField(
        choices=SUBSCRIBABLE,
        widget=forms.CheckboxSelectMultiple,
        help_text="The event types POSTed to this URL.",
    )

    class Meta:
        model = WebhookEndpoint
        fields = ["name", "url", "events", "active"]

    def clean_url(self) -> str:
        url = self.cleaned_data["url"]
        problem = transport.url_problem(
            url, allow_private=bool(ahentic_settings.WEBHOOK_ALLOW_PRIVATE)
        )
        if problem:
            raise forms.ValidationError(problem, code="webhook_url")
        return url

    def clean(self):
        cleaned = super().clean()
        if self.instance.pk is None and (not vault.configured() or vault.key_problem()):
            raise forms.ValidationError(NO_VAULT, code="ahentic_vault_missing")
        return cleaned


@admin.action(description="Send a test event", permissions=["change"])
def send_test_event(model_admin, request, queryset):
    sent = [e for e in queryset if delivery.send_test_event(endpoint_id=e.pk)]
    skipped = queryset.count() - len(sent)
    if sent:
        model_admin.message_user(
            request,
            f"Sent a webhook.test event to {counted(len(sent), 'endpoint')}: see the deliveries.",
            messages.SUCCESS,
        )
    if skipped:
        model_admin.message_user(
            request,
            f"Not sent to {counted(skipped, 'disabled endpoint')}: re-enable it first.",
            messages.WARNING,
        )


@admin.action(description="Re-enable", permissions=["change"])
def reenable(model_admin, request, queryset):
    done = sum(
        delivery.endpoint_enable(endpoint_id=pk) for pk in queryset.values_list("pk", flat=True)
    )
    model_admin.message_user(
        request,
        f"Re-enabled {counted(done, 'endpoint')}; their failure counts start again at 0.",
        messages.SUCCESS,
    )


@admin.action(description="Rotate secret", permissions=["change"])
def rotate_secret(model_admin, request, queryset):
    if not vault.configured() or vault.key_problem():
        model_admin.message_user(request, NO_VAULT, messages.ERROR)
        return None
    rotated = []
    for endpoint in queryset:
        secret = delivery.secret_rotate(endpoint_id=endpoint.pk)
        if secret:
            rotated.append((endpoint, secret))
    return model_admin.secret_page(request, rotated, title="New signing secrets")


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(admin.ModelAdmin):
    form = WebhookEndpointForm
    list_display = [
        "name",
        "url",
        "events_column",
        "active",
        "consecutive_failures",
        "disabled_reason",
    ]
    list_filter = ["active"]
    search_fields = ["name", "url"]
    actions = [send_test_event, reenable, rotate_secret]
    readonly_fields = [
        "secret_column",
        "disabled_reason",
        "consecutive_failures",
        "deliveries_link",
        "created_at",
        "updated_at",
    ]

    def get_fields(self, request, obj=None):
        if obj is None:
            return ["name", "url", "events", "active"]
        return ["name", "url", "events", "active", *self.readonly_fields]

    @admin.display(description="events")
    def events_column(self, obj: WebhookEndpoint) -> str:
        return ", ".join(obj.events or []) or "-"

    @admin.display(description="signing secret")
    def secret_column(self, obj: WebhookEndpoint) -> str:
        return masked(obj.secret)

    @admin.display(description="deliveries")
    def deliveries_link(self, obj: WebhookEndpoint) -> SafeString:
        url = reverse(
            f"{self.admin_site.name}:orchestrator_app_webhookdelivery_changelist",
            current_app=self.admin_site.name,
        )
        return format_html(
            '<a href="{}?endpoint__id__exact={}">{}</a>',
            url,
            obj.pk,
            counted(obj.deliveries.count(), "delivery"),
        )

    def save_model(self, request, obj, form, change):
        if not change:
            created, obj.new_secret = delivery.endpoint_create(
                name=obj.name, url=obj.url, events=obj.events, active=obj.active
            )
            obj.pk, obj.secret, obj.created_at = created.pk, created.secret, created.created_at
            return
        # Only what the form edits: the failure count and the reason belong to the delivery
        # service, which may be writing them right now.
        edited = [f for f in form.changed_data if f in ("name", "url", "events")]
        if edited:
            obj.save(update_fields=[*edited, "updated_at"])
        if "active" in form.changed_data:
            if obj.active:
                delivery.endpoint_enable(endpoint_id=obj.pk)
            else:
                delivery.endpoint_disable(
                    endpoint_id=obj.pk, reason=f"Disabled by {request.user.get_username()}."
                )

    def response_add(self, request, obj, post_url_continue=None):
        # The one page that shows a new endpoint's secret in full.
        return self.secret_page(request, [(obj, obj.new_secret)], title="Webhook endpoint added")

    def secret_page(self, request, secrets: list, *, title: str) -> TemplateResponse:
        site = self.admin_site.name
        for endpoint, _ in secrets:
            endpoint.change_url = reverse(
                f"{site}:orchestrator_app_webhookendpoint_change",
                args=[endpoint.pk],
                current_app=site,
            )
        request.current_app = site
        return TemplateResponse(
            request,
            "admin/orchestrator_app/webhookendpoint/secret.html",
            {
                **self.admin_site.each_context(request),
                "opts": self.opts,
                "title": title,
                "secrets": secrets,
                "list_url": reverse(
                    f"{site}:orchestrator_app_webhookendpoint_changelist", current_app=site
                ),
            },
        )


@admin.action(description="Retry now", permissions=["retry"])
def retry_now(model_admin, request, queryset):
    ids = list(queryset.values_list("pk", flat=True))
    done = sum(delivery.retry_now(delivery_id=pk) for pk in ids)
    if done:
        model_admin.message_user(
            request, f"Retrying {counted(done, 'delivery')} now.", messages.SUCCESS
        )
    if done < len(ids):
        model_admin.message_user(
            request,
            f"Not retried: {counted(len(ids) - done, 'delivery')} already delivered or to a "
            "disabled endpoint.",
            messages.WARNING,
        )


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ReadOnlyAdmin):
    list_display = [
        "created_at",
        "event",
        "endpoint",
        "status",
        "attempts",
        "last_status_code",
        "next_attempt_at",
    ]
    list_filter = ["status", "event", "endpoint"]
    search_fields = ["webhook_id"]
    list_select_related = ["endpoint"]
    date_hierarchy = "created_at"
    actions = [retry_now]
    fields = [
        ("endpoint", "event", "status"),
        "webhook_id",
        ("attempts", "last_status_code", "next_attempt_at"),
        "last_error",
        "payload_json",
        ("created_at", "updated_at", "delivered_at"),
    ]

    @admin.display(description="payload")
    def payload_json(self, obj: WebhookDelivery) -> SafeString:
        return pretty_json(obj.payload)

    def has_retry_permission(self, request) -> bool:
        return request.user.has_perm("orchestrator_app.change_webhookdelivery")
