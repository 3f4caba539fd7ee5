from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("orchestrator_app", "0006_schedules"),
    ]

    operations = [
        migrations.CreateModel(
            name="Spend",
            fields=[],
            options={
                "verbose_name": "spend",
                "verbose_name_plural": "spend",
                "proxy": True,
                "default_permissions": (),
                "indexes": [],
                "constraints": [],
            },
            bases=("orchestrator_app.usagerecord",),
        ),
    ]
