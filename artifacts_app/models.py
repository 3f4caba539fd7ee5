"""Session-scoped artifacts: drafts and payloads the agent stages now and applies later."""

from __future__ import annotations

from django.db import models


class Artifact(models.Model):
    class Kind(models.TextChoices):
        BLOCKS = "blocks"
        HTML = "html"
        MARKDOWN = "markdown"
        POST_CONTENT = "post_content"
        JSON = "json"

    class Status(models.TextChoices):
        DRAFTING = "drafting"
        READY = "ready"
        APPLIED = "applied"
        STALE = "stale"

    session = models.ForeignKey(
        "sessions_app.Session", on_delete=models.CASCADE, related_name="artifacts"
    )
    key = models.CharField(max_length=64)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    title = models.CharField(max_length=255, blank=True, default="")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.READY)
    payload = models.JSONField(default=dict, blank=True)
    source = models.CharField(max_length=64, blank=True, default="")
    step = models.PositiveIntegerField(default=0)
    bytes = models.PositiveIntegerField(default=0)
    block_count = models.PositiveIntegerField(default=0)
    run = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            # Also the index behind from_memory lookups by key.
            models.UniqueConstraint(fields=["session", "key"], name="ahentic_artifact_key"),
        ]

    def __str__(self) -> str:
        return f"{self.key} ({self.kind}, {self.status})"
