"""The error a tool raises for the model to read (``orchestrator_app.tools.ToolError``)."""

from sessions_app.errors import ModelFacingError


class ToolError(ModelFacingError):
    """A tool failure the model should see: ``{ok: false, error: code, message, hint?}``.

    Tools may also let an ``ArtifactError`` or ``PlanError`` through: the pipeline converts
    every ``ModelFacingError`` alike.
    """
