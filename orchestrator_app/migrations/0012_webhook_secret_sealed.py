"""Webhook signing secrets encrypted at rest with the credential vault (``VAULT_KEYS``).

Forwards: the column widens to text and every plain secret (``whsec_...``) is sealed; the
migration stops with an error when endpoints exist and no key is configured. Backwards: every
sealed secret is opened again (the keys that sealed it are needed) and the column narrows."""

from django.db import migrations, models

PLAIN = "whsec_"


def keys_needed(endpoints) -> None:
    from orchestrator_app import vault

    if endpoints.exists() and (not vault.configured() or vault.key_problem()):
        raise RuntimeError(
            "Webhook signing secrets are now stored encrypted: set AHENTIC['VAULT_KEYS'] "
            "(a Fernet key, from the environment) before this migration. "
            + (vault.key_problem() or "")
        )


def seal_secrets(apps, schema_editor):
    from orchestrator_app import vault

    endpoints = apps.get_model("orchestrator_app", "WebhookEndpoint").objects
    keys_needed(endpoints)
    for pk, secret in endpoints.values_list("pk", "secret"):
        if secret.startswith(PLAIN):
            endpoints.filter(pk=pk, secret=secret).update(secret=vault.seal(secret))


def unseal_secrets(apps, schema_editor):
    from orchestrator_app import vault

    endpoints = apps.get_model("orchestrator_app", "WebhookEndpoint").objects
    keys_needed(endpoints)
    for pk, secret in endpoints.values_list("pk", "secret"):
        if secret and not secret.startswith(PLAIN):
            endpoints.filter(pk=pk, secret=secret).update(secret=vault.unseal(secret))


class Migration(migrations.Migration):
    dependencies = [
        ("orchestrator_app", "0011_mcp_tokens"),
    ]

    operations = [
        migrations.AlterField(
            model_name="webhookendpoint",
            name="secret",
            field=models.TextField(blank=True, default="", editable=False),
        ),
        migrations.RunPython(seal_secrets, unseal_secrets),
    ]
