"""The demo's webhook receiver: what a host's receiver does, in a few lines.

``POST /demo/webhooks/`` verifies the Standard Webhooks signature and keeps the last 50
deliveries in the cache; ``GET`` on the same URL lists them (staff only). The demo command points a
webhook endpoint for every event here.

A real receiver keeps its endpoint's secret in its own settings. This one shares the demo's
database, so it verifies with the secret of each endpoint registered in the admin (the demo
has one) and shows which one signed.
"""

from __future__ import annotations

from django.contrib.admin.views.decorators import staff_member_required
from django.core.cache import cache
from django.http import HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from orchestrator_app.models import WebhookEndpoint
from orchestrator_app.vault import VaultError
from orchestrator_app.webhooks.delivery import signing_secret

CACHE_KEY = "ahentic_demo_webhooks"
KEEP = 50


@csrf_exempt  # a server posts here, with no session and no CSRF token: the signature is the check
@require_http_methods(["GET", "POST"])
def receiver(request):
    if request.method == "GET":
        return log(request)
    return receive(request)


def receive(request):
    body = request.body.decode("utf-8", "replace")
    for endpoint in WebhookEndpoint.objects.all():
        try:
            payload = Webhook(signing_secret(endpoint)).verify(body, dict(request.headers))
        except (WebhookVerificationError, VaultError):
            continue
        received = cache.get(CACHE_KEY, [])
        received.insert(
            0,
            {
                "received_at": timezone.now().isoformat(),
                "endpoint": endpoint.name,
                "webhook_id": request.headers.get("webhook-id", ""),
                "type": payload.get("type", ""),
                "data": payload.get("data", {}),
            },
        )
        cache.set(CACHE_KEY, received[:KEEP], None)
        return HttpResponse(status=204)
    return HttpResponse("Invalid signature.", status=400, content_type="text/plain")


@staff_member_required
def log(request):
    return render(request, "demo_webhooks.html", {"deliveries": cache.get(CACHE_KEY, [])})
