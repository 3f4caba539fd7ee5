from django.contrib import admin

from tests.models import Book, Shelf


@admin.register(Shelf)
class ShelfAdmin(admin.ModelAdmin):
    list_display = ["code", "name", "on_display"]
    list_filter = ["on_display"]


@admin.register(Book)
class BookAdmin(admin.ModelAdmin):
    list_display = ["title", "shelf", "format", "published"]
