"""Scheduled runs in the admin: the schedules (with Pause, Unpause and Run now) and their run
log. Managing schedules takes the model permissions on ``Schedule`` (add, change; view to
read them and their log). Every write goes through ``control.schedules``; the form refuses a
schedule whose user may not use its agent, with the reason a firing would give.
"""

from __future__ import annotations

from zoneinfo import ZoneInfo

from django import forms
from django.contrib import admin, messages
from django.db.models import OuterRef, Subquery
from django.utils.safestring import SafeString

from sessions_app import agents
from sessions_app.admin.base import ReadOnlyAdmin, UsernameColumn, admin_link, excerpt, html_table
from sessions_app.conf import ahentic_settings

from ..models import Schedule, ScheduleRun
from ..tools import get_tool
from . import services as schedules

# Runs shown on a schedule's change page (the run log has them all).
RECENT_RUNS = 20


class ScheduleForm(forms.ModelForm):
    class Meta:
        model = Schedule
        fields = [
            "name",
            "agent",
            "agent_version",
            "run_as",
            "cron",
            "time_zone",
            "first_message",
            "chat_mode",
            "spend_cap_usd",
        ]

    def clean_first_message(self) -> str:
        text = self.cleaned_data["first_message"].strip()
        limit = int(ahentic_settings.MAX_MESSAGE_CHARS)
        if len(text) > limit:
            raise forms.ValidationError(f"The limit is {limit} characters; this has {len(text)}.")
        return text

    def clean(self):
        data = super().clean()
        agent, version, user = data.get("agent"), data.get("agent_version"), data.get("run_as")
        if agent is None:
            if "agent" not in self.errors:
                self.add_error("agent", "Choose the agent the schedule runs.")
            return data
        if version is not None and version.agent_id != agent.pk:
            self.add_error("agent_version", f"{version} is not a version of {agent}.")
        if user is not None:
            found = schedules.refusal(Schedule(agent=agent, agent_version=version, run_as=user))
            if isinstance(found, schedules.Refusal):
                raise forms.ValidationError(f"This schedule could not run: {found.message}")
        return data


def _browser_tools_named(schedule: Schedule) -> list[str]:
    """The browser tools the version a firing would run names in its ``TOOLS``. A scheduled
    run has no browser (``Session.browser_available``): they are never offered to it, so the
    admin's form warns. An agent that names no tools (every tool) gets no warning: its
    browser tools are simply left out of its scheduled runs."""
    version = schedule.agent_version
    if version is None or version.agent_id != schedule.agent_id:
        version = agents.latest_version(schedule.agent) if schedule.agent_id else None
    named = agents.AgentSettings(version.config).TOOLS if version is not None else None
    found = [get_tool(name) for name in named or []]
    return [tool.name for tool in found if tool is not None and tool.runtime == "browser"]


def _in_zone(schedule: Schedule, moment) -> str:
    if moment is None:
        return "-"
    local = moment.astimezone(ZoneInfo(schedule.time_zone))
    return f"{local:%Y-%m-%d %H:%M %Z}"


@admin.register(Schedule)
class ScheduleAdmin(admin.ModelAdmin):
    form = ScheduleForm
    list_display = [
        "name",
        "agent",
        "run_as_name",
        "cron",
        "time_zone",
        "next_due",
        "last_status",
        "paused",
        "paused_reason",
    ]
    list_filter = ["paused", "agent", "chat_mode"]
    search_fields = ["name", "first_message"]
    list_select_related = ["agent", "run_as"]
    actions = ["pause_schedules", "unpause_schedules", "run_now"]
    readonly_fields = [
        "next_due",
        "paused",
        "paused_reason",
        "consecutive_failures",
        "chat_link",
        "recent_runs",
    ]
    fieldsets = [
        (None, {"fields": ["name", ("agent", "agent_version"), "run_as"]}),
        ("When", {"fields": [("cron", "time_zone"), "next_due"]}),
        ("What", {"fields": ["first_message", ("chat_mode", "chat_link"), "spend_cap_usd"]}),
        ("State", {"fields": [("paused", "paused_reason"), "consecutive_failures"]}),
        ("Runs", {"fields": ["recent_runs"]}),
    ]
    run_as_name = UsernameColumn("run_as")

    def get_queryset(self, request):
        # The list's "last run" column in the same query (no query per row).
        last = ScheduleRun.objects.filter(schedule=OuterRef("pk")).order_by("-due_at")
        return (
            super()
            .get_queryset(request)
            .annotate(
                last_run_status=Subquery(last.values("status")[:1]),
                last_run_due=Subquery(last.values("due_at")[:1]),
            )
        )

    def save_model(self, request, obj, form, change) -> None:
        schedules.schedule_save(obj, fields=list(form.changed_data) if change else None)
        browser = _browser_tools_named(obj)
        if browser:
            self.message_user(
                request,
                f"{obj}: the agent's tools include browser tools ({', '.join(browser)}). A "
                "scheduled run has no browser: they are not offered to it, and a call to one "
                "is answered with an error.",
                messages.WARNING,
            )

    @admin.display(description="next due", ordering="next_due_at")
    def next_due(self, obj: Schedule) -> str:
        if obj.paused:
            return "paused"
        return _in_zone(obj, obj.next_due_at)

    @admin.display(description="last run")
    def last_status(self, obj: Schedule) -> str:
        if not obj.last_run_status:
            return "-"
        return f"{obj.last_run_status} ({_in_zone(obj, obj.last_run_due)})"

    @admin.display(description="chat")
    def chat_link(self, obj: Schedule) -> SafeString | str:
        return admin_link(obj.chat, obj.chat.title, self.admin_site.name) if obj.chat else "-"

    @admin.display(description="recent runs")
    def recent_runs(self, obj: Schedule) -> SafeString:
        rows = obj.runs.select_related("session")[:RECENT_RUNS]
        return html_table(
            ["due", "status", "started", "finished", "chat", "cost (USD)", "error"],
            (_run_cells(run, obj, self.admin_site.name) for run in rows),
        )

    @admin.action(description="Pause the selected schedules", permissions=["change"])
    def pause_schedules(self, request, queryset) -> None:
        who = request.user.get_username()
        done = sum(schedules.pause(s, reason=f"Paused by {who}.") for s in queryset)
        self.message_user(request, f"Paused {done} schedule(s).", messages.SUCCESS)

    @admin.action(
        description="Unpause the selected schedules (no catching up)", permissions=["change"]
    )
    def unpause_schedules(self, request, queryset) -> None:
        done = sum(schedules.unpause(s) for s in queryset)
        self.message_user(
            request,
            f"Unpaused {done} schedule(s); each runs from its next due time on.",
            messages.SUCCESS,
        )

    @admin.action(description="Run the selected schedules now", permissions=["change"])
    def run_now(self, request, queryset) -> None:
        for schedule in queryset.select_related("agent", "agent_version", "run_as"):
            row = schedules.run_now(schedule)
            if row is None:
                self.message_user(
                    request,
                    f"{schedule}: already ran this minute; try again in a minute.",
                    messages.WARNING,
                )
            elif row.status == ScheduleRun.Status.FAILED:
                self.message_user(request, f"{schedule}: {row.error}", messages.ERROR)
            elif row.status == ScheduleRun.Status.SKIPPED:
                self.message_user(request, f"{schedule}: skipped. {row.error}", messages.WARNING)
            else:
                self.message_user(request, f"{schedule}: started.", messages.SUCCESS)


def _run_cells(run: ScheduleRun, schedule: Schedule, site_name: str) -> list:
    chat = admin_link(run.session, run.session.title, site_name) if run.session else "-"
    return [
        _in_zone(schedule, run.due_at) + (" (run now)" if run.manual else ""),
        run.status,
        _in_zone(schedule, run.started_at),
        _in_zone(schedule, run.finished_at),
        chat,
        run.cost_usd if run.cost_usd is not None else "-",
        excerpt(f"{run.error_code}: {run.error}", 160) if run.error_code else "",
    ]


@admin.register(ScheduleRun)
class ScheduleRunAdmin(ReadOnlyAdmin):
    """The run log: read-only, for staff who may see schedules."""

    list_display = [
        "due_at",
        "schedule",
        "status",
        "started_at",
        "finished_at",
        "chat",
        "cost_usd",
        "error_code",
    ]
    list_filter = ["status", "schedule", "manual"]
    date_hierarchy = "due_at"
    list_select_related = ["schedule", "session"]
    fields = [
        ("schedule", "due_at", "manual"),
        ("status", "started_at", "finished_at"),
        ("chat", "run", "cost_usd"),
        ("error_code", "error"),
    ]

    def has_view_permission(self, request, obj=None) -> bool:
        return request.user.has_perm("orchestrator_app.view_schedule") or request.user.has_perm(
            "orchestrator_app.change_schedule"
        )

    def has_module_permission(self, request) -> bool:
        return self.has_view_permission(request)

    @admin.display(description="chat")
    def chat(self, obj: ScheduleRun) -> SafeString | str:
        if obj.session is None:
            return "-"
        return admin_link(obj.session, obj.session.title, self.admin_site.name)
