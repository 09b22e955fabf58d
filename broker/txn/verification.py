"""Transaction verification on Produce (KIP-890 part 1, ``transaction.partition.verification.enable``).

A transactional batch that would start a transaction in a partition (its producer has no transaction
open there at its epoch) is appended only once the coordinator of the request's transactional id says
the partition is in the producer's ongoing transaction. Without it, a late or zombie write could open a
transaction that no marker will ever close, holding the partition's last stable offset back for good.

The coordinator is asked in-process when this broker coordinates the id (a synchronous look-up), and
otherwise with AddPartitionsToTxn v4+ ``verify_only`` through the broker's peer channel, which batches
the verifications bound for one coordinator.

Between asking and appending a marker may land (the coordinator's answer is awaited): each partition's
producer state keeps a guard per producer, taken before asking and dropped by any transactional batch or
marker of that producer, and the append goes ahead only if the guard still stands (the check and the
append run on the Trio thread with no await between them).

The coordinator's answer becomes a Produce error as Kafka gives it: a partition not in the transaction
is INVALID_TXN_STATE up to Produce v10 and TRANSACTION_ABORTABLE from v11; PRODUCER_FENCED is
INVALID_PRODUCER_EPOCH; a coordinator that is busy, moving or unreachable is NOT_ENOUGH_REPLICAS (a
retriable error that old clients retry without refreshing metadata).
"""
from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from trafka.wire.errors import ErrorCode

if TYPE_CHECKING:
    from trafka.broker.txn.channel import PeerChannel
    from trafka.broker.txn.coordinator import TransactionCoordinator

#: A coordinator that cannot answer now: the producer retries (Kafka's choice of error).
RETRIABLE = frozenset({ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.NETWORK_EXCEPTION,
                       ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                       ErrorCode.NOT_COORDINATOR})
#: First Produce version whose clients handle TRANSACTION_ABORTABLE (KIP-890).
ABORTABLE_SINCE_VERSION = 11
NOT_IN_TRANSACTION_MESSAGE = "Partition was not added to the transaction"
APPEND_NOT_VERIFIED_MESSAGE = "Record was not part of an ongoing transaction"


async def verify(coordinator: TransactionCoordinator, peers: PeerChannel | None, node_id: int,
                 transactional_id: str, producer_id: int, producer_epoch: int,
                 partitions: Collection[tuple[str, int]]) -> dict[tuple[str, int], ErrorCode]:
    """The coordinator's answer for each partition: NONE when it is in the producer's ongoing
    transaction, the coordinator's error otherwise (not yet mapped for Produce). ``coordinator`` is
    this broker's; ``peers`` reach the other brokers of the cluster (None on a single node)."""
    if peers is None:
        return coordinator.verify_partitions(transactional_id, producer_id, producer_epoch, partitions)
    coordinator_id = coordinator.coordinator_id(transactional_id)
    if coordinator_id is None:
        return dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if coordinator_id == node_id:
        return coordinator.verify_partitions(transactional_id, producer_id, producer_epoch, partitions)
    return await peers.verify(coordinator_id, transactional_id, producer_id, producer_epoch, partitions)


def produce_error(code: ErrorCode, version: int) -> tuple[ErrorCode, str | None]:
    """A coordinator's verification error as Produce ``version`` answers it, with its message."""
    if code in (ErrorCode.INVALID_TXN_STATE, ErrorCode.TRANSACTION_ABORTABLE):
        # Not in the transaction: the coordinator says TRANSACTION_ABORTABLE (Kafka 3.6-3.7's said
        # INVALID_TXN_STATE, read the same way).
        if version >= ABORTABLE_SINCE_VERSION:
            return ErrorCode.TRANSACTION_ABORTABLE, None
        return ErrorCode.INVALID_TXN_STATE, NOT_IN_TRANSACTION_MESSAGE
    if code == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH, None
    if code in RETRIABLE:
        return (ErrorCode.NOT_ENOUGH_REPLICAS,
                f"Unable to verify the partition has been added to the transaction. Underlying error: {code.name}")
    return code, None
