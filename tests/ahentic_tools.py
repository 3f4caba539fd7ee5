"""Discovered like a host app's ``ahentic_tools`` module: registers the test tools."""

from tests.support import tools_for_tests  # noqa: F401
