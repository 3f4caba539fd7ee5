"""A change form loaded before the agent edited its object must not undo that edit on save.

The admin's change form posts every field it shows, so saving a form opened before the agent
(or anyone) changed the object writes the old values back. ``StaleChangeFormMixin`` makes the
save an optimistic check:

- When the change form is rendered it carries, in a hidden input (``_ahentic_loaded``), a signed
  token with a keyed digest of each model field the form edits (not the disabled ones), as
  stored when the form was built.
- When it is posted, the digests are computed again from the object the view just read (in the
  transaction that saves it). If a field differs, the form is shown again with the user's
  input, a warning naming the changed fields and a "Save anyway" checkbox, and nothing is
  saved. Ticking the box saves the form as posted.

Comparing stored values rather than looking for ``LogEntry`` rows catches every change that
the save would overwrite: the agent's ``admin_save``, an ``admin_action`` that logs nothing, or
an edit in another window. A change to a field the form does not edit is not a conflict (the
save leaves it alone).

The token must be this object's: one that is present but does not verify (altered, forged,
signed with another ``SECRET_KEY``, made for another object or model) is treated like a stale
form: a warning, nothing saved until "Save anyway" is ticked. A form that carries no token at
all (rendered before the mixin was installed, or a page or script that leaves the field out)
cannot tell what changed since it was opened either: it is refused the same way, and logged.
Its re-shown form gets no fresh token, so only "Save anyway" (or a reload) gets it saved.

The mixin is opt-in: a host adds it first in the bases of its ``ModelAdmin`` (import it from
``orchestrator_app.admin.mixins``); the system check ``ahentic.W005`` names every
``ADMIN_TOOLS`` model whose registered ModelAdmin lacks it. Nothing swaps classes at run time.
"""

from __future__ import annotations

import json
import logging

from django.core import signing
from django.core.exceptions import FieldDoesNotExist, ValidationError
from django.template.response import TemplateResponse
from django.utils.crypto import salted_hmac
from django.utils.text import capfirst, get_text_list

from .bridge import OWN_APPS, configured_labels, is_agent_request, model_label

log = logging.getLogger("ahentic")

TOKEN_FIELD = "_ahentic_loaded"
CONFIRM_FIELD = "_ahentic_save_anyway"
TEMPLATE = "ahentic/admin/stale_change_form.html"
SALT = "orchestrator_app.admin_tools.stale"
# Where a request keeps what the check found: the changed fields' labels, INVALID, or None.
REQUEST_ATTR = "_ahentic_stale_fields"
# What ``changed_fields`` finds for a token that is not this object's.
INVALID = "invalid"
# What the check finds for a posted form without the token field.
MISSING = "missing"


def is_enabled(model) -> bool:
    """The model is one the admin tools work on (``ADMIN_TOOLS``, as the bridge reads it)."""
    configured = configured_labels()
    if not configured:
        return False
    if configured == "all":
        return model._meta.app_label not in OWN_APPS
    return model_label(model) in configured


def _model_field(opts, name: str):
    try:
        field = opts.get_field(name)
    except FieldDoesNotExist:
        return None
    return field if field.concrete or field.many_to_many else None


def _digest(field, obj) -> str:
    value = field.value_from_object(obj)
    if field.many_to_many:
        value = sorted(str(related.pk) for related in value)
    elif hasattr(value, "name") and hasattr(value, "storage"):  # a FieldFile
        value = value.name
    text = json.dumps(value, sort_keys=True, default=str)
    # Keyed (SECRET_KEY): the token in the page reveals nothing about the values.
    return salted_hmac(SALT, text, algorithm="sha256").hexdigest()[:16]


def digests(obj, field_names) -> dict[str, str]:
    """name -> digest of the stored value, for the model fields among ``field_names``."""
    found = {}
    for name in field_names:
        field = _model_field(obj._meta, name)
        if field is not None:
            found[name] = _digest(field, obj)
    return found


def make_token(obj, field_names) -> str:
    return signing.dumps(
        {"model": model_label(obj), "pk": str(obj.pk), "fields": digests(obj, field_names)},
        salt=SALT,
        compress=True,
    )


def changed_fields(obj, token: str) -> list[str] | str:
    """The names of the fields whose stored value differs from the token's, or ``INVALID``
    when the token is not one this site signed for this object (altered, forged, another
    ``SECRET_KEY``, another object or model)."""
    try:
        loaded = signing.loads(token, salt=SALT)
    except signing.BadSignature:
        return INVALID
    if (
        not isinstance(loaded, dict)
        or loaded.get("model") != model_label(obj)
        or loaded.get("pk") != str(obj.pk)
        or not isinstance(loaded.get("fields"), dict)
    ):
        return INVALID
    before = loaded["fields"]
    now = digests(obj, list(before))
    return [name for name, digest in before.items() if now.get(name) != digest]


class StaleChangeFormMixin:
    """Warn before a change form overwrites changes made since it was loaded (module doc).

    Put it first in a ``ModelAdmin``'s bases: ``class PageAdmin(StaleChangeFormMixin,
    FlatPageAdmin)``. Requests the admin tools make for the agent are not checked (the agent
    saves through ``admin_save``, which reads the object it changes)."""

    def _stale_guarded(self, request) -> bool:
        return not is_agent_request(request)

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change=change, **kwargs)
        if not (
            change
            and obj is not None
            and request.method == "POST"
            and "_saveasnew" not in request.POST
            and self._stale_guarded(request)
        ):
            return form
        if not hasattr(request, REQUEST_ATTR):
            setattr(request, REQUEST_ATTR, self._stale_check(request, form, obj))
        labels = getattr(request, REQUEST_ATTR)
        if not labels:
            return form
        if labels == MISSING:
            message = (
                f"This form carries no record of the {self.opts.verbose_name} as you opened "
                "it, so it cannot tell what changed since (by the agent or in another window). "
                "Reload the page to see the current values, or tick “Save anyway” and save "
                "again to keep yours."
            )
        elif labels == INVALID:
            message = (
                f"This form's record of the {self.opts.verbose_name} as you opened it is not "
                "valid (altered, or made for another object), so it cannot tell what changed "
                "since. Reload the page to see the current values, or tick “Save anyway” and "
                "save again to keep yours."
            )
        else:
            message = (
                f"This {self.opts.verbose_name} was changed after you opened this form, by the "
                f"agent or in another window: {get_text_list(labels, 'and')}. Saving would put "
                "back the values this form shows. Reload the page to see the current values, "
                "or tick “Save anyway” and save again to keep yours."
            )

        def clean(self_form):
            super(stale_form, self_form).clean()
            raise ValidationError(message, code="ahentic_stale")

        stale_form = type(form.__name__, (form,), {"clean": clean})
        return stale_form

    def _stale_check(self, request, form, obj) -> list[str] | str | None:
        """What the posted form's token finds on ``obj`` (the object the change view just
        read, before the posted values are set on it): the changed fields' labels, INVALID,
        or None (save)."""
        if TOKEN_FIELD not in request.POST:
            # Rendered before the mixin was installed, or a page or script that leaves the
            # field out: nothing tells what changed since, so it is refused like a stale one.
            log.warning(
                "ahentic: %s %s posted from a change form without a stale-form token (%s)",
                model_label(obj),
                obj.pk,
                "saved anyway" if request.POST.get(CONFIRM_FIELD) else "refused",
            )
            return None if request.POST.get(CONFIRM_FIELD) else MISSING
        changed = changed_fields(obj, request.POST.get(TOKEN_FIELD, ""))
        if not changed or request.POST.get(CONFIRM_FIELD):
            return None  # nothing changed, or the user saw the warning and saves anyway
        return INVALID if changed == INVALID else self._stale_labels(form, changed)

    def _stale_labels(self, form, names) -> list[str]:
        labels = []
        for name in names:
            field = form.base_fields.get(name)
            label = field.label if field is not None and field.label else None
            if label is None:
                model_field = _model_field(self.opts, name)
                label = model_field.verbose_name if model_field is not None else name
            labels.append(str(capfirst(label)))
        return labels

    def render_change_form(self, request, context, add=False, change=False, form_url="", obj=None):
        response = super().render_change_form(
            request, context, add=add, change=change, form_url=form_url, obj=obj
        )
        if (
            add
            or obj is None
            or not isinstance(response, TemplateResponse)
            or response.is_rendered
            or not self._stale_guarded(request)
        ):
            return response
        # A re-shown form keeps the token it was posted with (stale or invalid, it warns
        # again until "Save anyway" is ticked); one posted without a token gets none.
        found = getattr(request, REQUEST_ATTR, None)
        token = request.POST.get(TOKEN_FIELD) if request.method == "POST" else None
        if not token and found != MISSING:
            token = self._stale_token(request, context, obj)
            if not token:
                return response
        # The page the admin would render, extended by one that adds the token and the
        # checkbox inside the form (block form_top), so a host's own change_form template
        # keeps working.
        parent = response.resolve_template(response.template_name)
        response.template_name = TEMPLATE
        response.context_data = {
            **(response.context_data or {}),
            "ahentic_stale": {
                "parent": parent,
                "token_field": TOKEN_FIELD,
                "token": token,
                "confirm_field": CONFIRM_FIELD,
                "changed": found if found not in (INVALID, MISSING) else None,
                "invalid": found == INVALID,
                "missing": found == MISSING,
            },
        }
        return response

    def _stale_token(self, request, context, obj) -> str | None:
        adminform = context.get("adminform")
        form = getattr(adminform, "form", None)
        if form is None:
            return None
        if request.method == "POST":
            # A re-shown form: ``obj`` holds the posted values; the token is for what is stored.
            obj = type(obj)._base_manager.using(obj._state.db).filter(pk=obj.pk).first()
            if obj is None:
                return None
        # Disabled fields (a password hash...) are never saved from the form: no conflict.
        return make_token(obj, [name for name, field in form.fields.items() if not field.disabled])
