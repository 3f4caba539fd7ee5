"""admin_list through the ModelAdmin's own ChangeList, on any AdminSite (issue 21, item 8).

A shelf admin registered only on a second AdminSite, with a SimpleListFilter, a get_queryset that
hides a row, and list_display callables (a ``boolean`` one, a ``format_html`` one, a plain
function); books on the default site with a foreign key, a choices field and a date. The model
calls the tools through the local Messages API server and the test reads the results it got.
"""

from types import SimpleNamespace

import pytest
from django.contrib import admin
from django.utils.html import format_html

from tests.admin import ShelfAdmin
from tests.models import Book, Shelf
from tests.support.admin import SHELVES, check_ids, every_database

pytestmark = pytest.mark.usefixtures("llm_strict", "enabled")
BOOKS = "ahentic_tests.book"


class Shown(admin.SimpleListFilter):
    title = "shown"
    parameter_name = "shown"

    def lookups(self, request, model_admin):
        return [("yes", "On display"), ("no", "In storage")]

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.filter(on_display=True)
        if self.value() == "no":
            return queryset.filter(on_display=False)
        return queryset


def books(shelf) -> int:
    return shelf.book_set.count()


class LibraryShelfAdmin(admin.ModelAdmin):
    list_display = ["code", "label", "on_display", "lit", books]
    list_filter = [Shown]
    search_fields = ["name"]
    readonly_fields = ["lit"]

    @admin.display(description="Label")
    def label(self, shelf):
        return format_html("<b>{}</b>", shelf.name)

    @admin.display(boolean=True, description="Lit")
    def lit(self, shelf):
        return shelf.on_display

    def get_queryset(self, request):
        return super().get_queryset(request).exclude(code="staff")


class TitlesOnlyBookAdmin(admin.ModelAdmin):
    list_display = ["title"]


@pytest.fixture
def library(shelves):
    """Shelves only on a second AdminSite; books on both (the default site's admin wins)."""
    site = admin.AdminSite(name="library")
    admin.site.unregister(Shelf)
    site.register(Shelf, LibraryShelfAdmin)
    site.register(Book, TitlesOnlyBookAdmin)
    atlas = Shelf.objects.create(code="a", name="Atlas & maps", on_display=True)
    Shelf.objects.create(code="b", name="Basement", on_display=False)
    Shelf.objects.create(code="staff", name="Staff room")
    world = Book.objects.create(
        shelf=atlas, title="World atlas", format="hard", published="2024-05-01"
    )
    city = Book.objects.create(shelf=atlas, title="City maps")
    yield SimpleNamespace(site=site, user=shelves.user, world=world, city=city)
    admin.site.register(Shelf, ShelfAdmin)


def test_a_model_only_on_a_second_site_lists_through_its_changelist(agent_for, library):
    agent = agent_for(library.user)

    listed = agent.call("admin_list", {"model": SHELVES})

    # The admin's get_queryset hides the staff room; its ordering (Meta: code) holds.
    assert listed["count"] == 2
    assert listed["rows"] == [
        {
            "id": "a",
            "repr": "Atlas & maps",
            "code": "a",
            "label": "Atlas & maps",
            "on_display": True,
            "lit": True,
            "books": 2,
        },
        {
            "id": "b",
            "repr": "Basement",
            "code": "b",
            "label": "Basement",
            "on_display": False,
            "lit": False,
            "books": 0,
        },
    ]


def test_a_simple_list_filter_and_search_work_and_odd_values_are_refused(agent_for, library):
    agent = agent_for(library.user)

    stored = agent.call("admin_list", {"model": SHELVES, "filters": {"shown": "no"}})
    shown = agent.call("admin_list", {"model": SHELVES, "filters": {"shown": "yes"}})
    found = agent.call("admin_list", {"model": SHELVES, "search": "basem"})
    odd = agent.call("admin_list", {"model": SHELVES, "filters": {"shown": "maybe"}})
    unknown = agent.call("admin_list", {"model": SHELVES, "filters": {"on_display": True}})

    assert [r["id"] for r in stored["rows"]] == ["b"]
    assert [r["id"] for r in shown["rows"]] == ["a"]
    assert [r["id"] for r in found["rows"]] == ["b"]
    assert (odd["error"], odd["choices"]) == (
        "admin_invalid",
        [["yes", "On display"], ["no", "In storage"]],
    )
    assert (unknown["error"], unknown["filters"]) == ("admin_invalid", ["shown"])


def test_a_read_only_boolean_callable_reads_as_a_boolean(agent_for, library):
    got = agent_for(library.user).call("admin_get", {"model": SHELVES, "id": "a"})

    assert (got["fields"]["on_display"], got["fields"]["lit"]) == (True, True)


def test_describe_names_the_simple_filter_its_choices_and_the_callable_columns(
    agent_for,
    library,
):
    described = agent_for(library.user).call("admin_models", {"model": SHELVES})

    assert described["columns"] == ["code", "label", "on_display", "lit", "books"]
    assert described["filters"] == ["shown"]
    assert described["filterChoices"] == {"shown": [["yes", "On display"], ["no", "In storage"]]}


def test_values_come_from_the_field_and_the_default_site_wins(agent_for, library):
    listed = agent_for(library.user).call("admin_list", {"model": BOOKS, "ordering": "title"})

    # The default site's BookAdmin (title, shelf, format, published), not the library's.
    assert listed["rows"] == [
        {
            "id": library.city.pk,
            "repr": "City maps",
            "title": "City maps",
            "shelf": {"id": "a", "repr": "Atlas & maps"},
            "format": "Paperback",
            "published": None,
        },
        {
            "id": library.world.pk,
            "repr": "World atlas",
            "title": "World atlas",
            "shelf": {"id": "a", "repr": "Atlas & maps"},
            "format": "Hardcover",
            "published": "2024-05-01",
        },
    ]


def test_a_date_range_and_null_filter_through_the_changelist(agent_for, library, monkeypatch):
    monkeypatch.setattr(admin.site._registry[Book], "list_filter", ["published", "format"])
    agent = agent_for(library.user)

    ranged = agent.call(
        "admin_list",
        {"model": BOOKS, "filters": {"published__range": ["2024-01-01", "2024-12-31"]}},
    )
    undated = agent.call("admin_list", {"model": BOOKS, "filters": {"published": None}})
    bad = agent.call("admin_list", {"model": BOOKS, "filters": {"published__range": ["x"]}})

    assert [r["title"] for r in ranged["rows"]] == ["World atlas"]
    assert [r["title"] for r in undated["rows"]] == ["City maps"]
    assert (bad["error"], list(bad["errors"])) == ("admin_invalid", ["filters"])


@every_database
def test_the_system_check_accepts_a_model_registered_on_a_second_site(db, settings, library):
    settings.AHENTIC = {**settings.AHENTIC, "ADMIN_TOOLS": [SHELVES]}
    # Registered (no E006); its admin there lacks the stale-form mixin: a warning only.
    assert check_ids() == {"ahentic.W005"}
