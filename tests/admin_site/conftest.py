"""The admin tools' fixtures (tests/admin_site/test_admin_tools.py, test_admin_list.py): the
enabled models, the librarian's shelves, a client per user, an agent per user."""

from types import SimpleNamespace

import pytest

from tests.support.admin import PAGES, SHELVES, Agent, staff


@pytest.fixture
def enabled(settings):
    """The admin tools on flat pages, groups and users (the modules that use it say so in
    ``pytestmark``)."""
    settings.AHENTIC = {**settings.AHENTIC, "ADMIN_TOOLS": [PAGES, "auth.group", "auth.user"]}


@pytest.fixture
def shelves(settings, enabled, db):
    """Shelves (character keys) and books enabled; ``shelves.user`` may do anything with
    shelves and only view books."""
    labels = [*settings.AHENTIC["ADMIN_TOOLS"], SHELVES, "ahentic_tests.book"]
    settings.AHENTIC = {**settings.AHENTIC, "ADMIN_TOOLS": labels}
    user = staff(
        "librarian", "view_shelf", "add_shelf", "change_shelf", "delete_shelf", "view_book"
    )
    return SimpleNamespace(user=user)


@pytest.fixture
def client_of():
    def make(user):
        from rest_framework.test import APIClient

        client = APIClient()
        client.force_login(user)
        return client

    return make


@pytest.fixture
def agent_for(client_of, llm, run_tasks):
    return lambda user: Agent(user, client_of(user), llm, run_tasks)
