"""Schedule the ``ahentic_recover`` sweep (django-q2's scheduler runs at minute granularity)."""

from django.db import migrations


def create_schedule(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.update_or_create(
        name="ahentic_recover",
        defaults={
            "func": "orchestrator_app.tasks.recover",
            "schedule_type": "I",  # every `minutes`
            "minutes": 1,
            "repeats": -1,
        },
    )


def delete_schedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name="ahentic_recover").delete()


class Migration(migrations.Migration):
    dependencies = [
        ("orchestrator_app", "0001_initial"),
        ("django_q", "0018_task_success_index"),
    ]

    operations = [migrations.RunPython(create_schedule, delete_schedule)]
