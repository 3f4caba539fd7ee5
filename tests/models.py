"""Test-only tables (the ``ahentic_tests`` app has no migrations: its tables are made from these).

Shelves have character primary keys, which the admin quotes in its URLs (``:`` is ``_3A``, and
``_3A`` itself is ``_5F3A``); a book protects its shelf from deletion. The admin tools tests
register both with the admin; a book's format (choices) and publication date show how list values
are rendered.
"""

from django.db import models


class Shelf(models.Model):
    code = models.CharField(primary_key=True, max_length=20)
    name = models.CharField(max_length=100)
    on_display = models.BooleanField(default=False)

    class Meta:
        ordering = ["code"]

    def __str__(self) -> str:
        return self.name


class Book(models.Model):
    FORMATS = [("paper", "Paperback"), ("hard", "Hardcover")]

    shelf = models.ForeignKey(Shelf, on_delete=models.PROTECT)
    title = models.CharField(max_length=100)
    format = models.CharField(max_length=10, choices=FORMATS, default="paper")
    published = models.DateField(null=True, blank=True)

    def __str__(self) -> str:
        return self.title
