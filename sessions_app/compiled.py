"""Statements a step runs every time, compiled by Django once and run again with new values.

Building and compiling a small query through the ORM costs about ten times what the database
spends running it (a lease-guarded UPDATE: about 0.5 ms of Python for a 0.05 ms statement),
and a step runs the same few shapes every time: the run-state writes (``runstate``), its
session read and its window read. For those, and only those, the SQL Django compiled is kept:

- the queryset is built once per shape with ``Param`` placeholders where the values go, and
  Django compiles it (quoting, joins, the backend's operators: nothing here writes SQL);
- each run passes the values, prepared by the model field as the ORM prepares them
  (``get_db_prep_save`` for a value written, ``get_prep_value`` then ``get_db_prep_value`` for
  a value compared, as a lookup does);
- rows read go through the compiler's own converters (``results_iter``), so a UUID, a datetime
  or a JSON document comes back as the same Python value a queryset gives.

A compiled statement is kept on the connection it was compiled for (a compiler holds its
connection: kept anywhere else, it would keep a finished thread's connection open), keyed by
the caller's name for the shape.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import connections, router, transaction
from django.db.models import Expression, Field, Model, QuerySet
from django.db.models.sql import DeleteQuery, UpdateQuery


class _Slot:
    """Where a ``Param``'s value goes in the compiled parameters."""

    __slots__ = ("name", "field", "save")

    def __init__(self, name: str, field: Field, save: bool):
        self.name, self.field, self.save = name, field, save

    def prepare(self, value: Any, connection) -> Any:
        if self.save:
            return self.field.get_db_prep_save(value, connection)
        # As a lookup prepares its value (``get_prep_lookup``, then ``get_db_prep_lookup``).
        return self.field.get_db_prep_value(self.field.get_prep_value(value), connection, True)


class Param(Expression):
    """A placeholder for the value named ``name`` of model field ``field``: compared with
    (``save`` False: a lookup's value) or written to it (``save``: an UPDATE's value)."""

    def __init__(self, name: str, field: Field, *, save: bool = False):
        super().__init__(output_field=field)
        self.name, self.save = name, save

    def as_sql(self, compiler, connection):
        return "%s", [_Slot(self.name, self.output_field, self.save)]


def model_field(model: type[Model], name: str) -> Field:
    """``model``'s field ``name`` (``pk``: its primary key)."""
    return model._meta.pk if name == "pk" else model._meta.get_field(name)


def _kept(connection, key, compile: Callable[[], tuple]) -> tuple:
    kept = connection.__dict__.setdefault("_ahentic_compiled", {})
    found = kept.get(key)
    if found is None:
        found = kept[key] = compile()
    return found


def _params(params, values: dict[str, Any], connection) -> list[Any]:
    return [p.prepare(values[p.name], connection) if isinstance(p, _Slot) else p for p in params]


def update(key, model: type[Model], build: Callable[[], tuple[QuerySet, dict]], values) -> int:
    """Run the UPDATE ``build()`` describes (a queryset and its ``update()`` keyword
    arguments, with ``Param`` placeholders), compiled once per ``key``, with ``values`` (by
    placeholder name); returns the number of rows changed, as ``QuerySet.update`` does."""
    alias = router.db_for_write(model)
    connection = connections[alias]

    def compile() -> tuple:
        rows, fields = build()
        # A filter across a relation makes some backends read the matching keys first, at
        # compile time (MySQL): that SQL would hold the keys of the first run.
        if len(rows.query.alias_map) > 1:
            raise ValueError("compiled.update filters on the model's own columns only")
        query = rows.query.chain(UpdateQuery)  # what QuerySet.update() compiles
        query.add_update_values(fields)
        return query.get_compiler(alias).as_sql()

    sql, params = _kept(connection, ("update", key), compile)
    params = _params(params, values, connection)  # a value the field refuses raises here
    with transaction.mark_for_rollback_on_error(alias), connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


def delete(key, model: type[Model], build: Callable[[], QuerySet], values) -> int:
    """Run the DELETE of the queryset ``build()`` makes (with ``Param`` placeholders; rows that
    nothing references and no signal watches, as ``QuerySet.delete`` deletes them with one
    statement), compiled once per ``key``, with ``values``; returns the rows deleted."""
    alias = router.db_for_write(model)
    connection = connections[alias]

    def compile() -> tuple:
        query = build().query.clone()
        query.__class__ = DeleteQuery  # what QuerySet.delete() compiles for such rows
        return query.get_compiler(alias).as_sql()

    sql, params = _kept(connection, ("delete", key), compile)
    params = _params(params, values, connection)
    with transaction.mark_for_rollback_on_error(alias), connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


def _read_alias(model: type[Model], write: bool) -> str:
    return router.db_for_write(model) if write else router.db_for_read(model)


def rows(key, model: type[Model], build: Callable[[], QuerySet], values, *, write: bool = False):
    """The rows of the ``values_list`` queryset ``build()`` makes (with ``Param``
    placeholders), compiled once per ``key``, with ``values`` (by placeholder name), converted
    as the queryset converts them. ``write``: read from the write database (a worker reads
    what it is about to act on)."""
    alias = _read_alias(model, write)
    connection = connections[alias]

    def compile() -> tuple:
        compiler = build().query.get_compiler(alias)
        sql, params = compiler.as_sql()
        return sql, params, compiler

    sql, params, compiler = _kept(connection, ("rows", key), compile)
    params = _params(params, values, connection)  # a value the field refuses raises here
    with transaction.mark_for_rollback_on_error(alias), connection.cursor() as cursor:
        cursor.execute(sql, params)
        fetched = cursor.fetchall()
    return list(compiler.results_iter([fetched], tuple_expected=True))


def attnames(model: type[Model], *, defer: tuple[str, ...] = ()) -> list[str]:
    """The attribute names of ``model``'s concrete fields in order, but ``defer``."""
    return [f.attname for f in model._meta.concrete_fields if f.name not in defer]


def instances(
    key,
    model: type[Model],
    build: Callable[[], QuerySet],
    values,
    *,
    defer: tuple[str, ...] = (),
    write: bool = False,
) -> list[Model]:
    """``rows`` of ``model``'s fields (``attnames``: ``build()`` selects them in that order)
    as model instances, built the way a queryset builds them (``Model.from_db``; the fields of
    ``defer`` are deferred)."""
    names = attnames(model, defer=defer)
    alias = _read_alias(model, write)
    found = rows(key, model, build, values, write=write)
    return [model.from_db(alias, names, row) for row in found]
