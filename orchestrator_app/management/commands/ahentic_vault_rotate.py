"""Re-encrypt every stored secret (MCP credentials, webhook signing secrets) with the newest
``AHENTIC["VAULT_KEYS"]`` key.

Rotation: prepend a new key to ``VAULT_KEYS`` (keep the old ones), deploy, run this command,
then remove the old keys. Each row is rewritten by a conditional UPDATE on the values it read,
so a token refreshed meanwhile is left as it is (it was sealed with the newest key already).
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from orchestrator_app import vault
from orchestrator_app.models import McpAuthorization, McpCredential, WebhookEndpoint

SEALED = {
    McpCredential: ("access_token", "refresh_token", "client_secret"),
    McpAuthorization: ("verifier", "client_secret"),
    WebhookEndpoint: ("secret",),
}


class Command(BaseCommand):
    help = "Re-encrypt stored MCP credentials and webhook secrets with the newest AHENTIC['VAULT_KEYS'] key."

    def handle(self, *args, **options):
        if not vault.configured():
            raise CommandError("AHENTIC['VAULT_KEYS'] is empty.")
        rotated = failed = 0
        for model, fields in SEALED.items():
            for row in model.objects.values("pk", *fields).iterator():
                try:
                    new = {f: vault.rotate(row[f]) for f in fields}
                except vault.VaultError:
                    failed += 1
                    continue
                read = {f: row[f] for f in fields}
                rotated += model.objects.filter(pk=row["pk"], **read).update(**new)
        self.stdout.write(f"{rotated} rows re-encrypted.")
        if failed:
            raise CommandError(
                f"{failed} rows cannot be decrypted with the configured keys (an old key "
                "removed too early?)."
            )
