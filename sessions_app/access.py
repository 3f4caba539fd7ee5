"""Who may use which agent: an agent's permission (the site's ``PERMISSION`` when it names
none) through the user's authentication backends, and, when it names groups, one of them.

``usable`` answers for any number of agents with one query of the user's groups (the agents'
own groups prefetched by the caller, ``Agent.objects.prefetch_related("groups")``, or read
per agent otherwise); ``may_use`` is the same for one agent. ``user.has_perm`` is Django's:
``ModelBackend`` reads a user's permissions once per user object and keeps them on it.
"""

from __future__ import annotations

from collections.abc import Iterable

from .conf import ahentic_settings
from .models import Agent


def usable(user, agents: Iterable[Agent]) -> list[Agent]:
    """The agents of ``agents`` that ``user`` may use, in their order: active, the user
    active and holding the agent's permission, and in one of its groups when it names any
    (superusers pass the groups)."""
    if not (user and user.is_active):
        return []
    allowed = [
        agent
        for agent in agents
        if agent.active and user.has_perm(agent.permission or ahentic_settings.PERMISSION)
    ]
    if user.is_superuser:
        return allowed
    grouped = {agent.pk: {group.pk for group in agent.groups.all()} for agent in allowed}
    if not any(grouped.values()):
        return allowed
    mine = set(user.groups.values_list("pk", flat=True))  # one query, whatever the agents
    return [agent for agent in allowed if not grouped[agent.pk] or grouped[agent.pk] & mine]


def may_use(user, agent: Agent) -> bool:
    """Whether ``user`` may use ``agent`` (``usable`` for one agent)."""
    return bool(usable(user, [agent]))
