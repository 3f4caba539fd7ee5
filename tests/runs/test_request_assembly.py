"""A step assembles its request in one walk of the window: the blocks go to the SDK as plain
JSON data (the SDK copies a body before it sends it, and a dict subclass takes its slow path),
the checks of the whole request (the API's limits on images and inline files, the Files API's
beta header) read what that walk noted instead of walking the request again, and the estimate
the step records is the estimate of the body the model received, images past a limit
replaced by notes included. The model is the strict local Messages API, through the real SDK."""

from __future__ import annotations

from unittest import mock

import pytest

from orchestrator_app import llm as seam
from orchestrator_app.loop import context, prompt
from orchestrator_app.testing.localapi import text_reply, tool_call, tool_reply
from sessions_app import attachments as attachment_store
from sessions_app import media, services
from sessions_app.conf import ahentic_settings
from sessions_app.models import TraceEvent
from tests.support.api import post
from tests.support.attachment_files import png
from tests.support.attachments import upload_multipart
from tests.support.model import model_requests

pytestmark = pytest.mark.usefixtures("llm_strict")


def seed_history(session, pairs: int) -> None:
    """``pairs`` earlier exchanges, each a question, a tool call, its answer and a reply."""
    items = []
    for i in range(pairs):
        call_id = f"toolu_seed_{i}"
        items += [
            {"kind": "user_message", "content": f"Question {i}"},
            {
                "kind": "tool_call",
                "content": '{"text": "x"}',
                "payload": {"tool": "echo", "input": {"text": f"x{i}"}},
                "tool_use_id": call_id,
            },
            {
                "kind": "tool_response",
                "content": f"echo x{i}",
                "payload": {"tool": "echo", "ok": True},
                "tool_use_id": call_id,
            },
            {"kind": "agent_message", "content": f"Answer {i}"},
        ]
    services.events_append(session_id=session.pk, items=items)


def plain_json_types(value, path="messages") -> list[str]:
    """The places in ``value`` holding a container that is not exactly a dict or a list."""
    if type(value) is dict:
        return [p for k, v in value.items() for p in plain_json_types(v, f"{path}.{k}")]
    if type(value) is list:
        return [p for i, v in enumerate(value) for p in plain_json_types(v, f"{path}[{i}]")]
    if isinstance(value, (dict, list, tuple)):
        return [f"{path}: {type(value).__name__}"]
    return []


def test_a_step_hands_the_sdk_its_messages_as_plain_json_data(
    owner_client, session, llm, tool_calls, run_tasks
):
    seed_history(session, 5)
    llm.enqueue(tool_reply(tool_call("echo", {"text": "new"})), text_reply("Done."))
    sent = []
    call_model = seam.call_model

    def recording(**kwargs):
        sent.append(kwargs["messages"])
        return call_model(**kwargs)

    with mock.patch.object(seam, "call_model", recording):
        response = run_tasks(post, owner_client, session, "messages", {"content": "Echo new"})
    assert response.status_code == 202, response.content

    assert len(sent) == 2
    for messages in sent:
        assert plain_json_types(messages) == []
    received = [e["json"]["messages"] for e in model_requests(llm, ahentic_settings.MODEL)]
    assert received == sent  # and the model received them as they were handed over


def test_a_step_walks_its_window_once(owner_client, session, llm, tool_calls, run_tasks):
    """Without images or documents in the window nothing looks the request over again: the
    API's limits are not counted and the Files API's header is decided by the walk."""
    seed_history(session, 10)
    llm.enqueue(tool_reply(tool_call("echo", {"text": "new"})), text_reply("Done."))
    whole = []
    build_messages = prompt.build_messages

    def counted(events, session_id, **kwargs):
        if len(events) >= 40:  # the whole window (a prediction builds only its last turns)
            whole.append(len(events))
        return build_messages(events, session_id, **kwargs)

    with (
        mock.patch.object(prompt, "build_messages", counted),
        mock.patch.object(
            attachment_store, "within_request_limits", wraps=attachment_store.within_request_limits
        ) as limits,
        mock.patch.object(seam, "uses_files", wraps=seam.uses_files) as files,
    ):
        response = run_tasks(post, owner_client, session, "messages", {"content": "Echo new"})
    assert response.status_code == 202, response.content

    assert len(model_requests(llm, ahentic_settings.MODEL)) == 2
    assert len(whole) == 2  # one walk of the whole window per step
    assert limits.call_count == 0
    assert files.call_count == 0
    last = model_requests(llm, ahentic_settings.MODEL)[-1]
    assert "anthropic-beta" not in last["headers"]
    assert len(last["json"]["messages"]) >= 40


def test_the_recorded_estimate_is_the_estimate_of_the_body_sent_when_images_are_noted(
    owner_client, session, llm, run_tasks, monkeypatch
):
    """Past the images a request may carry, the oldest are replaced by notes as the request is
    built: the step's estimate (its trace and contextUsage) counts the notes, not the images."""
    monkeypatch.setattr(media, "API_MAX_IMAGES", 2)
    for turn in range(2):
        response = upload_multipart(
            owner_client, session, *[(f"{turn}-{n}.png", png(3, 2 + n)) for n in range(2)]
        )
        assert response.status_code == 201, response.content
        ids = [item["id"] for item in response.json()["attachments"]]
        llm.enqueue(text_reply(f"Seen {turn}."))
        response = run_tasks(
            post,
            owner_client,
            session,
            "messages",
            {"content": f"Look {turn}", "attachments": ids},
        )
        assert response.status_code == 202, response.content

    body = model_requests(llm, ahentic_settings.MODEL)[-1]["json"]
    first = body["messages"][0]["content"]
    assert [b["type"] for b in first[:2]] == ["text", "text"]  # the oldest two are notes
    assert "a request carries at most 2 images" in first[0]["text"]
    estimated = (
        TraceEvent.objects.filter(session=session, type="llm_request")
        .order_by("-seq")
        .values_list("data", flat=True)
        .first()["estimated_tokens"]
    )
    assert estimated == sum(context.buckets(body).values())


def chat(owner_client, session, llm, run_tasks) -> list[dict]:
    """Two messages of tool steps (a turn of two calls among them) after a seeded history;
    the request bodies the model received."""
    seed_history(session, 6)
    llm.enqueue(
        tool_reply(tool_call("echo", {"text": "a"}, id="toolu_a")),
        tool_reply(
            tool_call("echo", {"text": "b"}, id="toolu_b"),
            tool_call("echo", {"text": "c"}, id="toolu_c"),
        ),
        text_reply("Done."),
        tool_reply(tool_call("echo", {"text": "d"}, id="toolu_d")),
        text_reply("Again."),
    )
    for content in ("Echo three words", "Once more"):
        response = run_tasks(post, owner_client, session, "messages", {"content": content})
        assert response.status_code == 202, response.content
    return [e["json"] for e in model_requests(llm, ahentic_settings.MODEL)]


def test_a_window_built_on_the_kept_prefix_is_the_window_built_whole(
    owner, owner_client, llm, tool_calls, run_tasks
):
    """A step's build starts after the messages this process built of the same rows at the
    step before; the requests (and their estimates) are those a build from the first event
    sends."""
    from tests.support.factories import SessionFactory

    found = []
    find = prompt.prefixes.find

    def recording(session_id, events):
        prefix = find(session_id, events)
        found.append(prefix is not None)
        return prefix

    with mock.patch.object(prompt.prefixes, "find", recording):
        kept = chat(owner_client, SessionFactory(owner=owner), llm, run_tasks)
    assert any(found)  # the later steps started after a kept prefix
    estimates = list(
        TraceEvent.objects.filter(type="llm_request")
        .order_by("session_id", "seq")
        .values_list("data", flat=True)
    )
    llm.reset()
    TraceEvent.objects.all().delete()
    with mock.patch.object(prompt.prefixes, "find", return_value=None):
        whole = chat(owner_client, SessionFactory(owner=owner), llm, run_tasks)
    assert len(kept) == len(whole) == 5
    assert kept == whole
    assert [d["estimated_tokens"] for d in estimates] == [
        d["estimated_tokens"]
        for d in TraceEvent.objects.filter(type="llm_request")
        .order_by("seq")
        .values_list("data", flat=True)
    ]
