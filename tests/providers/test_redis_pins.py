"""Session pins in Redis (spec 05 §1.3, §2.3; 08 §3.1): native sliding TTL, hashed
keys, no count limit, the upward-only tier script, the dry-run overlay, fail-open.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator

import pytest
from shared_state_helpers import Links, Observer, dead_port, require_redis

from providers.pins import PinStore, RedisPinStore, dry_run


@pytest.fixture
def links() -> Iterator[Links]:
    found = Links(require_redis())
    yield found
    found.close()


@pytest.fixture
def pins(links: Links) -> RedisPinStore:
    return RedisPinStore(links())


def tier(value: str, score: int = 0) -> dict[str, object]:
    return {"tier": value, "score": score, "updated_at": 1000.0}


def test_a_pin_is_a_hashed_redis_key_with_a_native_ttl(pins, links):
    pins.set("key7:sess", "combo:3", {"target": "pa/m1@main"}, 60)

    digest = hashlib.sha256(b"key7:sess\x00combo:3").hexdigest()[:32]
    key = f"{links.namespace}pin:{digest}"
    raw = pins.link.client
    assert raw.get(key) == b'{"target":"pa/m1@main"}'
    assert 59_000 < raw.pttl(key) <= 60_000
    assert pins.get("key7:sess", "combo:3") == {"target": "pa/m1@main"}


def test_pins_expire_and_every_write_renews_them(pins):
    pins.set("s", "combo:1", {"target": "a"}, 0.2)
    time.sleep(0.12)
    pins.set("s", "combo:1", {"target": "a"}, 0.2)
    time.sleep(0.12)
    assert pins.get("s", "combo:1") == {"target": "a"}
    time.sleep(0.15)
    assert pins.get("s", "combo:1") is None


def test_scopes_sessions_and_workers_share_nothing_but_the_same_pin(pins, links):
    other_worker = RedisPinStore(links())
    pins.set("s1", "combo:1", {"target": "a"}, 60)
    assert other_worker.get("s1", "combo:1") == {"target": "a"}
    assert other_worker.get("s2", "combo:1") is None
    assert other_worker.get("s1", "combo:2") is None
    other_worker.delete("s1", "combo:1")
    assert pins.get("s1", "combo:1") is None


def test_redis_pins_have_no_count_limit(links):
    pins = RedisPinStore(links(), max_pins=2)
    for n in range(5):
        pins.set(f"s{n}", "combo:1", {"n": n}, 60)
    assert [pins.get(f"s{n}", "combo:1") for n in range(5)] == [
        {"n": n} for n in range(5)
    ]


def test_a_hard_tier_pin_is_renewed_never_made_easy(pins):
    pins.set("s", "tier:smart", tier("hard", 9), 0.3)
    time.sleep(0.15)
    pins.set("s", "tier:smart", tier("easy", 1), 0.3)  # another worker's late write
    time.sleep(0.2)  # past the first TTL: renewed by the refused write
    assert pins.get("s", "tier:smart") == tier("hard", 9)


def test_tier_pins_move_from_easy_to_hard_and_stay_easy(pins):
    pins.set("s", "tier:smart", tier("easy", 1), 60)
    pins.set("s", "tier:smart", tier("easy", 2), 60)
    assert pins.get("s", "tier:smart") == tier("easy", 2)
    pins.set("s", "tier:smart", tier("hard", 8), 60)
    assert pins.get("s", "tier:smart") == tier("hard", 8)
    pins.set("s", "tier:smart", tier("hard", 7), 60)
    assert pins.get("s", "tier:smart") == tier("hard", 7)


def test_target_pins_may_move_anywhere(pins):
    pins.set("s", "combo:1", {"tier": "hard"}, 60)
    pins.set("s", "combo:1", {"tier": "easy"}, 60)
    assert pins.get("s", "combo:1") == {"tier": "easy"}


def test_a_dry_run_sees_its_own_writes_and_leaves_redis_alone(pins):
    pins.set("s", "combo:1", {"target": "a"}, 60)
    pins.set("s", "combo:2", {"target": "b"}, 60)
    with dry_run() as writes:
        pins.set("s", "combo:1", {"target": "x"}, 60)
        pins.delete("s", "combo:2")
        assert pins.get("s", "combo:1") == {"target": "x"}
        assert pins.get("s", "combo:2") is None
    assert writes == {
        PinStore.key("s", "combo:1"): {"target": "x"},
        PinStore.key("s", "combo:2"): None,
    }
    assert pins.get("s", "combo:1") == {"target": "a"}
    assert pins.get("s", "combo:2") == {"target": "b"}


def test_with_redis_unreachable_pins_live_in_the_process(links):
    observer = Observer()
    pins = RedisPinStore(
        links(f"redis://127.0.0.1:{dead_port()}/0", observer=observer), max_pins=2
    )
    pins.set("s", "combo:1", {"target": "a"}, 60)
    assert pins.get("s", "combo:1") == {"target": "a"}
    pins.delete("s", "combo:1")
    assert pins.get("s", "combo:1") is None
    for n in range(3):
        pins.set(f"s{n}", "combo:1", {"n": n}, 60 + n)
    assert len(pins) == 2  # the in-process bound holds while degraded
    assert observer.fallbacks[:4] == ["pin_set", "pin_get", "pin_delete", "pin_get"]
