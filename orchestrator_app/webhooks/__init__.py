"""Outbound webhooks: the app's public signals, signed the Standard Webhooks way and POSTed to
the URLs staff registered in the admin.

- ``events``: the event types' thin payloads and the signal receivers (connected in
  ``apps.ready``), which only write delivery rows and enqueue a task, after commit.
- ``delivery``: the services: deliver one attempt (claimed by a conditional update), retry with
  backoff, give up, disable an endpoint after repeated failures, the "deliver due" sweep, and
  the admin's verbs (test event, retry now, re-enable, rotate the secret).
- ``transport``: the HTTP POST itself (``http.client``: no redirects, a timeout, http(s) only,
  private addresses refused by the outbound-address policy, ``orchestrator_app/outbound.py``,
  unless ``WEBHOOK_ALLOW_PRIVATE`` or ``OUTBOUND_ALLOW_PRIVATE``).
- ``tasks``: the django-q2 entry points (one attempt, the sweep); ``models``, ``admin``,
  ``checks`` as Django names them. Nothing is imported here: the app's models module loads
  ``models`` early.
"""
