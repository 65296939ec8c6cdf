"""lkgp and context-relay (spec 03 §5.16, §5.17 ordering)."""

import pytest

from gateway.planning.strategies import REGISTRY

SESSION = "s" * 32
DECLARED = ("pb/m2@main", "pa/m1@main", "pa/m9@main", "pa/m1@backup", "combo:B")
CONFIGURED = (*DECLARED, "pa/m1@*")


def keys(ordering):
    return [c.key for c in ordering.order]


@pytest.mark.parametrize(
    ("state", "survivors", "first"),
    [
        # same model and connection
        ({"session": None, "combo": "pa/m1@backup"}, DECLARED, "pa/m1@backup"),
        # the session record wins over the combo-wide one
        ({"session": "pa/m1@backup", "combo": "pb/m2@main"}, DECLARED, "pa/m1@backup"),
        # the connection is gone: the first with the model
        (
            {"session": None, "combo": "pa/m1@backup"},
            DECLARED[:3],
            "pa/m1@main",
        ),
        # an unpinned survivor of the record's model
        (
            {"session": None, "combo": "pa/m1@main"},
            ("pb/m2@main", "pa/m1@*"),
            "pa/m1@*",
        ),
        # the model is gone: the first with the provider
        ({"session": None, "combo": "pa/m7@main"}, DECLARED, "pa/m1@main"),
        # a combo-ref record
        ({"session": None, "combo": "combo:B"}, DECLARED, "combo:B"),
        # nothing matches / no record: declared
        ({"session": None, "combo": "pz/m1@main"}, DECLARED, "pb/m2@main"),
        ({"session": None, "combo": None}, DECLARED, "pb/m2@main"),
        (None, DECLARED, "pb/m2@main"),
    ],
)
def test_lkgp_puts_the_best_match_of_the_record_first_and_the_rest_declared(
    state, survivors, first, make_order_input
):
    ordering = REGISTRY["lkgp"].order(
        make_order_input(*survivors, configured=CONFIGURED, state=state)
    )

    assert keys(ordering) == [first, *(k for k in survivors if k != first)]
    assert (ordering.state_before, ordering.on_success) == (None, None)


@pytest.mark.parametrize(
    ("holder", "survivors", "expected"),
    [
        ("pa/m1@backup", DECLARED, ["pa/m1@backup", *DECLARED[:3], "combo:B"]),
        # the holder is filtered: declared
        ("pa/m1@backup", DECLARED[:3], list(DECLARED[:3])),
        # the unpinned target of the holder's model holds it
        ("pa/m1@main", ("pb/m2@main", "pa/m1@*"), ["pa/m1@*", "pb/m2@main"]),
        (None, DECLARED, list(DECLARED)),
    ],
)
def test_context_relay_puts_the_sessions_holder_first(
    holder, survivors, expected, make_order_input
):
    given = make_order_input(
        *survivors,
        configured=CONFIGURED,
        session_key=SESSION,
        state=holder,
    )

    ordering = REGISTRY["context-relay"].order(given)

    assert keys(ordering) == expected
    assert ordering.on_success(holder, "pb/m2@main") == "pb/m2@main"


def test_context_relay_without_a_session_is_declared_and_keeps_no_holder(
    make_order_input,
):
    given = make_order_input(*DECLARED, state="pa/m1@backup")

    ordering = REGISTRY["context-relay"].order(given)

    assert keys(ordering) == list(DECLARED)
    assert ordering.on_success is None
