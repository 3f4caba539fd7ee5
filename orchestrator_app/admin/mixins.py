"""Mixins a host adds to its own ``ModelAdmin`` classes (opt-in; nothing is patched).

``StaleChangeFormMixin``: a change form opened before the agent (or anyone) changed its object
warns and saves nothing instead of writing the old values back. Put it first in the bases of
the ModelAdmin of every ``AHENTIC["ADMIN_TOOLS"]`` model (system check ``ahentic.W005`` names
the ones that lack it)::

    from django.contrib.flatpages.admin import FlatPageAdmin
    from orchestrator_app.admin.mixins import StaleChangeFormMixin

    class PageAdmin(StaleChangeFormMixin, FlatPageAdmin):
        pass
"""

from ..tools.admin_tools.stale import StaleChangeFormMixin

__all__ = ["StaleChangeFormMixin"]
