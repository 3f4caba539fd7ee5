"""The artifact store (``artifacts_app.store``): keys, kinds, stage modes, caps and notes.

These are the store's own rules, tested below the HTTP API; how the agent reaches them
(``stage_artifact``, ``from_memory``) is covered end to end in ``test_artifacts_flow.py``.
"""

import pytest

from artifacts_app import store
from artifacts_app.models import Artifact
from sessions_app.models import Event

CHUNK_ONE = "## Beans\nBuy whole beans and grind them just before brewing."
CHUNK_TWO = "## Water\nUse filtered water just off the boil, around 94 degrees."


def stage(session, key="article_draft", kind="markdown", payload=None, **options):
    if payload is None:
        payload = {"content": CHUNK_ONE}
    return store.stage(session_id=session.pk, key=key, kind=kind, payload=payload, **options)


def error_code(fn, *args, **kwargs) -> str:
    with pytest.raises(store.ArtifactError) as caught:
        fn(*args, **kwargs)
    return caught.value.code


def notes(session) -> list[str]:
    return list(
        Event.objects.filter(session_id=session.pk, kind=Event.Kind.SYSTEM_MESSAGE)
        .order_by("seq")
        .values_list("content", flat=True)
    )


def set_ahentic(settings, **values):
    settings.AHENTIC = {**settings.AHENTIC, **values}


# --- keys ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw, key",
    [
        ("Article Draft!", "articledraft"),
        ("  section_2 ", "section_2"),
        ("Hero-Image.v2", "hero-imagev2"),
        ("x" * 100, "x" * 64),
    ],
)
def test_keys_are_sanitized_to_lowercase_slug_characters_of_at_most_64(raw, key):
    assert store.sanitize_key(raw) == key


@pytest.mark.parametrize("raw", ["", "   ", "!!!", "ÄÖÜ", None])
def test_a_key_that_sanitizes_to_nothing_is_invalid(raw):
    assert error_code(store.sanitize_key, raw) == "artifact_invalid_key"


def test_staging_stores_the_sanitized_key(session):
    artifact = stage(session, key="Article Draft!")

    assert artifact.key == "articledraft"
    assert store.get(session.pk, "ARTICLEDRAFT").pk == artifact.pk


# --- kinds and payload normalization ---------------------------------------------------------------


@pytest.mark.parametrize(
    "kind, payload, stored",
    [
        ("markdown", {"content": "# Hi"}, {"content": "# Hi"}),
        ("html", "<p>Hi</p>", {"content": "<p>Hi</p>"}),
        ("post_content", {"content": "Body"}, {"content": "Body"}),
        (
            "blocks",
            {"blocks": [{"name": "core/paragraph"}]},
            {"blocks": [{"name": "core/paragraph"}]},
        ),
        ("blocks", [{"name": "core/paragraph"}], {"blocks": [{"name": "core/paragraph"}]}),
        ("blocks", '[{"name": "core/quote"}]', {"blocks": [{"name": "core/quote"}]}),
        ("json", {"rows": [1, 2]}, {"rows": [1, 2]}),
        ("json", [], []),
        ("json", 0, 0),
        ("json", False, False),
        ("json", "", ""),
    ],
)
def test_each_kind_stores_its_payload_in_one_shape(kind, payload, stored):
    assert store.normalize_payload(kind, payload) == stored


@pytest.mark.parametrize(
    "kind, payload, code",
    [
        ("blocks", {"blocks": []}, "artifact_invalid_payload"),
        ("blocks", [], "artifact_invalid_payload"),
        ("blocks", {"content": "not blocks"}, "artifact_invalid_payload"),
        ("blocks", ["core/paragraph"], "artifact_invalid_payload"),
        ("blocks", "not json", "artifact_invalid_payload"),
        ("markdown", {"content": ""}, "artifact_empty"),
        ("markdown", "   \n ", "artifact_empty"),
        ("html", None, "artifact_empty"),
        ("post_content", {"content": 42}, "artifact_empty"),
        ("json", None, "artifact_empty"),
        ("image", {"path": "/tmp/x.png"}, "artifact_invalid_kind"),
    ],
)
def test_an_empty_or_malformed_payload_is_refused(kind, payload, code):
    assert error_code(store.normalize_payload, kind, payload) == code


def test_a_refused_payload_stores_nothing_and_leaves_no_note(session):
    assert (
        error_code(stage, session, kind="blocks", payload={"blocks": []})
        == "artifact_invalid_payload"
    )

    assert not Artifact.objects.filter(session=session).exists()
    assert notes(session) == []


# --- stage modes -------------------------------------------------------------------------------------


def test_chunks_appended_while_drafting_join_with_a_blank_line(session):
    first = stage(session, payload={"content": CHUNK_ONE}, mode="append", complete=False)
    assert first.status == "drafting"

    second = stage(session, payload={"content": CHUNK_TWO}, mode="append", complete=False)

    assert second.status == "drafting"
    assert second.payload == {"content": f"{CHUNK_ONE}\n\n{CHUNK_TWO}"}
    assert second.bytes == store.encoded_bytes(second.payload)


def test_finalizing_a_draft_without_a_payload_keeps_its_body(session):
    stage(session, payload={"content": CHUNK_ONE}, mode="append", complete=False)
    stage(session, payload={"content": CHUNK_TWO}, mode="append", complete=False)

    artifact = store.stage(
        session_id=session.pk, key="article_draft", kind="markdown", mode="append", complete=True
    )

    assert artifact.status == "ready"
    assert artifact.payload == {"content": f"{CHUNK_ONE}\n\n{CHUNK_TWO}"}
    assert artifact.bytes == store.encoded_bytes(artifact.payload)


def test_finalizing_is_only_for_drafts(session):
    stage(session)  # ready

    code = error_code(
        store.stage, session_id=session.pk, key="article_draft", kind="markdown", mode="append"
    )

    assert code == "artifact_empty"
    assert Artifact.objects.get(session=session).payload == {"content": CHUNK_ONE}


def test_block_chunks_concatenate_and_count_nested_blocks(session):
    heading = {"name": "core/heading", "attributes": {"content": "<b>Coffee</b> at home"}}
    group = {
        "name": "core/group",
        "innerBlocks": [{"name": "core/paragraph"}, {"name": "core/image"}],
    }
    stage(session, kind="blocks", payload={"blocks": [heading]}, mode="append", complete=False)

    artifact = stage(session, kind="blocks", payload=[group], mode="append", complete=True)

    assert artifact.payload == {"blocks": [heading, group]}
    assert artifact.block_count == 4
    assert artifact.title == "Coffee at home"  # from the first heading, tags stripped


@pytest.mark.parametrize("status", ["ready", "applied", "stale"])
def test_append_on_a_finished_item_replaces_it(session, status):
    stage(session, payload={"content": CHUNK_ONE}, title="Coffee")
    Artifact.objects.filter(session=session).update(status=status)

    artifact = stage(session, payload={"content": CHUNK_TWO}, mode="append")

    assert artifact.payload == {"content": CHUNK_TWO}
    assert artifact.status == "ready"
    assert artifact.title == "Coffee"  # kept when the rewrite gives none


def test_replace_rewrites_a_draft_and_its_status(session):
    stage(session, payload={"content": CHUNK_ONE}, mode="append", complete=False)

    artifact = stage(session, payload={"content": CHUNK_TWO}, title="Second take")

    assert (artifact.payload, artifact.status, artifact.title) == (
        {"content": CHUNK_TWO},
        "ready",
        "Second take",
    )


def test_appending_another_kind_to_a_draft_is_a_kind_mismatch(session):
    stage(session, payload={"content": CHUNK_ONE}, mode="append", complete=False)

    code = error_code(stage, session, kind="html", payload={"content": "<p>x</p>"}, mode="append")

    assert code == "artifact_kind_mismatch"
    artifact = Artifact.objects.get(session=session)
    assert (artifact.kind, artifact.status, artifact.payload) == (
        "markdown",
        "drafting",
        {"content": CHUNK_ONE},
    )


def test_json_drafts_cannot_be_appended_to(session):
    stage(session, key="table", kind="json", payload={"rows": [1]}, mode="append", complete=False)

    code = error_code(
        stage, session, key="table", kind="json", payload={"rows": [2]}, mode="append"
    )

    assert code == "artifact_append_unsupported"
    assert Artifact.objects.get(session=session).payload == {"rows": [1]}


def test_an_unknown_mode_is_refused(session):
    assert error_code(stage, session, mode="prepend") == "artifact_invalid_mode"


# --- caps and placeholders ----------------------------------------------------------------------


def test_a_payload_over_the_byte_cap_is_too_large(session, settings):
    set_ahentic(settings, ARTIFACT_MAX_BYTES=100)

    assert error_code(stage, session, payload={"content": "x" * 200}) == "artifact_too_large"
    assert not Artifact.objects.filter(session=session).exists()


def test_appending_past_the_byte_cap_is_too_large_and_keeps_the_draft(session, settings):
    set_ahentic(settings, ARTIFACT_MAX_BYTES=100)
    stage(session, payload={"content": "a" * 60}, mode="append", complete=False)

    code = error_code(stage, session, payload={"content": "b" * 60}, mode="append", complete=False)

    assert code == "artifact_too_large"
    assert Artifact.objects.get(session=session).payload == {"content": "a" * 60}


def test_the_byte_cap_counts_encoded_utf8_json(session, settings):
    body = {"content": "é" * 40}  # 80 bytes of UTF-8 plus {"content":""}
    set_ahentic(settings, ARTIFACT_MAX_BYTES=store.encoded_bytes(body))

    assert stage(session, payload=body).bytes == 94
    set_ahentic(settings, ARTIFACT_MAX_BYTES=93)
    assert error_code(stage, session, payload=body) == "artifact_too_large"


def test_a_new_key_beyond_the_item_cap_is_refused_but_existing_keys_can_be_restaged(session):
    for n in range(10):
        stage(session, key=f"part_{n}", payload={"content": f"Part {n}"})

    assert error_code(stage, session, key="part_10") == "artifact_limit"
    assert stage(session, key="part_3", payload={"content": "Part 3, revised"}).status == "ready"
    assert Artifact.objects.filter(session=session).count() == 10


def test_the_item_cap_is_per_session(session, owner):
    from tests.support.factories import SessionFactory

    other_session = SessionFactory(owner=owner)
    for n in range(10):
        stage(other_session, key=f"part_{n}")

    assert stage(session, key="part_0").status == "ready"


@pytest.mark.parametrize(
    "kind, payload",
    [
        ("markdown", {"content": "[full article]"}),
        ("html", {"content": "<h1>Coffee</h1>\n[Full article text here]"}),
        ("post_content", {"content": "The complete article will be provided in the next step."}),
        ("markdown", {"content": "Content will be added later."}),
        ("markdown", {"content": "..."}),
        ("blocks", {"blocks": [{"name": "core/paragraph", "attributes": {"content": "TBD"}}]}),
        (
            "blocks",
            {
                "blocks": [
                    {
                        "name": "core/group",
                        "innerBlocks": [
                            {
                                "name": "core/quote",
                                "attributes": {"citation": "[rest of the article]"},
                            }
                        ],
                    }
                ]
            },
        ),
    ],
)
def test_placeholder_text_is_refused(session, kind, payload):
    assert error_code(stage, session, kind=kind, payload=payload) == "artifact_placeholder_content"
    assert not Artifact.objects.filter(session=session).exists()


def test_prose_that_merely_mentions_articles_is_not_a_placeholder(session):
    text = "This article will be useful: the full article covers grinders in depth."

    assert stage(session, payload={"content": text}).payload == {"content": text}


# --- notes in the transcript: every write, never the body -------------------------------------------


def test_every_write_leaves_a_short_note_without_the_body(session):
    stage(session, payload={"content": CHUNK_ONE}, mode="append", complete=False, title="Coffee")
    stage(session, payload={"content": CHUNK_TWO}, mode="append", complete=False)
    store.stage(session_id=session.pk, key="article_draft", kind="markdown", mode="append")
    store.mark_applied(session.pk, "article_draft")
    store.set_status(session.pk, "article_draft", "stale")
    store.delete(session.pk, "article_draft")

    written = notes(session)
    assert len(written) == 6
    assert written[0].startswith("Artifact article_draft staged: article_draft: drafting")
    assert written[1].startswith("Artifact article_draft appended to: ")
    assert "ready" in written[2]
    assert written[3:] == [
        "Artifact article_draft applied.",
        "Artifact article_draft marked stale.",
        "Artifact article_draft deleted.",
    ]
    for note in written:
        assert "Beans" not in note and "Water" not in note
        assert len(note) < 200
    kinds = Event.objects.filter(session_id=session.pk).values_list("kind", flat=True)
    assert set(kinds) == {Event.Kind.SYSTEM_MESSAGE}


def test_a_failed_write_leaves_no_note(session):
    stage(session)

    error_code(stage, session, payload={"content": "[full article]"})
    error_code(store.delete, session.pk, "missing")
    error_code(store.set_status, session.pk, "missing", "stale")

    assert len(notes(session)) == 1


# --- reads, pointers, apply ----------------------------------------------------------------------


def test_pointers_carry_sizes_and_status_but_never_the_body(session):
    stage(session, payload={"content": CHUNK_ONE}, title="Coffee guide")
    stage(session, key="layout", kind="blocks", payload=[{"name": "core/paragraph"}] * 3)

    text = store.prompt_pointers(session.pk)

    assert text.startswith("Session artifacts (bodies omitted):")
    size = store.encoded_bytes({"content": CHUNK_ONE})
    assert (
        f'- article_draft: ready · markdown · "Coffee guide" · {size} bytes · staged step 0' in text
    )
    assert "- layout: ready · blocks · 3 blocks · staged step 0" in text
    assert "Beans" not in text
    assert store.prompt_pointers(session.pk.__class__(int=0)) == ""


def test_get_and_delete_of_a_missing_key(session):
    assert error_code(store.get, session.pk, "nope") == "artifact_missing"
    assert error_code(store.delete, session.pk, "nope") == "artifact_missing"
    assert error_code(store.set_status, session.pk, "nope", "stale") == "artifact_missing"


def test_set_status_refuses_unknown_statuses(session):
    stage(session)

    assert error_code(store.set_status, session.pk, "article_draft", "published") == (
        "artifact_invalid_status"
    )


def test_artifacts_are_scoped_to_their_session(session, owner):
    from tests.support.factories import SessionFactory

    stage(session)
    other_session = SessionFactory(owner=owner)

    assert error_code(store.get, other_session.pk, "article_draft") == "artifact_missing"
    assert (
        error_code(store.check_ready, other_session.pk, "article_draft", ()) == "artifact_missing"
    )


def test_check_ready_names_the_status_of_an_unfinished_draft(session):
    stage(session, mode="append", complete=False)

    with pytest.raises(store.ArtifactError) as caught:
        store.check_ready(session.pk, "article_draft", ("markdown",))

    assert caught.value.code == "artifact_not_ready"
    assert caught.value.data == {"status": "drafting"}
    assert "drafting" in caught.value.message
    assert "complete=true" in caught.value.hint


@pytest.mark.parametrize("status", ["applied", "stale", "empty"])
def test_check_ready_refuses_items_that_are_not_ready(session, status):
    stage(session)
    Artifact.objects.filter(session=session).update(status=status)

    with pytest.raises(store.ArtifactError) as caught:
        store.check_ready(session.pk, "article_draft", ())

    assert (caught.value.code, caught.value.data) == ("artifact_not_ready", {"status": status})


def test_check_ready_refuses_a_kind_the_tool_does_not_take(session):
    stage(session, key="table", kind="json", payload={"rows": [1]})

    code = error_code(store.check_ready, session.pk, "table", ("markdown", "html"))

    assert code == "artifact_kind_mismatch"


def test_apply_from_memory_puts_the_body_in_the_field_and_wins_over_inline_content(session):
    stage(session, payload={"content": CHUNK_ONE})

    expanded, key = store.apply_from_memory(
        session.pk,
        {"title": "Coffee", "body": "inline text", "from_memory": "article_draft"},
        "body",
        ("markdown",),
    )

    assert key == "article_draft"
    assert expanded == {"title": "Coffee", "body": CHUNK_ONE}


def test_apply_from_memory_gives_blocks_as_a_list_and_json_as_is(session):
    stage(session, key="layout", kind="blocks", payload=[{"name": "core/paragraph"}])
    stage(session, key="table", kind="json", payload={"rows": [1]})

    blocks, _ = store.apply_from_memory(session.pk, {"from_memory": "layout"}, "blocks", ())
    table, _ = store.apply_from_memory(session.pk, {"from_memory": "table"}, "data", ())

    assert blocks == {"blocks": [{"name": "core/paragraph"}]}
    assert table == {"data": {"rows": [1]}}


def test_apply_from_memory_without_a_key_changes_nothing(session):
    assert store.apply_from_memory(session.pk, {"body": "x"}, "body", ()) == ({"body": "x"}, None)


def test_mark_applied_of_a_deleted_key_is_silent(session):
    store.mark_applied(session.pk, "gone")

    assert notes(session) == []


# --- auto-stage ----------------------------------------------------------------------------------


def test_auto_stage_stages_a_body_over_the_threshold_and_rewrites_the_call(session, settings):
    set_ahentic(settings, AUTO_STAGE_BYTES=50)
    body = "Long body. " * 20

    rewritten = store.auto_stage(
        session.pk, {"title": "T", "body": body}, "body", ("markdown", "html"), step=3, run=1
    )

    key = rewritten["from_memory"]
    assert key.startswith("auto_")
    assert rewritten == {"title": "T", "from_memory": key}
    artifact = Artifact.objects.get(session=session, key=key)
    assert (artifact.kind, artifact.status, artifact.source, artifact.step) == (
        "markdown",
        "ready",
        "auto_stage",
        3,
    )
    assert artifact.payload == {"content": body}


def test_auto_stage_leaves_small_bodies_and_explicit_keys_alone(session, settings):
    set_ahentic(settings, AUTO_STAGE_BYTES=50)
    small = {"title": "T", "body": "short"}
    keyed = {"title": "T", "body": "x" * 100, "from_memory": "article_draft"}

    assert store.auto_stage(session.pk, small, "body", ("markdown",), step=1, run=1) == small
    assert store.auto_stage(session.pk, keyed, "body", ("markdown",), step=1, run=1) == keyed
    assert not Artifact.objects.filter(session=session).exists()


def test_auto_stage_keeps_the_inline_body_when_staging_fails(session, settings):
    set_ahentic(settings, AUTO_STAGE_BYTES=50)
    for n in range(10):
        stage(session, key=f"part_{n}")
    tool_input = {"title": "T", "body": "y" * 100}

    assert (
        store.auto_stage(session.pk, tool_input, "body", ("markdown",), step=1, run=1) == tool_input
    )
    assert Artifact.objects.filter(session=session).count() == 10
