from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0012_session_spend_cap"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="session",
            options={
                "ordering": ["-updated_at"],
                "permissions": [
                    ("use_agent", "Can use the AI agent"),
                    ("control_runs", "Can cancel, continue and repair agent runs (admin)"),
                    ("exceed_spend_cap", "Can continue a chat past its spend cap"),
                ],
            },
        ),
    ]
