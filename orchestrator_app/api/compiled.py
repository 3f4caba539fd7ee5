"""Reads that run on every API request, compiled by Django once per database connection.

The agent permission check runs on every request and the poll's read of the session on every
poll (every few seconds per open sidebar). Both are one indexed query, but building and
compiling them with the ORM (two correlated ``EXISTS`` with their joins) cost about 50 times
running them: on a loaded 2-core machine the permission check took 6.5 ms built with the ORM
on every call and 0.1 to 0.2 ms compiled once (``bench/permission.py``; the target is 1 ms).
So the SQL Django compiled for the queryset is kept and run again with new values for its
trailing parameters. It is Django's own SQL, from the queryset ``build`` returns, so a
model, a user model or a backend change reaches it; nothing here is written by hand.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from django.db import connections, router
from django.db.models import Field, Model, QuerySet


class CompiledQuery:
    """``build(*values)``'s rows, compiled once per connection (and ``key()``). ``model()``
    is the model the router places the read by; callables, so the user model is looked up
    when the query runs (never at import).

    ``fields`` are the model fields that store ``values``: the last ``len(values)``
    parameters of the compiled SQL must be those values as the fields prepare them (checked
    when compiling; otherwise every call runs the queryset itself). The compiler is kept on
    the connection, so a thread's cache goes with its connection, and its converters turn the
    database's values into Python's as the ORM does (``results_iter``).
    """

    def __init__(
        self,
        model: Callable[[], type[Model]],
        build: Callable[..., QuerySet],
        fields: Callable[[], tuple[Field, ...]],
        key: Callable[[], Hashable] = tuple,
    ):
        self.model = model
        self.build = build
        self.fields = fields
        self.key = key

    def rows(self, *values: Any) -> list[tuple]:
        alias = router.db_for_read(self.model())
        connection = connections[alias]
        prepared = [
            field.get_db_prep_value(value, connection, prepared=False)
            for field, value in zip(self.fields(), values, strict=True)
        ]
        compiled = connection.__dict__.setdefault("ahentic_compiled_queries", {})
        key = (id(self), self.key())
        if key not in compiled:
            compiler = self.build(*values).using(alias).query.get_compiler(alias)
            sql, params = compiler.as_sql()
            fixed, trailing = params[: -len(values)], params[-len(values) :]
            compiled[key] = (compiler, sql, tuple(fixed)) if list(trailing) == prepared else None
        if compiled[key] is None:
            return list(self.build(*values).using(alias))
        compiler, sql, fixed = compiled[key]
        with connection.cursor() as cursor:
            cursor.execute(sql, (*fixed, *prepared))
            rows = cursor.fetchall()
        return list(compiler.results_iter(results=[rows], tuple_expected=True))
