"""The built-in tools, discovered like a host app's ``ahentic_tools`` module.

Every module of ``orchestrator_app.tools`` registers its tools when imported; adding a built-in
is adding a file there.
"""

from __future__ import annotations

import importlib
import pkgutil

from . import tools

for module in pkgutil.iter_modules(tools.__path__):
    importlib.import_module(f"{tools.__name__}.{module.name}")
