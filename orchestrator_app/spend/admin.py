"""Spend in the admin: one page with spend per day as a chart, by agent, user or schedule.

The page is the changelist of ``Spend``, a proxy of the ledger with no permissions of its own:
staff who may view the ledger (``orchestrator_app.view_usagerecord``) see it. It shows the
last 7, 30 or 90 days (``?days=``) by agent, user or schedule (``?by=``, ``services.DIMENSIONS``),
the top values by cost and the rest as "other": a stacked bar chart of USD per day, a small
chart of the site's tokens per day against ``DAILY_TOKEN_LIMIT``, and the tables carrying the
same numbers. The charts are SVG drawn here, no script: each has a title and a description,
and each bar a tooltip.
"""

from __future__ import annotations

from datetime import date
from decimal import Decimal

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.template.response import TemplateResponse
from django.urls import path
from django.utils import formats
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from ..ledger.usage import usd
from ..models import Spend
from .services import DIMENSIONS, OTHER, PERIODS, Report, spend_report

PERMISSION = "orchestrator_app.view_usagerecord"
# Bar colours (the admin's palette, then distinct hues); "other" is grey.
COLOURS = ("#417690", "#e0a030", "#5b9b5b", "#b05050", "#7a5fa8", "#3aa3a3")
OTHER_COLOUR = "#9a9a9a"
LIMIT_COLOUR = "#ba2121"

WIDTH, HEIGHT, SMALL_HEIGHT = 760, 260, 140
LEFT, RIGHT, TOP, BOTTOM = 64, 12, 12, 28


def day_label(day: date) -> str:
    return formats.date_format(day, "M j")


def _colour(index: int, name: str) -> str:
    return OTHER_COLOUR if name == OTHER else COLOURS[index % len(COLOURS)]


def _axis(height: int, top_value: float, label) -> SafeString:
    """The y axis: a baseline and three labelled gridlines (0, half, top)."""
    plot = height - TOP - BOTTOM
    lines = []
    for share in (0, 0.5, 1):
        y = TOP + plot * (1 - share)
        lines.append(
            format_html(
                '<line x1="{}" x2="{}" y1="{}" y2="{}" stroke="#ccc" />'
                '<text x="{}" y="{}" text-anchor="end" font-size="11">{}</text>',
                LEFT,
                WIDTH - RIGHT,
                f"{y:.1f}",
                f"{y:.1f}",
                LEFT - 6,
                f"{y + 4:.1f}",
                label(top_value * share),
            )
        )
    return SafeString("".join(lines))


def _day_ticks(days: list[date], height: int) -> SafeString:
    """Day labels under the bars, at most about eight."""
    step = max(1, len(days) // 8)
    slot = (WIDTH - LEFT - RIGHT) / len(days)
    return format_html_join(
        "",
        '<text x="{}" y="{}" text-anchor="middle" font-size="11">{}</text>',
        (
            (f"{LEFT + slot * (i + 0.5):.1f}", height - 8, day_label(day))
            for i, day in enumerate(days)
            if i % step == 0
        ),
    )


def _svg(height: int, title: str, desc: str, ident: str, body: SafeString) -> SafeString:
    return format_html(
        '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {} {}" width="100%" '
        'role="img" aria-labelledby="{}-title {}-desc" class="ahentic-spend-chart">'
        '<title id="{}-title">{}</title><desc id="{}-desc">{}</desc>{}</svg>',
        WIDTH,
        height,
        ident,
        ident,
        ident,
        title,
        ident,
        desc,
        body,
    )


def spend_chart(report: Report) -> SafeString:
    """USD per day, one stacked bar per day, a segment per series."""
    days = report.days
    top_value = max((report.day_cost(day) for day in days), default=Decimal(0)) or Decimal(1)
    plot = HEIGHT - TOP - BOTTOM
    slot = (WIDTH - LEFT - RIGHT) / len(days)
    bars = []
    for i, day in enumerate(days):
        y = TOP + plot
        for index, series in enumerate(report.series):
            cost = series.cost.get(day, Decimal(0))
            if not cost:
                continue
            h = float(cost / top_value) * plot
            y -= h
            bars.append(
                format_html(
                    '<rect x="{}" y="{}" width="{}" height="{}" fill="{}">'
                    "<title>{}, {}: {}</title></rect>",
                    f"{LEFT + slot * i + slot * 0.1:.1f}",
                    f"{y:.1f}",
                    f"{slot * 0.8:.1f}",
                    f"{h:.1f}",
                    _colour(index, series.name),
                    day_label(day),
                    series.name,
                    usd(cost),
                )
            )
    title = f"Spend per day by {report.dimension.label.lower()}, last {len(days)} days"
    desc = (
        f"{usd(report.total)} in all from {day_label(days[0])} to {day_label(days[-1])}; "
        "the table below the chart has the numbers."
    )
    body = _axis(HEIGHT, float(top_value), lambda v: usd(Decimal(str(round(v, 4)))))
    body += SafeString("".join(bars)) + _day_ticks(days, HEIGHT)
    return _svg(HEIGHT, title, desc, "ahentic-spend", body)


def tokens_chart(report: Report) -> SafeString:
    """The site's tokens per day, with the daily limit as a dashed line."""
    days, limit = report.days, report.daily_limit
    used = [report.site_tokens.get(day, 0) for day in days]
    top_value = max([*used, limit or 0]) or 1
    plot = SMALL_HEIGHT - TOP - BOTTOM
    slot = (WIDTH - LEFT - RIGHT) / len(days)
    bars = format_html_join(
        "",
        '<rect x="{}" y="{}" width="{}" height="{}" fill="#79aec8"><title>{}: {} tokens'
        "</title></rect>",
        (
            (
                f"{LEFT + slot * i + slot * 0.1:.1f}",
                f"{TOP + plot - count / top_value * plot:.1f}",
                f"{slot * 0.8:.1f}",
                f"{count / top_value * plot:.1f}",
                day_label(day),
                f"{count:,}",
            )
            for i, (day, count) in enumerate(zip(days, used, strict=True))
            if count
        ),
    )
    line = SafeString("")
    if limit:
        y = TOP + plot - limit / top_value * plot
        line = format_html(
            '<line x1="{}" x2="{}" y1="{}" y2="{}" stroke="{}" stroke-dasharray="6 4" />'
            '<text x="{}" y="{}" text-anchor="end" font-size="11" fill="{}">daily limit {}'
            "</text>",
            LEFT,
            WIDTH - RIGHT,
            f"{y:.1f}",
            f"{y:.1f}",
            LIMIT_COLOUR,
            WIDTH - RIGHT,
            f"{max(y - 4, 10):.1f}",
            LIMIT_COLOUR,
            f"{limit:,}",
        )
    limit_words = f"the daily limit is {limit:,} tokens" if limit else "there is no daily limit"
    desc = f"Most in a day: {max(used):,} tokens; {limit_words}."
    body = _axis(SMALL_HEIGHT, top_value, lambda v: f"{round(v):,}") + bars + line
    body += _day_ticks(days, SMALL_HEIGHT)
    title = f"Tokens per day on the whole site, last {len(days)} days"
    return _svg(SMALL_HEIGHT, title, desc, "ahentic-tokens", body)


def _choice(value: str | None, allowed, default):
    return value if value in allowed else default


@admin.register(Spend)
class SpendAdmin(admin.ModelAdmin):
    """The spend page (its changelist); nothing is listed, added or changed here."""

    def has_view_permission(self, request, obj=None) -> bool:
        return request.user.has_perm(PERMISSION)

    def has_module_permission(self, request) -> bool:
        return self.has_view_permission(request)

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def get_urls(self):
        info = self.opts.app_label, self.opts.model_name
        view = self.admin_site.admin_view(self.changelist_view)
        return [path("", view, name="{}_{}_changelist".format(*info))]

    def changelist_view(self, request, extra_context=None):
        if not self.has_view_permission(request):
            raise PermissionDenied
        days = int(_choice(request.GET.get("days"), [str(p) for p in PERIODS], "30"))
        by = _choice(request.GET.get("by"), DIMENSIONS, "agent")
        report = spend_report(days=days, by=by)
        legend = [
            (_colour(index, series.name), series) for index, series in enumerate(report.series)
        ]
        request.current_app = self.admin_site.name
        return TemplateResponse(
            request,
            "admin/orchestrator_app/spend/change_list.html",
            {
                **self.admin_site.each_context(request),
                **(extra_context or {}),
                "opts": self.opts,
                "title": "Spend",
                "report": report,
                "days": days,
                "by": by,
                "periods": PERIODS,
                "dimensions": [(key, d.label) for key, d in DIMENSIONS.items()],
                "spend_chart": spend_chart(report),
                "tokens_chart": tokens_chart(report),
                "legend": legend,
                "totals": [
                    (colour, series.name, usd(series.total), f"{series.tokens:,}", series.calls)
                    for colour, series in legend
                ],
                "total": usd(report.total),
                "total_tokens": f"{report.tokens:,}",
                "daily_limit": f"{report.daily_limit:,}" if report.daily_limit else "",
                "per_day": [
                    (
                        day,
                        [usd(s.cost.get(day, Decimal(0))) for s in report.series],
                        usd(report.day_cost(day)),
                        f"{report.site_tokens.get(day, 0):,}",
                    )
                    for day in reversed(report.days)
                ],
            },
        )
