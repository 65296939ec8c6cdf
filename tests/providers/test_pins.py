"""The in-process pin store (spec 05 §1.3): sliding TTL and the size bound."""

from __future__ import annotations

from providers.pins import PinStore


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_pins_expire_and_writes_renew():
    clock = Clock()
    store = PinStore(clock=clock)
    store.set("s", "combo:1", {"target": "a"}, 60)
    clock.now += 59
    assert store.get("s", "combo:1") == {"target": "a"}
    store.set("s", "combo:1", {"target": "a"}, 60)  # renewed
    clock.now += 59
    assert store.get("s", "combo:1") == {"target": "a"}
    clock.now += 2
    assert store.get("s", "combo:1") is None


def test_scopes_and_sessions_are_separate():
    store = PinStore(clock=Clock())
    store.set("s1", "combo:1", {"target": "a"}, 60)
    assert store.get("s2", "combo:1") is None
    assert store.get("s1", "tier:normal") is None


def test_when_full_expired_pins_go_first_then_the_soonest_to_expire():
    clock = Clock()
    store = PinStore(max_pins=3, clock=clock)
    store.set("a", "x", {"n": 1}, 10)
    store.set("b", "x", {"n": 2}, 100)
    store.set("c", "x", {"n": 3}, 50)
    store.set("d", "x", {"n": 4}, 100)  # full: "a" expires soonest
    assert store.get("a", "x") is None
    assert len(store) == 3
    clock.now += 60  # "c" has expired
    store.set("e", "x", {"n": 5}, 100)
    assert store.get("c", "x") is None
    assert store.get("b", "x") == {"n": 2}
    assert store.get("d", "x") == {"n": 4}


def test_delete():
    store = PinStore(clock=Clock())
    store.set("s", "x", {"n": 1}, 10)
    store.delete("s", "x")
    assert store.get("s", "x") is None
