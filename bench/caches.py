"""A cache for bench/poll.py's "first 200 after a change" rounds: the local-memory cache, except
that the payload cache always misses, so every 200 builds the payload as the first poll after a
change does, while everything else (the cached permission answers) is cached as usual."""

from django.core.cache.backends.locmem import LocMemCache

PAYLOAD_PREFIX = "ahentic:payload:"


class PayloadMissCache(LocMemCache):
    def get(self, key, default=None, version=None):
        if key.startswith(PAYLOAD_PREFIX):
            return default
        return super().get(key, default, version)
