"""Producer id allocation for idempotent and transactional producers.

Ids are handed out from blocks. A single node writes the end of its current block to
``producer-id-block`` in the data dir before any id from it is used, so a broker that restarts
(cleanly or not) never hands out an id twice. The brokers of a cluster claim their blocks from the
cluster (``/latest_producer_id_block`` in ZooKeeper, as Kafka does), so that no two brokers hand
out the same id.
"""
from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import trio

from trafka.storage.checkpoints import atomic_write

BLOCK_SIZE = 1000
PRODUCER_ID_BLOCK_FILE = "producer-id-block"


class ProducerIdManager:
    def __init__(self, data_dir: Path) -> None:
        self._path = data_dir / PRODUCER_ID_BLOCK_FILE
        try:
            self._next = int(self._path.read_text().strip())
        except FileNotFoundError:
            self._next = 0
        self._block_end = self._next

    async def next_producer_id(self) -> int:
        if self._next >= self._block_end:
            self._block_end = self._next + BLOCK_SIZE
            atomic_write(self._path, f"{self._block_end}\n".encode())
        producer_id = self._next
        self._next += 1
        return producer_id


class ClusterProducerIdManager:
    """Producer ids from blocks the cluster grants: ``claim_block(size)`` returns a block's first id
    and the id after its last, unique across the cluster's brokers."""

    def __init__(self, claim_block: Callable[[int], Awaitable[tuple[int, int]]]) -> None:
        self._claim_block = claim_block
        self._next = self._block_end = 0
        self._claiming = trio.Lock()

    async def next_producer_id(self) -> int:
        while self._next >= self._block_end:
            async with self._claiming:
                if self._next >= self._block_end:
                    self._next, self._block_end = await self._claim_block(BLOCK_SIZE)
        producer_id = self._next
        self._next += 1
        return producer_id
