"""The classic group state machine: five states and the transitions allowed between them.

A classic group is ``Empty`` until a member joins, which starts a rebalance (``PreparingRebalance``);
once every member has (re)joined, or the rebalance timeout has passed, the next generation begins and
the leader is asked for an assignment (``CompletingRebalance``); the leader's SyncGroup makes the group
``Stable``. Any membership change sends a Stable or CompletingRebalance group back to
PreparingRebalance; a rebalance in which nobody remains ends in Empty. ``Dead`` is terminal: the group
was deleted (or expired) and is being removed from the coordinator.

The table below is the whole contract; :func:`check_transition` raises on anything else.
"""
from __future__ import annotations

from enum import Enum


class ClassicGroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


_S = ClassicGroupState

#: For each state, the states a group may move to from it.
TRANSITIONS: dict[ClassicGroupState, frozenset[ClassicGroupState]] = {
    _S.EMPTY: frozenset({_S.PREPARING_REBALANCE, _S.DEAD}),
    _S.PREPARING_REBALANCE: frozenset({_S.COMPLETING_REBALANCE, _S.EMPTY, _S.DEAD}),
    _S.COMPLETING_REBALANCE: frozenset({_S.PREPARING_REBALANCE, _S.STABLE, _S.DEAD}),
    _S.STABLE: frozenset({_S.PREPARING_REBALANCE, _S.DEAD}),
    _S.DEAD: frozenset({_S.DEAD}),
}


class IllegalStateTransition(RuntimeError):
    """A group was asked to move between two states the state machine does not connect."""

    def __init__(self, group_id: str, current: ClassicGroupState, target: ClassicGroupState) -> None:
        super().__init__(f"group {group_id!r} cannot move from {current} to {target}")
        self.group_id = group_id
        self.current = current
        self.target = target


def check_transition(group_id: str, current: ClassicGroupState, target: ClassicGroupState) -> None:
    if target not in TRANSITIONS[current]:
        raise IllegalStateTransition(group_id, current, target)


def can_rebalance(state: ClassicGroupState) -> bool:
    """Whether a membership change in ``state`` starts a new rebalance (rather than joining the
    rebalance already under way)."""
    return _S.PREPARING_REBALANCE in TRANSITIONS[state]
