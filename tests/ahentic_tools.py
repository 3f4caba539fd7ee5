"""Discovered like a host app's ``ahentic_tools`` module: registers the test tools."""

from . import tools_for_tests  # noqa: F401
