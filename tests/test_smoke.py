from .conftest import API


def test_it_creates_and_reads_a_session(owner_client):
    created = owner_client.post(f"{API}/sessions", {}, format="json")
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["title"] == "New Agent" and body["autoTitle"] is True
    got = owner_client.get(f"{API}/sessions/{body['id']}")
    assert got.status_code == 200
    assert got.json()["id"] == body["id"]
