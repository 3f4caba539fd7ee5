"""The database the site's routers pick for the app's models.

The app's models reference each other, so a site routes them to one database together (the
user model may live elsewhere only if the site's routers allow the relation). Every
transaction, row lock, ``on_commit`` hook and read-back of a write runs on the database
``router.db_for_write`` names for the model written, never on ``default`` by accident: a site
whose routers send reads to a replica still reads what it just wrote from the primary.
"""

from __future__ import annotations

from collections.abc import Callable

from django.apps import apps
from django.db import router, transaction
from django.db.models import Manager, Model


def write_alias(model: type[Model] | None = None) -> str:
    """The alias of the database ``model`` (default: ``Session``) is written to."""
    if model is None:
        # By its label: models.py imports this module, so this one does not import models.
        model = apps.get_model("sessions_app", "Session")
    return router.db_for_write(model)


def atomic(model: type[Model] | None = None, *, savepoint: bool = True):
    """``transaction.atomic`` on the database ``model`` (default: ``Session``) is written to."""
    return transaction.atomic(using=write_alias(model), savepoint=savepoint)


def on_commit(func: Callable[[], object], model: type[Model] | None = None) -> None:
    """Run ``func`` once the transaction of ``model``'s database commits (at once outside one)."""
    transaction.on_commit(func, using=write_alias(model))


def primary(model: type[Model]) -> Manager:
    """``model``'s manager on its write database: a read-back of a write (inside the writer's
    transaction, or right after it) must not go to a replica that has not seen it yet."""
    return model._default_manager.db_manager(write_alias(model))
