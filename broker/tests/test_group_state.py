"""The classic group state machine, table-driven: every (from, to) pair is either allowed or raises."""
from __future__ import annotations

import itertools

import pytest

from trafka.broker.groups.classic import ClassicGroup
from trafka.broker.groups.state import (
    TRANSITIONS,
    ClassicGroupState,
    IllegalStateTransition,
    can_rebalance,
    check_transition,
)

S = ClassicGroupState

ALLOWED = {
    (S.EMPTY, S.PREPARING_REBALANCE),
    (S.EMPTY, S.DEAD),
    (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE),
    (S.PREPARING_REBALANCE, S.EMPTY),
    (S.PREPARING_REBALANCE, S.DEAD),
    (S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE),
    (S.COMPLETING_REBALANCE, S.STABLE),
    (S.COMPLETING_REBALANCE, S.DEAD),
    (S.STABLE, S.PREPARING_REBALANCE),
    (S.STABLE, S.DEAD),
    (S.DEAD, S.DEAD),
}


@pytest.mark.parametrize(("current", "target"), list(itertools.product(S, S)), ids=lambda s: s.value)
def test_transition_table(current: ClassicGroupState, target: ClassicGroupState) -> None:
    if (current, target) in ALLOWED:
        check_transition("g", current, target)
    else:
        with pytest.raises(IllegalStateTransition, match=f"from {current} to {target}"):
            check_transition("g", current, target)


def test_table_covers_every_state() -> None:
    assert set(TRANSITIONS) == set(S)


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        (S.EMPTY, True),
        (S.PREPARING_REBALANCE, False),
        (S.COMPLETING_REBALANCE, True),
        (S.STABLE, True),
        (S.DEAD, False),
    ],
)
def test_which_states_start_a_rebalance(state: ClassicGroupState, expected: bool) -> None:
    assert can_rebalance(state) is expected


def test_group_records_previous_state_and_timestamp() -> None:
    group = ClassicGroup("g", now_ms=1)
    group.transition_to(S.PREPARING_REBALANCE, now_ms=5)
    assert (group.previous_state, group.state, group.state_timestamp_ms) == (S.EMPTY, S.PREPARING_REBALANCE, 5)
    with pytest.raises(IllegalStateTransition):
        group.transition_to(S.STABLE, now_ms=6)
    assert group.state is S.PREPARING_REBALANCE  # a refused transition changes nothing


def test_state_names_are_kafkas() -> None:
    assert [str(s) for s in S] == ["Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"]
