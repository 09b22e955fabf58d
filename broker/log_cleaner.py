"""The log cleaner: compaction of every log whose ``cleanup.policy`` includes ``compact`` (Kafka's
``LogCleaner``), run beside the broker's other background work.

``LogCleaner(log_manager, config).run(task_status=...)`` runs ``log.cleaner.threads`` workers. Each, in a
loop, picks the dirtiest compacted log no other worker is cleaning (``trafka.storage.cleaner.filthiest_log``),
cleans it, records its new first dirty offset in the data directory's ``cleaner-offset-checkpoint``, and
looks again; when no log needs cleaning it waits ``log.cleaner.backoff.ms``.

What runs where: choosing the log and taking what the cleaning needs of it (its segments, its
producers' last offsets, its aborted transactions) happen on the event loop, where logs are appended to;
building the offset map and writing the cleaned segments -- the expensive part, reading only the
segments below the active one, which appends never touch -- run in worker threads and never touch the
``Log``; swapping each cleaned segment in (a few renames, ``Log.replace_segments``) happens back on the
event loop, between appends, and gives up when the log no longer holds the segments as they were
(retention, DeleteRecords or a follower's truncation took them meanwhile). The replaced segments are
renamed ``.deleted`` and removed after ``file.delete.delay.ms``, as retention's are, so fetches already
holding a file slice are never broken.

Settings (Kafka's names and defaults): ``log.cleaner.enable`` (true), ``log.cleaner.threads`` (1),
``log.cleaner.backoff.ms`` (15000), ``log.cleaner.dedupe.buffer.size`` (128 MiB, shared by the threads),
``log.cleaner.io.buffer.size`` (512 KiB), ``log.cleaner.io.buffer.load.factor`` (0.9) and
``log.cleaner.io.max.bytes.per.second`` (unlimited: the bytes read and written by all threads together).
The per-topic ``min.cleanable.dirty.ratio``, ``min.compaction.lag.ms``, ``max.compaction.lag.ms`` and
``delete.retention.ms`` have broker defaults under ``log.cleaner.*`` names (``trafka.storage.config``).
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import trio

from trafka.storage import clock
from trafka.storage.cleaner import (
    DEFAULT_DEDUPE_BUFFER_SIZE,
    DEFAULT_IO_BUFFER_LOAD_FACTOR,
    DEFAULT_IO_BUFFER_SIZE,
    CleanerCheckpoint,
    CleanerConfig,
    CleaningAborted,
    CleaningJob,
    LogToClean,
    OffsetMap,
    Throttler,
    filthiest_log,
)
from trafka.storage.config_defs import BROKER_CONFIG_DEFS
from trafka.storage.manager import LogManager
from trafka.wire.errors import KafkaError

log = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_BACKOFF_MS: int = BROKER_CONFIG_DEFS["log.cleaner.backoff.ms"].default

#: The broker properties the cleaner reads.
CLEANER_PROPERTIES = (
    "log.cleaner.enable",
    "log.cleaner.threads",
    "log.cleaner.backoff.ms",
    "log.cleaner.dedupe.buffer.size",
    "log.cleaner.io.buffer.size",
    "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.max.bytes.per.second",
)


class CleanerConfigError(ValueError):
    """A ``log.cleaner.*`` property that cannot be used, with the property named."""


def _number(props: Mapping[str, str], name: str, default: float, parse: Callable[[str], Any], minimum: float) -> Any:
    raw = props.get(name)
    if raw is None or not str(raw).strip():
        return default
    try:
        value = parse(str(raw).strip())
    except ValueError:
        raise CleanerConfigError(f"{name}={raw!r}: expected a number") from None
    if value < minimum:
        raise CleanerConfigError(f"{name}={raw!r}: must be at least {minimum}")
    return value


def _now_ms() -> int:
    return clock.now_ms()


class LogCleaner:
    """Compacts the compacted logs of ``log_manager``; ``config`` is the ``BrokerConfig`` (or a mapping of
    broker properties). Start it with ``nursery.start(LogCleaner(...).run)``."""

    def __init__(self, log_manager: LogManager, config: Any = None) -> None:
        props: Mapping[str, str] = getattr(config, "properties", config) or {}
        self.log_manager = log_manager
        enable = str(props.get("log.cleaner.enable", "true")).strip().lower()
        if enable not in ("true", "false", ""):
            raise CleanerConfigError(f"log.cleaner.enable={enable!r}: expected true or false")
        self.enabled = enable != "false"
        self.threads = _number(props, "log.cleaner.threads", 1, int, 1)
        self.backoff_s = _number(props, "log.cleaner.backoff.ms", DEFAULT_BACKOFF_MS, int, 0) / 1000
        dedupe = _number(props, "log.cleaner.dedupe.buffer.size", DEFAULT_DEDUPE_BUFFER_SIZE, int, 1)
        io_buffer = _number(props, "log.cleaner.io.buffer.size", DEFAULT_IO_BUFFER_SIZE, int, 1)
        load_factor = _number(props, "log.cleaner.io.buffer.load.factor", DEFAULT_IO_BUFFER_LOAD_FACTOR, float, 0)
        max_rate = _number(props, "log.cleaner.io.max.bytes.per.second", float("inf"), float, 0)
        self.cleaner_config = CleanerConfig(
            dedupe_buffer_size=dedupe // self.threads,
            io_buffer_size=io_buffer,
            io_buffer_load_factor=load_factor,
            io_max_bytes_per_second=max_rate,
        )
        OffsetMap(self.cleaner_config.dedupe_buffer_size, load_factor)  # a map too small is refused at once
        self.throttler = Throttler(max_rate)
        self.checkpoint: CleanerCheckpoint | None = None
        self._in_progress: set[tuple[str, int]] = set()
        self._uncleanable: set[tuple[str, int]] = set()
        # Logs whose last cleaning could not move their first dirty offset, and the section it was
        # given: not chosen again until that section changes.
        self._no_progress: dict[tuple[str, int], tuple[int, int]] = {}
        #: Totals, for logs and tests: cleanings done, bytes read and written.
        self.cleanings = 0
        self.bytes_read = 0
        self.bytes_written = 0

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Clean until cancelled (returns at once when ``log.cleaner.enable`` is false)."""
        if not self.enabled:
            log.info("the log cleaner is disabled (log.cleaner.enable=false): compacted topics are not compacted")
            task_status.started()
            return
        self.checkpoint = await trio.to_thread.run_sync(CleanerCheckpoint, self.log_manager.data_dir)
        task_status.started()
        async with trio.open_nursery() as nursery:
            for index in range(self.threads):
                nursery.start_soon(self._worker, index)

    async def _worker(self, index: int) -> None:
        offset_map = OffsetMap(self.cleaner_config.dedupe_buffer_size, self.cleaner_config.io_buffer_load_factor)
        while True:
            try:
                cleaned = await self.clean_one(offset_map)
            finally:
                offset_map.clear()  # the map's memory goes back between cleanings
            if not cleaned:
                await trio.sleep(self.backoff_s)
            else:
                await trio.lowlevel.checkpoint()

    def _skip(self, candidate: LogToClean) -> bool:
        key = (candidate.log.topic, candidate.log.partition)
        if key in self._in_progress or key in self._uncleanable:
            return True
        stuck = self._no_progress.get(key)
        return stuck == (candidate.first_dirty_offset, candidate.first_uncleanable_offset)

    def _note_truncations(self) -> None:
        """A truncated log (a follower's) is dirty again from where it was truncated."""
        assert self.checkpoint is not None
        offsets = self.checkpoint.offsets
        for storage_log in self.log_manager.logs():
            truncated_to = storage_log.truncated_to
            if truncated_to is None:
                continue
            key = (storage_log.topic, storage_log.partition)
            if key in self._in_progress:
                continue  # its cleaning applies it when it ends
            storage_log.truncated_to = None
            if key in offsets and offsets[key] > truncated_to:
                offsets[key] = truncated_to

    async def clean_one(self, offset_map: OffsetMap) -> bool:
        """Clean the dirtiest log, if any needs it; returns whether one was chosen."""
        if self.checkpoint is None:
            self.checkpoint = await trio.to_thread.run_sync(CleanerCheckpoint, self.log_manager.data_dir)
        self._note_truncations()
        now = _now_ms()
        to_clean = filthiest_log(self.log_manager.logs(), self.checkpoint.offsets, now, skip=self._skip)
        if to_clean is None:
            return False
        storage_log = to_clean.log
        key = (storage_log.topic, storage_log.partition)
        self._in_progress.add(key)
        stop = threading.Event()

        def check_done() -> None:
            if stop.is_set():
                raise CleaningAborted("the log cleaner is stopping")

        try:
            job = CleaningJob.prepare(
                to_clean, self.cleaner_config, throttler=self.throttler, check_done=check_done, now_ms=now
            )
            log.info(
                "cleaning %s-%d: dirty from offset %d to %d (%.0f%% of %d bytes)%s", key[0], key[1],
                to_clean.first_dirty_offset, to_clean.first_uncleanable_offset, 100 * to_clean.cleanable_ratio,
                to_clean.total_bytes, " (max.compaction.lag.ms passed)" if to_clean.need_compaction_now else "",
            )
            end_offset = await self._in_thread(stop, job.build_offset_map, offset_map)
            for group in await self._in_thread(stop, job.groups):
                cleaned = await self._in_thread(stop, job.clean_group, group)
                if storage_log.closed or self.log_manager.get_log(*key) is not storage_log:
                    job.delete_cleaned(cleaned.base_offset)
                    raise CleaningAborted(f"{key[0]}-{key[1]} was deleted")
                job.swap(cleaned)  # on the event loop: between appends
            job.stats.done = time.monotonic()
            await self._checkpoint(storage_log, key, end_offset)
            if end_offset <= to_clean.first_dirty_offset:
                self._no_progress[key] = (to_clean.first_dirty_offset, to_clean.first_uncleanable_offset)
            else:
                self._no_progress.pop(key, None)
            self.cleanings += 1
            self.bytes_read += job.stats.bytes_read + job.stats.map_bytes_read
            self.bytes_written += job.stats.bytes_written
            log.info("cleaned %s-%d up to offset %d: %s", key[0], key[1], end_offset, job.stats.describe())
        except CleaningAborted as exc:
            log.info("cleaning of %s-%d stopped: %s", key[0], key[1], exc)
        except (KafkaError, OSError, ValueError) as exc:
            # Kafka's "uncleanable partition": left alone until the broker restarts.
            self._uncleanable.add(key)
            log.error("cannot clean %s-%d, leaving it uncompacted until restart: %s", key[0], key[1], exc)
        finally:
            self._in_progress.discard(key)
        return True

    async def _in_thread(self, stop: threading.Event, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` in a worker thread; cancelled, the thread is told to stop at its next batch
        and left to do so (it only ever writes ``.cleaned`` files, which the next start removes)."""
        try:
            return await trio.to_thread.run_sync(function, *args, abandon_on_cancel=True)
        except trio.Cancelled:
            stop.set()
            raise

    async def _checkpoint(self, storage_log: Any, key: tuple[str, int], end_offset: int) -> None:
        assert self.checkpoint is not None
        truncated_to = storage_log.truncated_to
        if truncated_to is not None:  # truncated while being cleaned: dirty again from there
            storage_log.truncated_to = None
            end_offset = min(end_offset, truncated_to)
        self.checkpoint.offsets[key] = end_offset
        live = [(existing.topic, existing.partition) for existing in self.log_manager.logs()]
        generation, offsets = self.checkpoint.snapshot(live)
        try:
            await trio.to_thread.run_sync(self.checkpoint.write, generation, offsets)
        except OSError as exc:
            log.error("cannot write %s: %s", self.checkpoint.path, exc)
