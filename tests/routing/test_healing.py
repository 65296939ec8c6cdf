"""Self-healing exclusions, probes and incident mode (spec 04 §6, §11 examples 9 and
10).  Times are plain seconds: a test replays an hour in microseconds."""

import pytest

from gateway.auto.engine.healing import (
    BASE_S,
    CAP_S,
    EXCLUDE_BELOW,
    PROBE_TIMEOUT_MS,
    durations,
    incident_mode,
    is_excluded,
    is_probe,
    maybe_exclude,
    probe_finished,
    probe_started,
    probe_timeout_ms,
)


def minutes(m, s=0):
    return m * 60 + s


def test_constants():
    assert (EXCLUDE_BELOW, BASE_S, CAP_S, PROBE_TIMEOUT_MS) == (0.2, 300, 1800, 10_000)


def test_example_9_timeline():
    # 0:00 - D's DEFAULT score is 0.15: excluded until 5:00
    entry = maybe_exclude(None, 0.15, minutes(0))
    assert entry == {
        "level": 1,
        "excluded_until": minutes(5),
        "probe_pending": True,
        "probe_in_flight": False,
    }
    # 2:00 - skipped
    assert is_excluded(entry, minutes(2))
    assert not is_probe(entry, minutes(2))
    # 6:00 - D is the primary and this attempt is its probe, with a 10 s timeout
    assert not is_excluded(entry, minutes(6))
    assert is_probe(entry, minutes(6))
    assert probe_timeout_ms(30_000) == 10_000
    entry = probe_started(entry)
    assert is_excluded(entry, minutes(6, 5))  # other requests skip it meanwhile
    assert not is_probe(entry, minutes(6, 5))
    # 6:10 - the probe times out: level 2, excluded until 16:10
    entry = probe_finished(entry, "failure", minutes(6, 10))
    assert entry == {
        "level": 2,
        "excluded_until": minutes(16, 10),
        "probe_pending": True,
        "probe_in_flight": False,
    }
    # 17:00 - a probe fails: level 3, excluded until 37:00
    assert is_probe(entry, minutes(17))
    entry = probe_finished(probe_started(entry), "failure", minutes(17))
    assert (entry["level"], entry["excluded_until"]) == (3, minutes(37))
    # 37:30 - a probe fails: level 4, capped at 30 min, excluded until 1:07:30
    assert is_probe(entry, minutes(37, 30))
    entry = probe_finished(probe_started(entry), "failure", minutes(37, 30))
    assert (entry["level"], entry["excluded_until"]) == (4, minutes(67, 30))
    # 1:08:00 - a probe succeeds: the entry is deleted
    assert is_probe(entry, minutes(68))
    assert probe_finished(probe_started(entry), "success", minutes(68)) is None


def test_cooldowns_run_5_10_20_30_30_minutes():
    entry = maybe_exclude(None, 0.0, 0)
    cooldowns = [entry["excluded_until"]]
    for _ in range(4):
        now = entry["excluded_until"]
        entry = probe_finished(probe_started(entry), "failure", now)
        cooldowns.append(entry["excluded_until"] - now)

    assert cooldowns == [300, 600, 1200, 1800, 1800]


def test_another_4xx_leaves_the_probe_pending_at_the_same_level():
    entry = maybe_exclude(None, 0.1, 0)
    started = probe_started(entry)

    after = probe_finished(started, "other", minutes(6))

    assert after == {**entry, "probe_pending": True, "probe_in_flight": False}
    assert is_probe(after, minutes(6))


def test_an_unknown_outcome_is_an_error():
    with pytest.raises(ValueError, match="timeout"):
        probe_finished(maybe_exclude(None, 0.1, 0), "timeout", 0)


@pytest.mark.parametrize("score", [0.2, 0.35, 1.0])
def test_a_score_of_0_2_or_more_creates_no_entry(score):
    assert maybe_exclude(None, score, 0) is None


def test_an_existing_entry_suspends_the_score_rule():
    entry = {
        "level": 2,
        "excluded_until": 100,
        "probe_pending": True,
        "probe_in_flight": False,
    }

    assert maybe_exclude(entry, 0.0, 500) is entry
    assert maybe_exclude(entry, 0.9, 500) is entry


def test_transitions_do_not_mutate_their_input():
    entry = maybe_exclude(None, 0.1, 0)
    snapshot = dict(entry)

    probe_finished(probe_started(entry), "failure", 400)
    probe_started(entry)

    assert entry == snapshot


def test_no_entry_is_neither_excluded_nor_a_probe():
    assert not is_excluded(None, 0)
    assert not is_probe(None, 0)


@pytest.mark.parametrize(("attempt", "probe"), [(30_000, 10_000), (4000, 4000)])
def test_probe_timeout_is_capped_at_10_s(attempt, probe):
    assert probe_timeout_ms(attempt) == probe


@pytest.mark.parametrize(
    ("circuits", "on"),
    [
        (["open", "open", "open", "closed", "half_open"], True),  # example 10: 60 %
        (["open", "open", "closed", "closed"], False),  # example 10: exactly 50 %
        (["open"], True),
        (["half_open", "half_open", "open"], False),
        ([], False),
    ],
)
def test_incident_mode_needs_more_than_half_open(circuits, on):
    assert incident_mode(circuits) is on


# --- the durations are settings (spec 04 §6, amended) ---------------------------------


def test_durations_default_to_the_seeds_and_follow_the_settings():
    assert durations({}) == (300.0, 1800.0)
    assert durations({"exclusion_seconds": 10}) == (10.0, 1800.0)
    assert durations({"exclusion_seconds": 10, "max_exclusion_seconds": 60}) == (
        10.0,
        60.0,
    )
    # a first exclusion above the default cap raises the cap to it
    assert durations({"exclusion_seconds": 3600}) == (3600.0, 3600.0)


def test_a_short_first_exclusion_doubles_up_to_its_cap():
    first, cap = durations({"exclusion_seconds": 10, "max_exclusion_seconds": 30})
    entry = maybe_exclude(None, 0.1, 0.0, first)
    assert entry["excluded_until"] == 10.0
    timeline = []
    now = 10.0
    for _ in range(4):
        entry = probe_finished(probe_started(entry), "failure", now, first, cap)
        timeline.append(entry["excluded_until"] - now)
        now = entry["excluded_until"]
    assert timeline == [20.0, 30.0, 30.0, 30.0]
    assert probe_finished(probe_started(entry), "success", now, first, cap) is None
