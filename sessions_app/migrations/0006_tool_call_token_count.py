"""A tool call's ``token_count`` becomes the size of the tool_use block a request carries (its
name and input), so the context window sums stored counts instead of serializing every call's
input on every step. Existing tool calls are recounted in batches."""

from django.db import migrations

from sessions_app.tokens import tool_use_tokens

BATCH = 2000


def recount_tool_calls(apps, schema_editor):
    Event = apps.get_model("sessions_app", "Event")
    calls = Event.objects.filter(kind="tool_call").only("id", "payload", "token_count")
    changed = []
    for event in calls.iterator(chunk_size=BATCH):
        payload = event.payload or {}
        count = tool_use_tokens(payload.get("tool"), payload.get("input") or {})
        if count != event.token_count:
            event.token_count = count
            changed.append(event)
        if len(changed) >= BATCH:
            Event.objects.bulk_update(changed, ["token_count"])
            changed = []
    Event.objects.bulk_update(changed, ["token_count"])


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0005_live_text")]

    operations = [migrations.RunPython(recount_tool_calls, migrations.RunPython.noop)]
