"""The app's admin pages, loaded one way: Django's admin autodiscovery imports this package,
and it imports each page's module, the run engine's (``runs``: the token ledger, the tool
grants, the Session admin's run actions) and each feature wing's. A page adds to the Session
admin only through ``sessions_app.admin.base.extend_session_admin``. ``mixins`` holds what a
host's own ModelAdmins opt into (``StaleChangeFormMixin``).
``ToolGrantAdmin`` and ``UsageRecordAdmin`` are here for a host's second ``AdminSite``."""

from ..mcp import admin as mcp_admin  # noqa: F401  (MCP servers, their tools, credentials)
from ..mcp import admin_tokens as mcp_token_admin  # noqa: F401  (the MCP endpoint's tokens)
from ..notifications import admin as notification_admin  # noqa: F401  (mail log, opt-outs)
from ..oauth import admin as oauth_admin  # noqa: F401  (the MCP endpoint's OAuth clients)
from ..schedules import admin as schedule_admin  # noqa: F401  (scheduled runs, their log)
from ..spend import admin as spend_admin  # noqa: F401  (spend per day)
from ..webhooks import admin as webhook_admin  # noqa: F401  (endpoints, deliveries)
from . import runs  # noqa: F401  (the ledger, grants, run actions)

# The ModelAdmins a host registers on a second AdminSite of its own (Python API).
from .runs import ToolGrantAdmin, UsageRecordAdmin  # noqa: F401
