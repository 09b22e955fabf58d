"""The state of one transactional id, as the transaction coordinator keeps it.

A transactional id moves through Kafka's states: ``Empty`` after InitProducerId, ``Ongoing`` once
partitions are added, ``PrepareCommit`` / ``PrepareAbort`` once EndTxn (or the coordinator, for a timed
out transaction) decided, ``CompleteCommit`` / ``CompleteAbort`` once every partition has its marker;
``PrepareEpochFence`` while a new producer with the same id fences an ongoing transaction, and ``Dead``
when the id expires. Each move is checked against :data:`VALID_PREVIOUS` (illegal ones raise), and a move
being written to ``__transaction_state`` is held as the metadata's ``pending`` state: requests that
arrive meanwhile get CONCURRENT_TRANSACTIONS, as in Kafka.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace


class TransactionState(enum.Enum):
    """Kafka's transaction states: the id written to the log, and the name tools show."""

    EMPTY = (0, "Empty")
    ONGOING = (1, "Ongoing")
    PREPARE_COMMIT = (2, "PrepareCommit")
    PREPARE_ABORT = (3, "PrepareAbort")
    COMPLETE_COMMIT = (4, "CompleteCommit")
    COMPLETE_ABORT = (5, "CompleteAbort")
    DEAD = (6, "Dead")
    PREPARE_EPOCH_FENCE = (7, "PrepareEpochFence")

    def __init__(self, state_id: int, display_name: str) -> None:
        self.id = state_id
        self.display_name = display_name

    @classmethod
    def from_id(cls, state_id: int) -> TransactionState:
        for state in cls:
            if state.id == state_id:
                return state
        raise ValueError(f"unknown transaction state id {state_id}")

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        """The state a tool names (``Ongoing``...), case-sensitive as in Kafka; None if there is none."""
        return next((state for state in cls if state.display_name == name), None)


S = TransactionState

#: Where each state may be entered from.
VALID_PREVIOUS: dict[TransactionState, frozenset[TransactionState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}

#: States in which a transaction is done: a new one may begin, and the id may expire.
COMPLETED = frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT})

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
#: The largest epoch; a producer id whose epoch would pass it is replaced by a new id.
MAX_EPOCH = 32767


class IllegalTransition(RuntimeError):
    """A move the state table does not allow (a bug, never a client's error)."""


@dataclass
class TransactionMetadata:
    """What the coordinator knows of one transactional id; written as a TransactionLogValue."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TransactionState
    #: The partitions of the ongoing (or completing) transaction.
    partitions: set[tuple[str, int]] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    #: The producer id and epoch before the last bump, so a producer retrying InitProducerId after a
    #: lost response is recognised (KIP-360).
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    #: The state a write in flight will bring (None: none).
    pending: TransactionState | None = None

    def transition(self, target: TransactionState, **changes: object) -> TransactionMetadata:
        """The metadata after moving to ``target`` with ``changes``: a copy, applied once written."""
        if self.state not in VALID_PREVIOUS[target]:
            raise IllegalTransition(
                f"transactional id {self.transactional_id}: {self.state.display_name} -> {target.display_name}"
            )
        return replace(self, state=target, pending=None, partitions=set(changes.pop("partitions", self.partitions)),
                       **changes)

    @property
    def epoch_exhausted(self) -> bool:
        """The epoch cannot be bumped again (its next bump needs a new producer id)."""
        return self.producer_epoch >= MAX_EPOCH - 1
