"""The refresher loop never dies: a failed refresh or a failed connection close
keeps the previous map and the thread alive."""

from __future__ import annotations

import pytest

from gateway.config import refreshed as refreshed_cache
from gateway.config.refreshed import RefreshedCache


class Counting(RefreshedCache[str, int]):
    label = "counting"

    def __init__(self, fail: bool = False) -> None:
        super().__init__()
        self.fail = fail
        self.calls = 0

    def refresh(self) -> int:
        self.calls += 1
        if self.fail:
            raise RuntimeError("database unreachable")
        self.load({"rows": self.calls})
        return 1


def _closing_raises() -> None:
    raise RuntimeError("Database access not allowed")


def test_a_failing_close_after_a_refresh_does_not_escape(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(refreshed_cache, "close_old_connections", _closing_raises)
    cache = Counting()

    cache.refresh_once()
    cache.refresh_once()

    assert cache.calls == 2
    assert cache._rows == {"rows": 2}


def test_a_failing_refresh_keeps_the_previous_map(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(refreshed_cache, "close_old_connections", _closing_raises)
    cache = Counting()
    cache.refresh_once()
    cache.fail = True

    cache.refresh_once()

    assert cache._rows == {"rows": 1}


def test_the_base_class_demands_a_refresh() -> None:
    with pytest.raises(TypeError, match="must define refresh"):
        RefreshedCache().refresh()
