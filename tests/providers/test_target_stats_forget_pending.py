"""The operator's "Reset health state" also drops this worker's unsent minute counts.

``forget`` clears the local minutes, every worker's Redis buckets and the counts
still waiting in this worker's pending batch, so they are not added back: neither at
once in ``snapshot_many`` (unsent deltas count) nor in Redis when the writer sends.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from shared_state_helpers import Links, require_redis

from providers.target_stats_redis import SharedTargetStats

NOW = 60.0 * 1_000_000
A, OTHER = "pa/m1@main", "pa/m1@backup"


@pytest.fixture
def stats(monkeypatch: pytest.MonkeyPatch) -> Iterator[SharedTargetStats]:
    links = Links(require_redis())
    found = SharedTargetStats(links())
    monkeypatch.setattr(found, "_start_writer", lambda: None)  # we send by hand
    yield found
    found.stop()
    links.close()


def test_forget_drops_the_unsent_counts_of_the_connection(stats):
    for key in (A, OTHER):
        stats.started(key, NOW)
        stats.finished(key, NOW + 1, success=False)
    stats.started(A, NOW + 2)  # still running when the operator resets

    stats.forget("pa", "main")

    before_send = stats.snapshot_many([A, OTHER], NOW + 3)
    stats.send_pending()
    after_send = stats.snapshot_many([A, OTHER], NOW + 3)
    for seen in (before_send, after_send):
        assert (seen[A].calls, seen[A].failures, seen[A].in_flight) == (0, 0, 1)
        assert (seen[OTHER].calls, seen[OTHER].failures) == (1, 1)
    minute = int(NOW // 60)
    assert stats.link.client.exists(stats.bucket_key(A, minute)) == 0
