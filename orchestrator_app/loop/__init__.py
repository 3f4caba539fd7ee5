"""The step loop: one step of a run, from the request to the tool results.

``step`` claims the run and calls the model; ``prompt`` assembles the request (with thinking,
effort and server tools), ``context`` keeps its window and ``contextUsage``, ``files`` sends
PDFs through the Files API; ``pipeline`` runs the tool calls under the run's lease and
``decisions`` resolves the calls a person answers (approvals, browser results, actions).
"""
