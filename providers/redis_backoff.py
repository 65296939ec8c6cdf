"""How long a worker leaves Redis alone after a failure (spec 08 §3.3).

One schedule for both users of a Redis connection: the link
(``providers.redis_store``), whose every call goes local for that long, and the
pub/sub thread (``providers.redis_pubsub``), which waits that long before it
reconnects.  1 s after the first failure, doubling up to 5 s.
"""

from __future__ import annotations

BACKOFF_FIRST_SECONDS = 1.0  # spec 08 §3.3: skip Redis for 1 s after a failure,
BACKOFF_MAX_SECONDS = 5.0  # doubling up to 5 s between retries
