"""The user's mail preferences (``GET``/``PATCH me/notifications``): the two opt-outs of the
agent's mails (``orchestrator_app.notifications.services``). Every user has them (defaults: on); the
write is the service's ``preference_update``."""

from __future__ import annotations

from rest_framework import serializers
from rest_framework.response import Response

from ..api.schema import READ_ERRORS, WRITE_ERRORS, describe, described
from ..api.serializers import StrictBooleanField
from ..api.views import AhenticViewSet
from . import services as notifications


class NotificationPreferenceSerializer(serializers.Serializer):
    # JSON true/false only: "true", 1 or "off" are refused, not coerced.
    approvalsMail = StrictBooleanField(  # noqa: N815 - API field
        source="approvals_mail",
        required=False,
        help_text="Mail me when a run has waited a while for my approval.",
    )
    schedulesMail = StrictBooleanField(  # noqa: N815 - API field
        source="schedules_mail",
        required=False,
        help_text="Mail me when a scheduled run finishes or fails.",
    )


preferences_read = describe(
    "notification_preferences_read",
    "The user's mail preferences",
    {200: NotificationPreferenceSerializer},
    READ_ERRORS,
)
preferences_update = describe(
    "notification_preferences_update",
    "Change the user's mail preferences (the fields given)",
    {200: NotificationPreferenceSerializer},
    WRITE_ERRORS,
    request=NotificationPreferenceSerializer,
)


class NotificationPreferenceViewSet(AhenticViewSet):
    serializer_class = NotificationPreferenceSerializer

    @described(preferences_read)
    def retrieve(self, request):
        preference = notifications.preference_for(request.user)
        return Response(NotificationPreferenceSerializer(preference).data)

    @described(preferences_update)
    def partial_update(self, request):
        changes = self.validated(NotificationPreferenceSerializer, request.data, strict=True)
        preference = notifications.preference_update(user=request.user, **changes)
        return Response(NotificationPreferenceSerializer(preference).data)
