"""Prepare the fuzzing leg's server: a user allowed to use the agent, a session of theirs, and a
logged-in cookie, and a token of theirs for the MCP endpoint. Prints
``FUZZ <session id> <sessionid cookie> <MCP token>``."""

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client

from orchestrator_app.mcp import tokens as mcp_tokens
from orchestrator_app.models import McpServer
from sessions_app import agents, services

user = get_user_model().objects.create_user("fuzz", password="fuzz")
user.user_permissions.add(
    Permission.objects.get(codename="use_agent", content_type__app_label="sessions_app")
)
session = services.session_create(owner=user, title="Fuzzed", mode="agent")
# A newer version of its agent: GET and POST agent/latest have changes to answer.
agents.version_save(agents.default_agent(), config={"SOUL": "Fuzzed.", "MAX_STEPS_PER_RUN": 9})
# An MCP server the user connects to ("path.slug" is "default"): a token is stored, OAuth
# is refused its loopback address (400 ahentic_outbound_refused).
McpServer.objects.create(slug="default", name="Fuzzed", url="https://127.0.0.1:9/mcp", auth="user")
client = Client()
client.force_login(user)
token = mcp_tokens.token_create(user=user, name="fuzz").secret
print("FUZZ", session.pk, client.cookies[settings.SESSION_COOKIE_NAME].value, token)
