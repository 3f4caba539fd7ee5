"""The feature wings' django-q2 entry points moved out of ``orchestrator_app.tasks``: the
schedules that name them (the every-minute sweeps and the one-off approval mails waiting) are
rewritten to the new paths, and back on reversal. No table changes."""

from django.db import migrations

MOVED = {
    "orchestrator_app.tasks.schedule_tick": "orchestrator_app.schedules.tasks.schedule_tick",
    "orchestrator_app.tasks.deliver_webhook": "orchestrator_app.webhooks.tasks.deliver_webhook",
    "orchestrator_app.tasks.deliver_due_webhooks": (
        "orchestrator_app.webhooks.tasks.deliver_due_webhooks"
    ),
    "orchestrator_app.tasks.notify_approval": "orchestrator_app.notifications.tasks.notify_approval",
    "orchestrator_app.tasks.notify_schedule_run": (
        "orchestrator_app.notifications.tasks.notify_schedule_run"
    ),
}


def rewrite(apps, pairs):
    Schedule = apps.get_model("django_q", "Schedule")
    for old, new in pairs.items():
        Schedule.objects.filter(func=old).update(func=new)


def forwards(apps, schema_editor):
    rewrite(apps, MOVED)


def backwards(apps, schema_editor):
    rewrite(apps, {new: old for old, new in MOVED.items()})


class Migration(migrations.Migration):
    dependencies = [
        ("orchestrator_app", "0012_webhook_secret_sealed"),
        ("django_q", "0018_task_success_index"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
