"""Rendezvous (highest random weight) hashing on the cache key ``K`` (spec 03 §4.1,
§5.15): one conversation keeps the connection holding its prompt cache, and adding or
removing a connection moves only the conversations that hashed to it."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable


def rendezvous_score(cache_key: str, key: str) -> int:
    """First 8 bytes, big-endian unsigned, of SHA-256(K + "\\x00" + target key)."""
    digest = hashlib.sha256(f"{cache_key}\x00{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def rendezvous_order(cache_key: str, keys: Iterable[str]) -> list[str]:
    """``keys`` by rendezvous score for ``cache_key``: descending, then key ascending.

    Shared with connection ordering under ``promptcache_affinity`` (spec 03 §4.1).
    """
    return sorted(keys, key=lambda key: (-rendezvous_score(cache_key, key), key))
