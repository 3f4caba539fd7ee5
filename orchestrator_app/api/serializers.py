"""Input serializers. Output shapes live in ``payload.py`` (plain dicts, camelCase)."""

from __future__ import annotations

from rest_framework import serializers

from sessions_app.models import Session


class StrictCharField(serializers.CharField):
    """A CharField that refuses numbers and booleans instead of coercing them to text."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    def to_internal_value(self, data):
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


class JSONObjectField(serializers.JSONField):
    """A JSON object (dict) or null."""

    default_error_messages = {"not_object": "Expected a JSON object or null."}

    def to_internal_value(self, data):
        if data is not None and not isinstance(data, dict):
            self.fail("not_object")
        return data


class SessionCreateSerializer(serializers.Serializer):
    title = StrictCharField(required=False, allow_blank=True, max_length=255)
    mode = serializers.ChoiceField(choices=Session.Mode.choices, required=False)


class SessionUpdateSerializer(serializers.Serializer):
    title = StrictCharField(required=False, allow_blank=False, max_length=255)
    mode = serializers.ChoiceField(choices=Session.Mode.choices, required=False)
    viewMode = serializers.ChoiceField(choices=Session.ViewMode.choices, required=False)
    pageContext = JSONObjectField(required=False, allow_null=True)
    activeSkills = serializers.ListField(
        child=StrictCharField(max_length=128), required=False, max_length=32
    )
    activeWorkflow = StrictCharField(
        required=False, allow_blank=True, allow_null=True, max_length=128
    )


# Cursors beyond a database integer would overflow the query (a 500 on PostgreSQL).
SEQ_MAX = 2**63 - 1


class MessagesQuerySerializer(serializers.Serializer):
    before = serializers.IntegerField(
        required=False, min_value=0, max_value=SEQ_MAX, help_text="Events with seq below this."
    )
    after = serializers.IntegerField(
        required=False, min_value=0, max_value=SEQ_MAX, help_text="Events with seq above this."
    )
    limit = serializers.IntegerField(required=False, min_value=1, max_value=100, default=50)
    view = serializers.ChoiceField(choices=Session.ViewMode.choices, required=False)

    def validate(self, attrs):
        if "before" in attrs and "after" in attrs:
            raise serializers.ValidationError("Use either before or after, not both.")
        return attrs


class SessionListQuerySerializer(serializers.Serializer):
    limit = serializers.IntegerField(required=False, min_value=1, max_value=100, default=50)
    status = serializers.ChoiceField(choices=Session.Status.choices, required=False)
    cursor = StrictCharField(
        required=False, max_length=200, help_text="nextCursor of the previous page (older)."
    )


class TokenStatsQuerySerializer(serializers.Serializer):
    days = serializers.IntegerField(required=False, min_value=1, max_value=120, default=30)


class MessageCreateSerializer(serializers.Serializer):
    content = StrictCharField(allow_blank=True, trim_whitespace=True)
    mode = serializers.ChoiceField(choices=Session.Mode.choices, required=False)
    pageContext = JSONObjectField(required=False, allow_null=True)
    ifBusy = serializers.ChoiceField(choices=["enqueue", "reject"], required=False)


class ApprovalSerializer(serializers.Serializer):
    # Unknown decisions are the service's ahentic_bad_decision, not a field error.
    decision = StrictCharField(max_length=32)
    reason = StrictCharField(required=False, allow_blank=True, max_length=2000)
    input = JSONObjectField(required=False, allow_null=True)


class BrowserResultSerializer(serializers.Serializer):
    callId = StrictCharField(max_length=128)
    result = serializers.JSONField(required=False, allow_null=True)
    error = StrictCharField(required=False, allow_blank=True, max_length=10000, allow_null=True)

    def validate(self, attrs):
        if "result" not in attrs and attrs.get("error") is None:
            raise serializers.ValidationError("Send either result or error.")
        return attrs


class ActionSerializer(serializers.Serializer):
    name = StrictCharField(max_length=64)
    input = JSONObjectField(required=False, allow_null=True)
