"""A user holds at most ``MCP_TOKENS_PER_USER`` live MCP tokens (not revoked, not expired):
through the API, the admin, and under concurrent requests (PostgreSQL)."""

import threading
from datetime import timedelta

import pytest
from django.core.checks import run_checks
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from orchestrator_app.models import McpToken
from tests.support.api import API

TOKENS = f"{API}/mcp-tokens"


@pytest.fixture
def cap(settings):
    def change(value):
        settings.AHENTIC = {**settings.AHENTIC, "MCP_TOKENS_PER_USER": value}

    return change


def make(client, name="t"):
    return client.post(TOKENS, {"name": name}, format="json")


def test_a_token_past_the_cap_is_refused_with_a_stable_code(owner_client, other_client, cap):
    cap(3)
    assert [make(owner_client, f"t{n}").status_code for n in range(3)] == [201] * 3

    refused = make(owner_client, "t4")

    assert refused.status_code == 409
    body = refused.json()
    assert body["code"] == "ahentic_mcp_token_limit"
    assert "at most 3 live MCP tokens" in body["detail"]
    assert McpToken.objects.filter(user__username="owner").count() == 3
    # Another user's count is their own.
    assert make(other_client).status_code == 201
    # A revoked or an expired token frees its place.
    first = McpToken.objects.filter(user__username="owner").order_by("pk").first()
    assert owner_client.delete(f"{TOKENS}/{first.pk}").status_code == 204
    assert make(owner_client, "t5").status_code == 201
    assert make(owner_client, "t6").status_code == 409
    McpToken.objects.filter(user__username="owner", name="t5").update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert make(owner_client, "t7").status_code == 201
    # None: no cap.
    cap(None)
    assert make(owner_client, "t8").status_code == 201


def test_the_admin_refuses_a_token_past_the_cap_with_a_form_error(admin_client, owner, cap):
    cap(1)
    add = "/admin/orchestrator_app/mcptoken/add/"
    form = {"user": owner.pk, "name": "Desktop", "expires_at_0": "", "expires_at_1": ""}
    assert admin_client.post(add, form).status_code == 302

    response = admin_client.post(add, {**form, "name": "Laptop"})

    assert response.status_code == 200
    assert "at most 1 live MCP token" in response.content.decode()
    assert McpToken.objects.filter(user=owner).count() == 1


@pytest.mark.parametrize("value", [0, -1, "20", 2.5, True])
def test_a_bad_cap_is_a_system_error(db, cap, value):
    cap(value)
    assert "ahentic.E050" in {m.id for m in run_checks(databases=["default"])}
    cap(20)
    assert "ahentic.E050" not in {m.id for m in run_checks(databases=["default"])}


@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="concurrent requests need PostgreSQL's row locks"
)
@pytest.mark.django_db(transaction=True)
def test_the_cap_holds_under_concurrent_requests(owner, cap):
    cap(3)
    start = threading.Barrier(8)
    statuses = []

    def one(n):
        client = APIClient()
        client.force_login(owner)
        start.wait()
        statuses.append(make(client, f"c{n}").status_code)
        connection.close()

    threads = [threading.Thread(target=one, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    assert sorted(statuses) == [201] * 3 + [409] * 5
    assert McpToken.objects.filter(user=owner).count() == 3
    connection.close()
