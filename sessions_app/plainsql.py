"""Plain SQL for the statements every step runs.

A step makes about 30 small indexed queries. Through the ORM, building and compiling each one
costs 0.3-2 ms of Python (an ``Exists`` annotation alone about 1.4 ms), about ten times what
the database spends on it, so most of a step's time went to query building. The step's reads
are written here as SQL text instead, once per statement shape:

- ``render`` fills a template's ``{table}`` and ``{field}`` names with the model's quoted table
  and column names (``{pk}`` is the primary key), cached per database, so the SQL follows the
  models and the database backend quotes it;
- ``select`` runs it and converts each value as the ORM does (the fields' and the backend's
  converters: a UUID, a datetime or a JSON document comes back as the same Python value a
  queryset gives);
- ``instances`` builds model instances from such rows (``Model.from_db``, like a queryset);
- ``insert`` and ``execute`` write (a write that fails inside a transaction marks it for
  rollback, as the ORM's writes do).

Parameters go through the fields' own preparation (``param``), so they are stored and compared
exactly as the ORM does. Anything that is not on the step's hot path stays on the ORM.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connections, router, transaction
from django.db.models import Model

_RENDERED: dict[tuple[str, type[Model], str], str] = {}


def field(model: type[Model], name: str):
    """The model field ``name`` names (``pk`` is the primary key)."""
    return model._meta.pk if name == "pk" else model._meta.get_field(name)


def connection_for(model: type[Model], *, write: bool = False):
    alias = router.db_for_write(model) if write else router.db_for_read(model)
    return connections[alias]


class _Names(dict):
    def __init__(self, model: type[Model], connection):
        super().__init__()
        self.model, self.quote = model, connection.ops.quote_name

    def __missing__(self, name: str) -> str:
        if name == "table":
            return self.quote(self.model._meta.db_table)
        return self.quote(field(self.model, name).column)


def render(model: type[Model], template: str, connection) -> str:
    """``template`` with ``{table}`` and ``{field_name}`` replaced by quoted names."""
    key = (connection.alias, model, template)
    sql = _RENDERED.get(key)
    if sql is None:
        sql = _RENDERED[key] = template.format_map(_Names(model, connection))
    return sql


def param(model: type[Model], name: str, value: Any, connection) -> Any:
    """``value`` as the ORM passes it to the database for field ``name`` (a lookup value)."""
    return field(model, name).get_db_prep_value(value, connection, prepared=False)


def saved(model: type[Model], name: str, value: Any, connection) -> Any:
    """``value`` as the ORM passes it to the database to store in field ``name``."""
    return field(model, name).get_db_prep_save(value, connection)


def converters(model: type[Model], names: Sequence[str], connection) -> list:
    """Per column of ``names``: the converters the ORM applies to its values when reading.

    Kept on the connection itself: the backend's converters are its methods, so a module-level
    cache would keep the first connection of every thread alive (and open) for good."""
    cache = connection.__dict__.setdefault("_ahentic_converters", {})
    key = (model, tuple(names))
    found = cache.get(key)
    if found is None:
        found = []
        for name in names:
            column = field(model, name).get_col(model._meta.db_table)
            found.append(
                (
                    column,
                    connection.ops.get_db_converters(column) + column.get_db_converters(connection),
                )
            )
        cache[key] = found
    return found


def convert(row: Sequence[Any], columns: list, connection) -> list[Any]:
    """A cursor row as Python values (``columns`` from ``converters``)."""
    values = list(row)
    for i, (column, functions) in enumerate(columns):
        for function in functions:
            values[i] = function(values[i], column, connection)
    return values


def select(
    model: type[Model],
    names: Sequence[str],
    template: str,
    params: Sequence[Any],
    *,
    write: bool = False,
) -> list[list[Any]]:
    """Run ``template`` (rendered for ``model``), which selects the columns of ``names`` first
    in that order (more columns may follow, returned as the database gives them), and return
    the rows with those values converted. ``write``: a write that returns rows (``UPDATE ...
    RETURNING``), on the write database and marked for rollback when it fails."""
    connection = connection_for(model, write=write)
    columns = converters(model, names, connection)
    with transaction.mark_for_rollback_on_error(connection.alias), connection.cursor() as cursor:
        cursor.execute(render(model, template, connection), params)
        rows = cursor.fetchall()
    return [convert(row, columns, connection) for row in rows]


def instances(
    model: type[Model], names: Sequence[str], rows: list[list[Any]], connection
) -> list[Model]:
    """Model instances from converted rows of the fields ``names`` (in the model's field
    order; the fields not selected are deferred, as with ``only``)."""
    attnames = [field(model, name).attname for name in names]
    return [model.from_db(connection.alias, attnames, row) for row in rows]


def fetch(
    model: type[Model], names: Sequence[str], template: str, params: Sequence[Any]
) -> list[Model]:
    """``select`` as model instances (``names`` in the model's field order)."""
    rows = select(model, names, template, params)
    return instances(model, names, rows, connection_for(model))


def all_fields(model: type[Model], *, defer: Sequence[str] = ()) -> list[str]:
    """The names of ``model``'s concrete fields in order, but ``defer``."""
    return [f.name for f in model._meta.concrete_fields if f.name not in defer]


def select_list(names: Sequence[str]) -> str:
    """A template's column list: ``{table}.{a}, {table}.{b}``."""
    return ", ".join(f"{{table}}.{{{name}}}" for name in names)


def execute(model: type[Model], template: str, params: Sequence[Any]) -> int:
    """Run a write (``template`` rendered for ``model``); returns the rows it changed."""
    connection = connection_for(model, write=True)
    with transaction.mark_for_rollback_on_error(connection.alias), connection.cursor() as cursor:
        cursor.execute(render(model, template, connection), params)
        return cursor.rowcount


def insert(
    model: type[Model], names: Sequence[str], rows: Sequence[Sequence[Any]]
) -> list[Any] | None:
    """INSERT ``rows`` (values of the fields ``names``, prepared as the ORM saves them; nothing
    fills defaults or ``auto_now_add`` here). Returns the new primary keys in order where the
    database returns them from one statement (PostgreSQL, SQLite >= 3.35), else None."""
    connection = connection_for(model, write=True)
    fields = [field(model, name) for name in names]
    returns = connection.features.can_return_rows_from_bulk_insert
    head = render(
        model,
        "INSERT INTO {table} (" + ", ".join(f"{{{n}}}" for n in names) + ") VALUES ",
        connection,
    )
    tail = " RETURNING " + render(model, "{pk}", connection) if returns else ""
    one = "(" + ", ".join(["%s"] * len(names)) + ")"
    batch = max(1, connection.ops.bulk_batch_size(fields, rows))
    keys: list[Any] = []
    with transaction.mark_for_rollback_on_error(connection.alias), connection.cursor() as cursor:
        for start in range(0, len(rows), batch):
            chunk = rows[start : start + batch]
            params = [
                f.get_db_prep_save(value, connection)
                for row in chunk
                for f, value in zip(fields, row, strict=True)
            ]
            cursor.execute(head + ", ".join([one] * len(chunk)) + tail, params)
            if returns:
                keys.extend(row[0] for row in cursor.fetchall())
    return keys if returns else None


def insert_new(instances: Sequence[Model]) -> bool:
    """``insert`` unsaved ``instances`` of one model (every concrete field but the primary key,
    as the instances hold them: set ``auto_now_add`` fields yourself) and mark them saved, as
    ``bulk_create`` does. False when the database returned no primary keys (then they are
    None; see ``insert``)."""
    model = type(instances[0])
    fields = [f for f in model._meta.concrete_fields if not f.primary_key]
    rows = [[getattr(obj, f.attname) for f in fields] for obj in instances]
    keys = insert(model, [f.name for f in fields], rows)
    alias = connection_for(model, write=True).alias
    for i, obj in enumerate(instances):
        obj.pk = keys[i] if keys else None
        obj._state.adding, obj._state.db = False, alias
    return keys is not None
