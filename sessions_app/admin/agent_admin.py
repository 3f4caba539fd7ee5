"""Agents in the Django admin: edit one, see its versions, compare two, roll back.

The agent's own fields save as any model's; its configuration (the overrides of ``AHENTIC`` a
run reads, ``agents.AGENT_KEYS``) is shown twice, as fields anyone can fill in ("What it does":
model, instructions, tools and their approval...) and as the latest version's JSON (the
"Advanced" fold); ``AgentForm.clean`` makes one configuration of both, and a save whose
configuration differs makes a new version through ``agents.version_save`` (a new agent always
gets version 1; an unchanged configuration makes none). Versions have no admin of their own and
are never edited or deleted here: the agent's page lists them, ``versions/`` compares any two
(``agents.config_diff``) and rolls back to one (a new version, ``agents.rollback``). Every save,
rollback and "make default" is a ``LogEntry`` naming the version numbers.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.contrib.auth.models import Permission
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Max, ProtectedError
from django.http import HttpResponseNotAllowed, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _

from .. import agents
from ..models import Agent
from .base import (
    html_table,
    pretty_json,
    zoned_time,
)

COLOUR_RE = re.compile(r"^#[0-9a-fA-F]{6}$")
PERMISSION_RE = re.compile(r"^[\w.-]+\.[\w.-]+$")


class PrettyJSONField(forms.JSONField):
    """A JSON form field shown indented, keys sorted (the form a person edits)."""

    def prepare_value(self, value):
        if isinstance(value, forms.fields.InvalidJSONInput):
            return value
        return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


class ToolsWidget(forms.Widget):
    """The agent's tools as a table: "Every tool" or a checkbox per tool, each with its approval
    policy beside it. Its value: ``{"all": bool, "tools": [names], "approval": {name: policy}}``.
    Posted as ``<name>-all``, ``<name>`` (the checked names) and ``<name>-approval-<tool>``."""

    choices: list[tuple[str, str]] = []

    def value_from_datadict(self, data, files, name):
        getlist = getattr(data, "getlist", lambda key: data.get(key) or [])
        return {
            "all": bool(data.get(f"{name}-all")),
            "tools": list(getlist(name)),
            "approval": {
                tool: data.get(f"{name}-approval-{tool}")
                for tool, _label in self.choices
                if data.get(f"{name}-approval-{tool}")
            },
        }

    def value_omitted_from_data(self, data, files, name):
        return False

    def render(self, name, value, attrs=None, renderer=None):
        value = value or {"all": True, "tools": [], "approval": {}}
        ident = (attrs or {}).get("id") or f"id_{name}"
        policies = [
            ("", _("The tool's own rule")),
            ("always_ask", _("Always ask")),
            ("always_allow", _("Always allow")),
        ]
        rows = []
        for tool, label in self.choices:
            chosen = value["approval"].get(tool, "")
            options = format_html_join(
                "",
                '<option value="{}"{}>{}</option>',
                ((v, " selected" if v == chosen else "", text) for v, text in policies),
            )
            rows.append(
                format_html(
                    '<tr><td><input type="checkbox" name="{}" value="{}" id="{}-{}"{}> '
                    '<label for="{}-{}" class="vCheckboxLabel">{}</label> '
                    '<code>{}</code></td><td><select name="{}-approval-{}" aria-label="{}">{}'
                    "</select></td></tr>",
                    name,
                    tool,
                    ident,
                    tool,
                    " checked" if tool in value["tools"] else "",
                    ident,
                    tool,
                    label,
                    tool,
                    name,
                    tool,
                    _("Approval for %(tool)s") % {"tool": label},
                    options,
                )
            )
        return format_html(
            '<div id="{}" class="ahentic-tools"><p><input type="checkbox" name="{}-all" '
            'id="{}-all"{}> '
            '<label for="{}-all" class="vCheckboxLabel">{}</label></p>'
            '<table><thead><tr><th scope="col">{}</th><th scope="col">{}</th></tr></thead>'
            "<tbody>{}</tbody></table></div>",
            ident,
            name,
            ident,
            " checked" if value["all"] else "",
            ident,
            _("Every tool the user may use (the boxes below are ignored)"),
            _("tool"),
            _("approval"),
            SafeString("".join(rows)),
        )


class ToolsField(forms.Field):
    widget = ToolsWidget

    def __init__(self, *, choices=(), **kwargs):
        super().__init__(**kwargs)
        self.widget.choices = list(choices)

    def clean(self, value):
        known = {tool for tool, _label in self.widget.choices}
        value = value or {"all": True, "tools": [], "approval": {}}
        unknown = sorted(set(value["tools"]) - known)
        policies = set(value["approval"].values()) - set(agents.APPROVALS)
        if unknown or policies:
            raise ValidationError(
                _("Choose among the tools and approval policies listed."), code="invalid"
            )
        return value


def _whole(amount):
    """An amount in USD as the JSON configuration holds it: a whole number stays whole."""
    number = float(amount)
    return int(number) if number.is_integer() else number


class AgentForm(forms.ModelForm):
    """The agent's fields, and its configuration twice: as fields a person fills in (the model,
    instructions, tools and their approval, MCP servers, memory, spend cap, roster) and as the
    raw JSON (``configuration``, the "Advanced" fold). A save starts from the JSON and applies
    each field whose value differs from what the latest version says (``FORM_KEYS``), so a form
    save makes the same version as the same settings typed as JSON. A post without the fields
    (``structured`` absent) is the JSON alone."""

    structured = forms.BooleanField(required=False, initial=True, widget=forms.HiddenInput)
    model = forms.ChoiceField(
        required=False,
        label=_("Model"),
        help_text=_(
            "The models with prices in AHENTIC['PRICES'] (their USD per million "
            "tokens: input / output)."
        ),
    )
    instructions = forms.CharField(
        required=False,
        strip=False,
        label=_("Instructions"),
        widget=forms.Textarea(attrs={"rows": 6, "cols": 80}),
        help_text=_("What the agent is told before every chat (SOUL). Empty: the site's."),
    )
    tools = ToolsField(
        required=False,
        label=_("Tools"),
        help_text=_(
            "The tools it may use, and whether each asks before it runs. An agent "
            "never gives a user a tool their own permissions refuse."
        ),
    )
    mcp_servers = forms.MultipleChoiceField(
        required=False,
        label=_("MCP servers"),
        widget=forms.CheckboxSelectMultiple,
        help_text=_("Whose tools it may call. None checked: the site's list."),
    )
    memory = forms.ChoiceField(
        required=False,
        label=_("Memory"),
        choices=[
            ("", _("Off")),
            ("user", _("Each user's own memory")),
            ("user+shared", _("Each user's own memory and the site's shared memory")),
        ],
    )
    spend_cap = forms.DecimalField(
        required=False,
        label=_("Spend cap (USD)"),
        min_value=Decimal("0.0001"),
        decimal_places=4,
        help_text=_("A chat's cost at which its run pauses. Empty: no cap."),
    )
    roster = forms.MultipleChoiceField(
        required=False,
        label=_("Roster"),
        widget=forms.CheckboxSelectMultiple,
        help_text=_("The agents its sub-agents may be."),
    )
    configuration = PrettyJSONField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 16, "cols": 80, "style": "font-family: monospace"}),
        help_text="The settings this agent overrides, as a JSON object of AHENTIC keys "
        f"({', '.join(agents.AGENT_KEYS)}); a key left out is the site's value. "
        "Saving a changed configuration makes a new version.",
    )
    change_note = forms.CharField(
        required=False,
        max_length=255,
        help_text="What this change is for (kept with the new version).",
    )
    # The latest version when the page was opened: a configuration saved over a newer one
    # (another staff member's) is refused instead of silently replacing it.
    based_on = forms.IntegerField(required=False, widget=forms.HiddenInput)

    class Meta:
        model = Agent
        fields = [
            "slug",
            "name",
            "description",
            "colour",
            "permission",
            "groups",
            "shows_on",
            "active",
        ]
        widgets = {"groups": forms.CheckboxSelectMultiple}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        latest = agents.latest_version(self.instance) if self.instance.pk else None
        self.latest = latest
        config = latest.config if latest else {}
        self.fields["configuration"].initial = config
        self.fields["based_on"].initial = latest.number if latest else 0
        # The choices: what the site has, and whatever the latest version names besides.
        current = config.get("MODEL")
        priced = sorted((agents.ahentic_settings.PRICES or {}).items())
        self.fields["model"].choices = [
            ("", _("The site's model (%(model)s)") % {"model": agents.ahentic_settings.MODEL}),
            *(
                (name, f"{name} (${price.get('input', '?')} / ${price.get('output', '?')})")
                for name, price in priced
            ),
            *(
                [(current, f"{current} ({_('no prices')})")]
                if current and current not in dict(priced)
                else []
            ),
        ]
        tools = agents.choices("TOOLS")
        named = [t for t in config.get("TOOLS") or [] if t not in dict(tools)]
        self.fields["tools"].widget.choices = [*tools, *((t, t) for t in named)]
        servers = agents.choices("MCP_SERVERS")
        self.fields["mcp_servers"].choices = [
            *servers,
            *((s, s) for s in config.get("MCP_SERVERS") or [] if s not in dict(servers)),
        ]
        others = Agent.objects.exclude(pk=self.instance.pk).order_by("name")
        self.fields["roster"].choices = [(a.slug, f"{a.name} ({a.slug})") for a in others]
        self.form_initial = self.from_config(config)
        for key, value in self.form_initial.items():
            self.fields[key].initial = value

    # The fields a person fills in, and the configuration keys each one sets.
    FORM_KEYS = {
        "model": ("MODEL",),
        "instructions": ("SOUL",),
        "tools": ("TOOLS", "APPROVAL"),
        "mcp_servers": ("MCP_SERVERS",),
        "memory": ("MEMORY",),
        "spend_cap": ("SPEND_CAP_USD",),
        "roster": ("ROSTER",),
    }

    @staticmethod
    def from_config(config: dict[str, Any]) -> dict[str, Any]:
        """The fields' values for a configuration."""
        cap = config.get("SPEND_CAP_USD")
        return {
            "model": config.get("MODEL") or "",
            "instructions": config.get("SOUL") or "",
            "tools": {
                "all": config.get("TOOLS") is None,
                "tools": list(config.get("TOOLS") or []),
                "approval": dict(config.get("APPROVAL") or {}),
            },
            "mcp_servers": list(config.get("MCP_SERVERS") or []),
            "memory": config.get("MEMORY") or "",
            "spend_cap": _whole(cap) if isinstance(cap, int | float) else None,
            "roster": list(config.get("ROSTER") or []),
        }

    def _apply(self, config: dict[str, Any], field: str, value: Any) -> None:
        """Set (or leave out, for "the site's"/"none") the keys ``field`` stands for."""
        if field == "tools":
            tools = dict(self.fields["tools"].widget.choices)
            order = [t for t in tools if t in value["tools"]]
            if value["all"]:
                config.pop("TOOLS", None)
            else:
                config["TOOLS"] = order
            approval = {t: value["approval"][t] for t in tools if value["approval"].get(t)}
            if approval:
                config["APPROVAL"] = approval
            else:
                config.pop("APPROVAL", None)
            return
        (key,) = self.FORM_KEYS[field]
        if field == "spend_cap" and value is not None:
            value = _whole(value)
        if value in ("", None, []):
            config.pop(key, None)
        else:
            config[key] = value

    def clean_instructions(self) -> str:
        return (self.cleaned_data.get("instructions") or "").replace("\r\n", "\n")

    def clean_spend_cap(self):
        value = self.cleaned_data.get("spend_cap")
        return _whole(value) if value is not None else None

    def clean_configuration(self) -> dict[str, Any]:
        config = self.cleaned_data.get("configuration")
        return {} if config is None else config

    def clean(self):
        cleaned = super().clean()
        config = cleaned.get("configuration")
        if config is None:
            return cleaned
        if isinstance(config, dict) and cleaned.get("structured"):
            config = dict(config)
            for field in self.FORM_KEYS:
                if field in cleaned and cleaned[field] != self.form_initial[field]:
                    self._apply(config, field, cleaned[field])
        try:
            config = agents.clean_config(config)
        except ValidationError as error:
            self.add_error("configuration", ValidationError(error.messages))
            return cleaned
        cleaned["configuration"] = config
        latest = self.latest
        if (
            latest is not None
            and config != latest.config
            and cleaned.get("based_on") != latest.number
        ):
            who = latest.created_by.get_username() if latest.created_by else "someone"
            self.add_error(
                "configuration",
                f"v{latest.number} was saved by {who} after you opened this page: reload it "
                "to see that version, then make your change again.",
            )
        return cleaned

    def clean_colour(self) -> str:
        colour = (self.cleaned_data.get("colour") or "").strip()
        if colour and not COLOUR_RE.match(colour):
            raise ValidationError("A colour is #rrggbb (or blank).")
        return colour

    def clean_permission(self) -> str:
        name = (self.cleaned_data.get("permission") or "").strip()
        if not name:
            return name
        if not PERMISSION_RE.match(name):
            raise ValidationError('A permission is "app_label.codename" (or blank).')
        app_label, codename = name.split(".", 1)
        found = Permission.objects.filter(content_type__app_label=app_label, codename=codename)
        if not found.exists():
            raise ValidationError(f"No permission {name!r} exists.")
        return name


def _version_number(request, key: str) -> int | None:
    try:
        return int(request.GET.get(key, ""))
    except ValueError:
        return None


def _json_cell(value: Any) -> SafeString:
    text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)
    return format_html('<pre style="white-space: pre-wrap; margin: 0">{}</pre>', text)


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    form = AgentForm
    list_display = ["slug", "name", "shows_on", "is_default", "active", "latest_version"]
    list_filter = ["shows_on", "is_default", "active"]
    search_fields = ["slug", "name", "description"]
    readonly_fields = ["is_default", "created_at", "updated_at", "versions_table"]
    actions = ["make_default"]
    fieldsets = [
        (
            None,
            {
                "fields": [
                    ("slug", "name"),
                    "description",
                    "colour",
                    ("shows_on", "active", "is_default"),
                ]
            },
        ),
        ("Who may use it", {"fields": ["permission", "groups"]}),
        (
            _("What it does"),
            {
                "fields": [
                    "structured",
                    "model",
                    "instructions",
                    "tools",
                    "mcp_servers",
                    "memory",
                    "spend_cap",
                    "roster",
                    "change_note",
                ]
            },
        ),
        (
            _("Advanced: the configuration as JSON"),
            {
                "classes": ["collapse"],
                "fields": ["configuration", "based_on"],
                "description": _(
                    "Every setting the version overrides, the fields above included. A field "
                    "above that you change wins over the same key changed here."
                ),
            },
        ),
        ("Versions", {"fields": ["versions_table", ("created_at", "updated_at")]}),
    ]

    def get_fieldsets(self, request, obj=None):
        if obj is None:  # a new agent has no versions yet
            return [s for s in self.fieldsets if s[0] != "Versions"]
        return self.fieldsets

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(latest_number=Max("versions__number"))

    @admin.display(description="latest version", ordering="latest_number")
    def latest_version(self, obj: Agent) -> str:
        number = getattr(obj, "latest_number", None)
        return f"v{number}" if number else "-"

    # Saving: the agent, then a version when the configuration changed.

    def save_model(self, request, obj, form, change) -> None:
        super().save_model(request, obj, form, change)
        config = form.cleaned_data["configuration"]
        latest = form.latest if change else None
        form.new_version = None
        if latest is None or latest.config != config:
            form.new_version = agents.version_save(
                obj, config=config, user=request.user, note=form.cleaned_data["change_note"]
            )

    def construct_change_message(self, request, form, formsets, add=False):
        message = super().construct_change_message(request, form, formsets, add)
        version = getattr(form, "new_version", None)
        if version is not None:
            message.append({"added": {"name": "version", "object": f"v{version.number}"}})
        return message

    # Deleting: an agent whose versions sessions pin is protected (Session.agent_version); the
    # delete page lists those sessions. A session pinned meanwhile is a message, not a 500.

    def delete_view(self, request, object_id, extra_context=None):
        try:
            return super().delete_view(request, object_id, extra_context)
        except ProtectedError:
            self.message_user(request, self._protected_message(), messages.ERROR)
            return HttpResponseRedirect(self._url("change", object_id))

    def changelist_view(self, request, extra_context=None):
        try:
            return super().changelist_view(request, extra_context)
        except ProtectedError:
            self.message_user(request, self._protected_message(), messages.ERROR)
            return HttpResponseRedirect(self._url("changelist"))

    @staticmethod
    def _protected_message() -> str:
        return (
            "The agent was not deleted: sessions use its versions. Make it inactive instead "
            "(its chats go on, no new chat starts with it), or delete those sessions first."
        )

    # Making an agent the default one.

    @admin.action(description="Make the selected agent the default", permissions=["change"])
    def make_default(self, request, queryset) -> None:
        chosen = list(queryset[:2])
        if len(chosen) != 1:
            self.message_user(request, "Select exactly one agent.", messages.WARNING)
            return
        self._make_default(request, chosen[0])

    def _make_default(self, request, agent: Agent) -> None:
        if not agent.active:
            self.message_user(
                request,
                f"{agent} is inactive: make it active before making it the default.",
                messages.ERROR,
            )
            return
        agents.default_set(agent)
        latest = agents.latest_version(agent)
        version = f" (latest version v{latest.number})" if latest else ""
        self.log_change(request, agent, f"Made the default agent{version}.")
        self.message_user(request, f"{agent} is now the default agent{version}.")

    # The versions: the table on the change page, their own page, compare and rollback.

    @admin.display(description="versions")
    def versions_table(self, obj: Agent) -> SafeString:
        versions = list(obj.versions.select_related("created_by").order_by("-number"))
        page = self._url("versions", obj.pk)
        rows = []
        for index, version in enumerate(versions):
            earlier = versions[index + 1] if index + 1 < len(versions) else None
            compare = (
                format_html(
                    '<a href="{}?a={}&amp;b={}">changes from v{}</a>',
                    self._url("versions_compare", obj.pk),
                    earlier.number,
                    version.number,
                    earlier.number,
                )
                if earlier
                else "-"
            )
            rows.append(
                (
                    f"v{version.number}",
                    zoned_time(version.created_at),
                    version.created_by.get_username() if version.created_by else "-",
                    version.note or "-",
                    compare,
                )
            )
        table = html_table(["version", "when", "who", "note", "diff"], rows)
        return format_html(
            '{}<p><a href="{}">All versions: compare any two, roll back</a></p>', table, page
        )

    def get_urls(self):
        wrap = self.admin_site.admin_view
        own = [
            path(
                "<path:object_id>/versions/",
                wrap(self.versions_view),
                name="sessions_app_agent_versions",
            ),
            path(
                "<path:object_id>/versions/compare/",
                wrap(self.compare_view),
                name="sessions_app_agent_versions_compare",
            ),
            path(
                "<path:object_id>/versions/<int:number>/rollback/",
                wrap(self.rollback_view),
                name="sessions_app_agent_versions_rollback",
            ),
            path(
                "<path:object_id>/make-default/",
                wrap(self.make_default_view),
                name="sessions_app_agent_make_default",
            ),
        ]
        return [*own, *super().get_urls()]  # before the catch-all change URL

    def _url(self, view: str, *args) -> str:
        return reverse(
            f"{self.admin_site.name}:sessions_app_agent_{view}", args=[quote(a) for a in args]
        )

    def _agent_or_redirect(self, request, object_id, *, change: bool = False):
        agent = self.get_object(request, unquote(object_id))
        if agent is None:
            return None, self._get_obj_does_not_exist_redirect(request, self.opts, object_id)
        allowed = (
            self.has_change_permission(request, agent)
            if change
            else self.has_view_or_change_permission(request, agent)
        )
        if not allowed:
            raise PermissionDenied
        return agent, None

    def _page(self, request, agent: Agent, template: str, title: str, **context):
        request.current_app = self.admin_site.name
        return TemplateResponse(
            request,
            template,
            {
                **self.admin_site.each_context(request),
                "opts": self.opts,
                "original": agent,
                "title": title,
                "agent_url": self._url("change", agent.pk),
                "versions_url": self._url("versions", agent.pk),
                "compare_url": self._url("versions_compare", agent.pk),
                **context,
            },
        )

    def versions_view(self, request, object_id):
        agent, redirect = self._agent_or_redirect(request, object_id)
        if redirect:
            return redirect
        versions = list(agent.versions.select_related("created_by").order_by("-number"))
        latest = versions[0].number if versions else None
        return self._page(
            request,
            agent,
            "admin/sessions_app/agent/versions.html",
            f"Versions of {agent}",
            versions=[
                {
                    "version": v,
                    "who": v.created_by.get_username() if v.created_by else "-",
                    "config": pretty_json(v.config) if v.config else "{} (the site's settings)",
                    "previous": versions[i + 1].number if i + 1 < len(versions) else None,
                    "rollback_url": self._url("versions_rollback", agent.pk, v.number),
                    "is_latest": v.number == latest,
                }
                for i, v in enumerate(versions)
            ],
            can_change=self.has_change_permission(request, agent),
        )

    def compare_view(self, request, object_id):
        agent, redirect = self._agent_or_redirect(request, object_id)
        if redirect:
            return redirect
        a, b = _version_number(request, "a"), _version_number(request, "b")
        found = {v.number: v for v in agent.versions.filter(number__in=[a, b])}
        if a not in found or b not in found:
            self.message_user(
                request, "Choose two versions of this agent to compare.", messages.WARNING
            )
            return HttpResponseRedirect(self._url("versions", agent.pk))
        rows = [
            (key, _json_cell(before), _json_cell(after))
            for key, before, after in agents.config_diff(found[a].config, found[b].config)
        ]
        return self._page(
            request,
            agent,
            "admin/sessions_app/agent/compare.html",
            f"{agent}: v{a} → v{b}",
            a=found[a],
            b=found[b],
            table=html_table(["setting", f"before (v{a})", f"after (v{b})"], rows)
            if rows
            else None,
            numbers=list(agent.versions.order_by("-number").values_list("number", flat=True)),
        )

    def rollback_view(self, request, object_id, number: int):
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        agent, redirect = self._agent_or_redirect(request, object_id, change=True)
        if redirect:
            return redirect
        version = agent.versions.filter(number=number).first()
        latest = agents.latest_version(agent)
        if version is None:
            self.message_user(request, f"{agent} has no version v{number}.", messages.ERROR)
        elif version.pk == latest.pk:
            self.message_user(
                request, f"v{number} is already the latest version of {agent}.", messages.INFO
            )
        else:
            new = agents.rollback(version, user=request.user)
            self.log_change(
                request, agent, f"Rolled back to v{version.number}: new version v{new.number}."
            )
            self.message_user(
                request,
                f"{agent} is back to v{version.number}'s configuration as v{new.number}. "
                "Chats already started keep their version.",
            )
        return HttpResponseRedirect(self._url("versions", agent.pk))

    def make_default_view(self, request, object_id):
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        agent, redirect = self._agent_or_redirect(request, object_id, change=True)
        if redirect:
            return redirect
        self._make_default(request, agent)
        return HttpResponseRedirect(self._url("change", agent.pk))

    def change_view(self, request, object_id, form_url="", extra_context=None):
        extra_context = {
            **(extra_context or {}),
            "versions_url": self._url("versions", unquote(object_id)),
            "make_default_url": self._url("make_default", unquote(object_id)),
        }
        return super().change_view(request, object_id, form_url, extra_context)
