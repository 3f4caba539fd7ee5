"""Test doubles and development servers that ship with the app (as ``django.test`` does).

- ``localapi``: a local Anthropic Messages API server that answers the real ``anthropic`` SDK
  with the JSON the real API returns (scripted replies, errors with retry headers, prompt-cache
  accounting). The test suite, the benchmarks and the offline demo point ``BASE_URL`` at it.
- ``offline``: the demo's scripted "offline model" for that server.

``manage.py ahentic_localapi`` serves it for a host site that has no API key yet.
"""
