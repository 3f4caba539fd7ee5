"""The model side: requests the local Messages API server received, and a responder that
tells the main model from the brain model."""


class ModelScript:
    """A responder for the local server that tells the two models apart.

    Requests for ``AHENTIC["MODEL"]`` get ``main`` replies in order (then "Done."); requests for
    ``BRAIN_MODEL`` (naming, memory snapshots) get ``brain(body)``. Background brain calls run
    between steps, so a FIFO script shared by both models would hand them the step's replies.
    """

    def __init__(self, brain_model: str):
        from collections import deque

        from orchestrator_app.testing.localapi import text_reply

        self.brain_model = brain_model
        self.main = deque()
        self.brain = lambda body: text_reply("Brain says hello.")

    def __call__(self, body):
        from orchestrator_app.testing.localapi import text_reply

        if body["model"] == self.brain_model:
            return self.brain(body)
        return self.main.popleft() if self.main else text_reply("Done.")


def model_requests(llm, model: str) -> list[dict]:
    """Accepted ``/v1/messages`` entries (``json`` body and ``response``) for one model."""
    return [
        entry
        for entry in llm.requests
        if entry["path"] == "/v1/messages" and entry["accepted"] and entry["json"]["model"] == model
    ]


def without_cache_control(value):
    """A request body (or part) with every ``cache_control`` marker removed."""
    if isinstance(value, dict):
        return {k: without_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [without_cache_control(v) for v in value]
    return value
