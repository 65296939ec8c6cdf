"""reset-aware, reset-window and headroom (spec 03 §5.11-§5.13)."""

import pytest

from gateway.planning.strategies import REGISTRY
from gateway.planning.strategies.quota import reset_score, urgency

NOW = 1_700_000_000.0
HOUR = 3600.0
A, B, C, D = "pa/m1@a", "pa/m1@b", "pa/m1@c", "pa/m1@d"


def keys(ordering):
    return [c.key for c in ordering.order]


def quota_input(make_candidate, make_order_input, quotas, **fields):
    survivors = [make_candidate(k, i, **q) for i, (k, q) in enumerate(quotas.items())]
    return make_order_input(*survivors, now=NOW, **fields)


# --- reset-aware ----------------------------------------------------------------------

SPEC_EXAMPLE = {
    C: {"remaining": 0.03, "resets_at": NOW + HOUR, "window_s": 5 * HOUR},
    B: {"remaining": 0.5, "resets_at": NOW + 4 * HOUR, "window_s": 5 * HOUR},
    A: {"remaining": 0.9, "resets_at": NOW + HOUR, "window_s": 5 * HOUR},
}


@pytest.mark.parametrize(("key", "expected"), [(A, 0.81), (B, 0.30), (C, 0.027)])
def test_reset_score_matches_the_spec_example(key, expected, make_candidate):
    candidate = make_candidate(key, 0, **SPEC_EXAMPLE[key])

    assert reset_score(candidate, NOW) == pytest.approx(expected)


def test_reset_aware_orders_by_score_and_steps_its_counter(
    make_candidate, make_order_input
):
    given = quota_input(make_candidate, make_order_input, SPEC_EXAMPLE, state=41)

    ordering = REGISTRY["reset-aware"].order(given)

    assert keys(ordering) == [A, B, C]
    assert ordering.state_before == 42


@pytest.mark.parametrize(
    ("quota", "expected"),
    [
        ({}, 0.5),  # unknown
        ({"resets_at": NOW + HOUR}, 0.5),  # no window: unknown
        ({"resets_at": NOW - 1, "window_s": HOUR}, 1.0),  # reset already passed
        ({"resets_at": NOW + 2 * HOUR, "window_s": HOUR}, 0.0),  # clamped
        ({"resets_at": NOW + HOUR / 4, "window_s": HOUR}, 0.75),
    ],
)
def test_urgency(quota, expected, make_candidate):
    assert urgency(make_candidate(A, 0, **quota), NOW) == pytest.approx(expected)


def test_unknown_quota_scores_a_quarter_and_a_ref_is_unknown(make_candidate):
    ref = make_candidate("combo:B", 0, remaining=1.0, resets_at=NOW, window_s=HOUR)

    assert reset_score(make_candidate(A, 0), NOW) == pytest.approx(0.375)
    assert reset_score(ref, NOW) == pytest.approx(0.375)


BAND = {
    D: {"remaining": 0.30, "resets_at": NOW, "window_s": HOUR},  # .30
    C: {"remaining": 0.78, "resets_at": NOW, "window_s": HOUR},  # .78, in the band
    A: {"remaining": 0.81, "resets_at": NOW, "window_s": HOUR},  # .81, best
    B: {"remaining": 0.76, "resets_at": NOW, "window_s": HOUR},  # .76: .81 - .05
    "pb/m2@x": {"remaining": 1.0, "exhausted": True},
}


@pytest.mark.parametrize(
    ("counter", "expected"),
    [
        (0, [A, C, B, D, "pb/m2@x"]),
        (1, [C, A, B, D, "pb/m2@x"]),
        (2, [B, A, C, D, "pb/m2@x"]),
        (3, [A, C, B, D, "pb/m2@x"]),
    ],
)
def test_reset_aware_rotates_the_tie_band_and_puts_exhausted_last(
    counter, expected, make_candidate, make_order_input
):
    given = quota_input(make_candidate, make_order_input, BAND, state=counter)

    assert keys(REGISTRY["reset-aware"].order(given)) == expected


def test_a_zero_tie_band_rotates_only_equal_scores(make_candidate, make_order_input):
    given = quota_input(
        make_candidate, make_order_input, BAND, state=1, config={"tieBand": 0}
    )

    assert keys(REGISTRY["reset-aware"].order(given)) == [A, C, B, D, "pb/m2@x"]


# --- reset-window ---------------------------------------------------------------------

WINDOWS = {
    A: {"resets_at": NOW + 600},
    B: {},  # unknown
    C: {"resets_at": NOW + 630},  # 30 s after the earliest: in the default 60 s band
    D: {"resets_at": NOW + 5, "exhausted": True},
    "pb/m2@x": {"resets_at": NOW + 700},
}


@pytest.mark.parametrize(
    ("counter", "config", "expected"),
    [
        (0, {}, [A, C, "pb/m2@x", B, D]),
        (1, {}, [C, A, "pb/m2@x", B, D]),
        (2, {}, [A, C, "pb/m2@x", B, D]),
        (1, {"resetWindowTieBandMs": 0}, [A, C, "pb/m2@x", B, D]),
        (2, {"resetWindowTieBandMs": 100_000}, ["pb/m2@x", A, C, B, D]),
    ],
)
def test_reset_window_orders_by_earliest_reset_and_rotates_its_band(
    counter, config, expected, make_candidate, make_order_input
):
    given = quota_input(
        make_candidate, make_order_input, WINDOWS, state=counter, config=config
    )

    ordering = REGISTRY["reset-window"].order(given)

    assert keys(ordering) == expected
    assert ordering.state_before == counter + 1


# --- headroom -------------------------------------------------------------------------


def test_headroom_orders_by_remaining_quota(make_candidate, make_order_input):
    quotas = {
        A: {"remaining": 0.4},
        B: {},  # unknown: 0.5
        C: {"remaining": 0.9, "exhausted": True},  # exhausted: 0
        D: {"remaining": 0.8},
        "combo:R": {"remaining": 1.0},  # a ref is unknown: 0.5
    }

    ordering = REGISTRY["headroom"].order(
        quota_input(make_candidate, make_order_input, quotas)
    )

    assert keys(ordering) == [D, B, "combo:R", A, C]
