"""The one field staff edit on a session's admin page: its spend cap.

``Session.spend_cap_usd`` is the chat's own cap in USD over its agent's ``SPEND_CAP_USD``
(blank: the agent's). Staff with ``sessions_app.change_session`` see it as a form field on
the otherwise read-only session page; everyone else sees it read-only. The save goes through
``runstate.spend_cap_set``, conditional on the cap the page showed (a hidden field), so two
staff members raising one chat's cap never overwrite each other silently: the second is told to
reload. A raised cap takes effect at the run's next step; a run paused at the cap resumes with
Continue.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError

from .. import agents, runstate
from ..conf import model_prices
from ..models import Session

CAP_FIELD = "spend_cap_usd"
LOADED_FIELD = "spend_cap_loaded"  # the cap as the page showed it ("": none)


def _usd(amount) -> str:
    return f"${Decimal(str(amount)):,.4f}"


def _loaded(value: str) -> Decimal | None:
    try:
        return Decimal(value) if value else None
    except InvalidOperation:
        raise ValidationError("The page's spend cap is unreadable: reload it.") from None


def cap_help(session: Session) -> str:
    """The field's help: the agent's cap and the spend so far."""
    agent_cap = agents.settings_for(session).SPEND_CAP_USD
    agent = f"the agent's cap, {_usd(agent_cap)}" if agent_cap else "the agent's: no cap"
    spent = _usd(session.cost_usd or 0)
    return (
        f"USD, 0 or more; blank: {agent}. Spent so far: {spent}. A run stops at its next step "
        "once the spend reaches the cap; after raising it, Continue resumes a paused run."
    )


class SessionCapForm(forms.ModelForm):
    spend_cap_usd = forms.DecimalField(
        label="Spend cap (USD)", required=False, min_value=0, max_digits=12, decimal_places=4
    )
    spend_cap_loaded = forms.CharField(required=False, widget=forms.HiddenInput)

    class Meta:
        model = Session
        fields = [CAP_FIELD]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        session = self.instance
        if CAP_FIELD in self.fields and session.pk:
            self.fields[CAP_FIELD].help_text = cap_help(session)
        if LOADED_FIELD in self.fields:
            loaded = session.spend_cap_usd
            self.fields[LOADED_FIELD].initial = "" if loaded is None else str(loaded)

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        if CAP_FIELD not in self.fields:
            return cleaned
        session = self.instance  # as the admin just read it
        loaded = _loaded(cleaned.get(LOADED_FIELD) or "")
        cleaned["loaded_cap"] = loaded
        if loaded != session.spend_cap_usd:
            now = "blank" if session.spend_cap_usd is None else _usd(session.spend_cap_usd)
            self.add_error(
                CAP_FIELD,
                f"The cap was changed to {now} after you opened this page: reload it, then make "
                "your change again.",
            )
        cap = cleaned.get(CAP_FIELD)
        model = agents.settings_for(session).MODEL
        if cap is not None and model_prices(model) is None:
            self.add_error(
                CAP_FIELD,
                f"The chat's model {model} has no prices in AHENTIC['PRICES']: its spend is "
                "not counted, so a USD cap would never be reached.",
            )
        return cleaned


class SpendCapAdminMixin(admin.ModelAdmin):
    """The Session admin's spend cap field (``SessionCapForm``): editable with change
    permission, read-only otherwise, saved through ``runstate.spend_cap_set``."""

    form = SessionCapForm

    def has_change_permission(self, request, obj=None) -> bool:
        # Django's rule (``sessions_app.change_session``): the cap is the one field it edits.
        return admin.ModelAdmin.has_change_permission(self, request, obj)

    def get_fieldsets(self, request, obj=None):
        fieldsets = super().get_fieldsets(request, obj)
        if self.has_change_permission(request, obj):
            return fieldsets

        def without_loaded(row):
            if isinstance(row, list | tuple):
                return tuple(f for f in row if f != LOADED_FIELD)
            return row

        return [
            (name, {**options, "fields": [without_loaded(f) for f in options["fields"]]})
            for name, options in fieldsets
        ]

    def get_readonly_fields(self, request, obj=None):
        fields = super().get_readonly_fields(request, obj)
        if obj is None or not self.has_change_permission(request, obj):
            return fields
        return [f for f in fields if f not in (CAP_FIELD, LOADED_FIELD)]

    def save_model(self, request, obj, form, change) -> None:
        if CAP_FIELD not in form.changed_data:
            return
        cap = form.cleaned_data[CAP_FIELD]
        if not runstate.spend_cap_set(
            session_id=obj.pk, cap=cap, from_cap=form.cleaned_data["loaded_cap"]
        ):
            self.message_user(
                request,
                "The spend cap was not saved: it changed while you saved. Reload the page.",
                messages.ERROR,
            )
