"""Producer id allocation for idempotent and transactional producers.

Ids are handed out from blocks; the end of the current block is written to ``producer-id-block`` in
the data dir before any id from it is used, so a broker that restarts (cleanly or not) never hands out
an id twice.
"""
from __future__ import annotations

from pathlib import Path

from storage.checkpoints import atomic_write

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

    def next_producer_id(self) -> int:
        if self._next >= self._block_end:
            self._block_end = self._next + BLOCK_SIZE
            atomic_write(self._path, f"{self._block_end}\n".encode())
        producer_id = self._next
        self._next += 1
        return producer_id
