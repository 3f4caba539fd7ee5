import json
from collections import deque
import pytest
from django.conf import settings as dj
from orchestrator_app import context, localapi
from orchestrator_app.localapi import text_reply, tool_call, tool_reply
from sessions_app.models import Session, Snapshot
from .conftest import payload_of, session_url, trace_types

pytestmark = pytest.mark.usefixtures("llm_strict")

def test_explore(owner_client, session, llm, run_tasks, settings):
    settings.AHENTIC = {**settings.AHENTIC, "CONTEXT_BUDGET_TOKENS": 4000, "CONTEXT_EVICT_TO": 0.66, "MAX_STEPS_PER_RUN": 40}
    brain_model = "claude-haiku-5-5"
    main = deque()
    main.append(tool_reply(
        tool_call("update_plan", {"title": "Research", "steps": [{"id": "s1", "content": "Look up", "status": "in_progress"}, {"id": "s2", "content": "Compare", "status": "pending"}, {"id": "s3", "content": "Report", "status": "pending"}]}),
        tool_call("stage_artifact", {"key": "notes", "kind": "markdown", "title": "Notes", "payload": {"content": "# Notes\nSome notes."}}),
    ))
    for i in range(32):
        main.append(tool_reply(tool_call("echo", {"text": f"fact {i:02d} " * 60})))
    main.append(text_reply("All done."))
    n = [0]
    def responder(body):
        if body["model"] == brain_model:
            n[0] += 1
            return text_reply(f"Memory note {n[0]}.")
        return main.popleft()
    llm.responder = responder
    r = run_tasks(owner_client.post, session_url(session, "messages"), {"content": "Research thirty topics"}, format="json")
    assert r.status_code == 202
    body = payload_of(owner_client, session)
    print(body["status"], body["lastErrorCode"], body["lastError"], body["contextUsage"])
    reqs = [e for e in llm.requests if e["path"] == "/v1/messages"]
    for e in reqs:
        u = e["response"]["usage"]
        j = e["json"]
        sysm = " | ".join(b["text"][:40].replace("\n"," ") for b in j["system"])
        ctx = sum(1 for m in j["messages"] for b in m["content"] if b.get("type")=="text" and b["text"].startswith("[Context"))
        print(j["model"][:12], u, context.estimate(j), len(j["messages"]), "ctx", ctx, sysm[:200] if "Memory" in sysm else "")
    print(trace_types(owner_client, session).count("context_compact"))
    print(list(Snapshot.objects.values_list("level", "from_event_id", "to_event_id", "text")))
