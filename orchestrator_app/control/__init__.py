"""Run control: a run's life between steps.

``runs`` posts messages and begins, resumes, cancels, continues and recovers runs; ``queue``
enqueues django-q2 tasks; ``heartbeat`` keeps a lease while a tool runs; ``toolcalls`` keeps
every tool_use answered once; ``plan`` holds the plan rules; ``brain`` names sessions and
writes memory snapshots in the background.
"""
