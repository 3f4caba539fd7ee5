"""The artifact REST routes: pointers, one full item, ``?include=artifacts``, ownership."""

import pytest

from artifacts_app import store
from tests.support.api import API, session_url
from tests.support.factories import SessionFactory

ARTICLE = "## Beans\nGrind just before brewing."
POINTER_KEYS = {"key", "kind", "status", "title", "bytes", "blockCount", "step", "updatedAt"}


def stage_two(session):
    store.stage(
        session_id=session.pk, key="article_draft", kind="markdown", payload=ARTICLE, title="Coffee"
    )
    store.stage(
        session_id=session.pk,
        key="layout",
        kind="blocks",
        payload=[{"name": "core/heading", "attributes": {"content": "Coffee"}}],
        complete=False,
        step=2,
    )


def test_the_list_gives_pointers_without_bodies_oldest_first(owner_client, session):
    stage_two(session)

    response = owner_client.get(session_url(session, "artifacts"))

    assert response.status_code == 200
    artifacts = response.json()["artifacts"]
    assert [set(a) for a in artifacts] == [POINTER_KEYS, POINTER_KEYS]
    first, second = artifacts
    assert {k: first[k] for k in ("key", "kind", "status", "title", "blockCount")} == {
        "key": "article_draft",
        "kind": "markdown",
        "status": "ready",
        "title": "Coffee",
        "blockCount": 0,
    }
    assert first["bytes"] == store.encoded_bytes({"content": ARTICLE})
    assert {k: second[k] for k in ("key", "kind", "status", "blockCount", "step")} == {
        "key": "layout",
        "kind": "blocks",
        "status": "drafting",
        "blockCount": 1,
        "step": 2,
    }
    assert "Beans" not in response.content.decode()


def test_the_list_of_a_session_without_artifacts_is_empty(owner_client, session):
    response = owner_client.get(session_url(session, "artifacts") + "/")

    assert response.status_code == 200
    assert response.json() == {"artifacts": []}


def test_one_artifact_comes_whole_with_its_payload(owner_client, session):
    stage_two(session)

    response = owner_client.get(session_url(session, "artifacts/article_draft"))

    assert response.status_code == 200
    item = response.json()
    assert set(item) == POINTER_KEYS | {"payload", "source", "createdAt"}
    assert item["payload"] == {"content": ARTICLE}
    assert (item["key"], item["status"], item["source"]) == (
        "article_draft",
        "ready",
        "stage_artifact",
    )
    assert owner_client.get(session_url(session, "artifacts/layout/")).json()["payload"] == {
        "blocks": [{"name": "core/heading", "attributes": {"content": "Coffee"}}]
    }


@pytest.mark.parametrize("key", ["no_such_key", "!!!"])
def test_an_unknown_key_is_a_404_artifact_missing(owner_client, session, key):
    stage_two(session)

    response = owner_client.get(session_url(session, f"artifacts/{key}"))

    assert response.status_code == 404
    assert response.json()["code"] == "artifact_missing"


def test_another_sessions_artifact_is_missing_here(owner_client, owner, session):
    elsewhere = SessionFactory(owner=owner)
    stage_two(elsewhere)

    response = owner_client.get(session_url(session, "artifacts/article_draft"))

    assert response.status_code == 404
    assert response.json()["code"] == "artifact_missing"
    assert owner_client.get(session_url(session, "artifacts")).json() == {"artifacts": []}


# --- the session payload ---------------------------------------------------------------------------


def test_the_session_payload_lists_pointers_and_include_artifacts_adds_the_bodies(
    owner_client, session
):
    stage_two(session)

    plain = owner_client.get(session_url(session))
    full = owner_client.get(session_url(session) + "?include=artifacts")

    assert [set(a) for a in plain.json()["artifacts"]] == [POINTER_KEYS, POINTER_KEYS]
    assert [a["payload"] for a in full.json()["artifacts"]] == [
        {"content": ARTICLE},
        {"blocks": [{"name": "core/heading", "attributes": {"content": "Coffee"}}]},
    ]
    assert plain["ETag"] != full["ETag"]
    cached = owner_client.get(
        session_url(session) + "?include=artifacts", HTTP_IF_NONE_MATCH=full["ETag"]
    )
    assert cached.status_code == 304


def test_staging_an_artifact_changes_the_session_etag(owner_client, session):
    before = owner_client.get(session_url(session))

    store.stage(session_id=session.pk, key="article_draft", kind="markdown", payload=ARTICLE)

    after = owner_client.get(session_url(session), HTTP_IF_NONE_MATCH=before["ETag"])
    assert after.status_code == 200
    assert [a["key"] for a in after.json()["artifacts"]] == ["article_draft"]
    store.mark_applied(session.pk, "article_draft")
    applied = owner_client.get(session_url(session), HTTP_IF_NONE_MATCH=after["ETag"])
    assert applied.status_code == 200
    assert applied.json()["artifacts"][0]["status"] == "applied"


# --- ownership and permission ---------------------------------------------------------------------

ROUTES = ["artifacts", "artifacts/article_draft", "?include=artifacts"]


def url_for(session, route):
    return session_url(session) + route if route.startswith("?") else session_url(session, route)


@pytest.mark.parametrize("route", ROUTES)
def test_another_users_session_is_not_found(other_client, session, route):
    stage_two(session)

    response = other_client.get(url_for(session, route))

    assert response.status_code == 404
    assert response.json()["code"] == "ahentic_session_not_found"
    assert "Beans" not in response.content.decode()


@pytest.mark.parametrize("route", ROUTES)
def test_a_user_without_the_agent_permission_is_forbidden_even_on_their_own_session(
    noperm_client, noperm, route
):
    own_session = SessionFactory(owner=noperm)
    stage_two(own_session)

    response = noperm_client.get(url_for(own_session, route))

    assert response.status_code == 403
    assert "Beans" not in response.content.decode()


@pytest.mark.parametrize("route", ROUTES)
def test_an_anonymous_client_is_refused(anon_client, session, route):
    stage_two(session)

    response = anon_client.get(url_for(session, route))

    assert response.status_code in (401, 403)
    assert "Beans" not in response.content.decode()


def test_an_invalid_session_id_is_not_found(owner_client):
    response = owner_client.get(f"{API}/sessions/not-a-uuid/artifacts")

    assert response.status_code == 404
    assert response.json()["code"] == "ahentic_session_not_found"
