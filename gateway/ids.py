"""Fast random ids for request and attempt rows.

``uuid.uuid4()`` reads the OS random source on every call (a system call each); the
gateway makes two or more ids per request, so it draws them from a per-process
generator seeded from ``os.urandom`` instead (reseeded after a fork).  The ids are
version-4 UUIDs, unique in practice, and not secrets.
"""

from __future__ import annotations

import os
import random
import uuid

_state: dict[str, object] = {}


def new_id() -> uuid.UUID:
    pid = os.getpid()
    generator = _state.get("rng")
    if generator is None or _state.get("pid") != pid:
        generator = random.Random(int.from_bytes(os.urandom(32), "big"))
        _state["rng"], _state["pid"] = generator, pid
    assert isinstance(generator, random.Random)
    return uuid.UUID(int=generator.getrandbits(128), version=4)
