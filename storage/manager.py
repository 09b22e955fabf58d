"""The log manager: every partition log in one data directory, laid out as Kafka lays it out.

::

    <data dir>/
        .lock                               held (flock) while a broker uses the directory
        meta.properties                     version=1, node.id, cluster.id
        .kafka_cleanshutdown                present only after a clean shutdown
        recovery-point-offset-checkpoint    per partition: everything below is flushed
        log-start-offset-checkpoint         per partition: the log start offset
        replication-offset-checkpoint       per partition: the high watermark
        orders-0/                           one directory per partition (see storage.log)
        orders-1.3f2a...-delete/            a deleted partition, removed right away

``load`` opens every partition directory: after a clean shutdown (the marker file is there) the
logs are trusted; otherwise each log re-validates what lies after its recovery point. The marker
is removed as soon as loading starts, so a crash at any later point counts as unclean.
``close`` flushes every log, writes the checkpoints with recovery points at the log end offsets,
and writes the marker.

``create_logs`` creates the logs of many partitions at once (a new topic's) and then makes them
durable together, with one fsync of the data directory for all of them; ``prepare_logs``,
``LogCreation.run`` and ``add_created`` are the same in three steps, the file work in a thread of
the caller's choosing.

The logs of deleted partitions and the files of deleted segments are let go of once
``file.delete.delay.ms`` has passed (``delete_expired_files``, also run by ``checkpoint``). Reads
in flight never depend on that delay: a file slice waiting to be sent holds the descriptor it
reads from, which closes when the slice is gone (see ``trafka.storage.open_files``).
"""
from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from trafka.storage import files
from trafka.storage import clock
from trafka.storage.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    OrderedWrites,
    atomic_write,
    fsync_path,
    read_offsets_checkpoint,
    write_offsets_checkpoints,
)
from trafka.storage.config import LogConfig
from trafka.storage.log import Log, SegmentFlush, write_partition_metadata
from trafka.storage.topics import new_topic_id, topic_id_to_string

logger = logging.getLogger(__name__)

LOCK_FILE = ".lock"
META_PROPERTIES_FILE = "meta.properties"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
META_PROPERTIES_VERSION = 1


def _now_ms(now_ms: int | None) -> int:
    return clock.now_ms() if now_ms is None else now_ms


class DataDirectoryInUse(OSError):
    """Another process holds the data directory's lock: one broker per data directory."""


@dataclass(frozen=True)
class OffsetsCheckpoints:
    """Every log's recovery point, log start offset and high watermark as they stood when taken
    (``LogManager.offsets_checkpoints``), by checkpoint file; ``generation`` orders them."""

    generation: int
    files: dict[Path, dict[tuple[str, int], int]]


class LogCreation:
    """The files of new, empty logs, created and made durable by ``run`` in any thread; it touches
    no state of the manager that prepared it (see ``LogManager.prepare_logs``).

    Each log gets its directory, ``partition.metadata`` (its topic id) and the ``.log`` file of its
    first segment. Then all of them become durable together: each ``partition.metadata`` and each new
    directory is fsynced, then the data directory once, so that no data is ever appended to a log
    whose topic id or directory a crash could lose.
    """

    def __init__(
        self,
        data_dir: Path,
        specs: list[tuple[str, int, LogConfig, uuid.UUID]],
        new: Mapping[tuple[str, int], tuple[LogConfig, uuid.UUID]],
        now_ms: int,
    ) -> None:
        self.data_dir = data_dir
        self.specs = specs
        self._new = dict(new)
        self._now_ms = now_ms
        self.created: dict[tuple[str, int], Log] = {}
        self.done = False

    def run(self) -> None:
        """Create and sync the new logs; on failure close the ones created and re-raise (their
        directories stay, and a later creation loads them)."""
        try:
            for (topic, partition), (config, topic_id) in self._new.items():
                directory = self.data_dir / files.partition_dir_name(topic, partition)
                self.created[(topic, partition)] = Log.create(
                    directory, config, topic_id=topic_id, now_ms=self._now_ms, sync=False
                )
            for log in self.created.values():
                if log.topic_id is not None:
                    fsync_path(log.dir / files.PARTITION_METADATA_FILE)
                fsync_path(log.dir)
            if self.created:
                fsync_path(self.data_dir)
        except BaseException:
            for log in self.created.values():
                log.close()
            self.created.clear()
            raise
        self.done = True


class LogDeletion:
    """The directories of logs taken out of their manager (``LogManager.remove_logs``), removed by
    ``run`` in any thread: each is renamed ``<topic>-<partition>.<id>-delete``, the data directory
    is synced once (a crash after that leaves only names the next start removes), then each is
    removed."""

    def __init__(self, data_dir: Path, moves: list[tuple[tuple[str, int], Path, Path]]) -> None:
        self.data_dir = data_dir
        self._moves = moves
        self.partitions = [key for key, _, _ in moves]

    def run(self) -> None:
        for _, source, target in self._moves:
            os.replace(source, target)
        if self._moves:
            fsync_path(self.data_dir)
        for key, _, target in self._moves:
            shutil.rmtree(target, ignore_errors=True)
            logger.info("%s: deleted log %s-%d", self.data_dir, *key)


class LogManager:
    """Loads, creates, checkpoints and deletes the partition logs of one data directory."""

    def __init__(
        self,
        data_dir: Path,
        default_config: LogConfig,
        *,
        node_id: int = 0,
        cluster_id: str | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.default_config = default_config
        self.node_id = node_id
        self._requested_cluster_id = cluster_id
        self.cluster_id: str | None = cluster_id
        self._logs: dict[tuple[str, int], Log] = {}
        self._closing_logs: list[tuple[int, Log]] = []  # (close at ms, log) of deleted partitions
        self._lock_fd: int | None = None
        self._loaded = False
        self._checkpoint_writes = OrderedWrites()

    # -- start-up ------------------------------------------------------------------------------------

    def require_cluster_id(self, cluster_id: str) -> None:
        """Take only a data directory of ``cluster_id`` (a new one is given it): :meth:`load` raises
        ``RuntimeError`` for one of another cluster."""
        self._requested_cluster_id = cluster_id

    def load(self, topic_configs: Mapping[str, LogConfig] | None = None, *, now_ms: int | None = None) -> None:
        """Take the data directory and open (recovering where needed) every partition log in it.

        ``topic_configs`` gives the config of topics that override the default one.
        """
        if self._loaded:
            raise RuntimeError(f"{self.data_dir} is already loaded")
        topic_configs = topic_configs or {}
        now = _now_ms(now_ms)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._lock()
        try:
            self._load_meta_properties()
        except BaseException:  # a directory of another node or cluster: let it go for its owner
            self._unlock()
            raise
        marker = self.data_dir / CLEAN_SHUTDOWN_FILE
        had_clean_shutdown = marker.exists()
        if had_clean_shutdown:
            marker.unlink()
            fsync_path(self.data_dir)
        recovery_points = self._read_checkpoint(RECOVERY_POINT_CHECKPOINT)
        log_start_offsets = self._read_checkpoint(LOG_START_OFFSET_CHECKPOINT)
        high_watermarks = self._read_checkpoint(REPLICATION_OFFSET_CHECKPOINT)
        paths = sorted(self.data_dir.iterdir())
        if not had_clean_shutdown and any(path.is_dir() for path in paths):
            logger.info("%s: no clean shutdown marker: recovering logs from their recovery points", self.data_dir)
        for path in paths:
            if not path.is_dir():
                continue
            if files.is_delete_dir_name(path.name):
                shutil.rmtree(path, ignore_errors=True)
                continue
            try:
                topic, partition = files.parse_partition_dir_name(path.name)
            except ValueError:
                logger.warning("%s: ignoring directory %s, which is no partition log", self.data_dir, path.name)
                continue
            key = (topic, partition)
            self._logs[key] = Log.open(
                path,
                topic_configs.get(topic, self.default_config),
                recovery_point=recovery_points.get(key, 0),
                log_start_offset=log_start_offsets.get(key, 0),
                high_watermark=high_watermarks.get(key, 0),
                had_clean_shutdown=had_clean_shutdown,
                now_ms=now,
            )
        self._loaded = True
        logger.info("%s: loaded %d logs", self.data_dir, len(self._logs))

    def _lock(self) -> None:
        if self._lock_fd is not None:
            return
        fd = os.open(self.data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DataDirectoryInUse(
                f"data directory {self.data_dir} is in use by another broker (cannot lock {LOCK_FILE})"
            ) from None
        self._lock_fd = fd

    def _unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _load_meta_properties(self) -> None:
        """Check ``meta.properties`` against this broker, or write it on first use."""
        path = self.data_dir / META_PROPERTIES_FILE
        if not path.exists():
            self.cluster_id = self._requested_cluster_id or topic_id_to_string(new_topic_id())
            lines = [f"version={META_PROPERTIES_VERSION}", f"node.id={self.node_id}", f"cluster.id={self.cluster_id}"]
            atomic_write(path, ("\n".join(lines) + "\n").encode("utf-8"))
            return
        properties = {}
        for line in path.read_text(encoding="utf-8").splitlines():
            line = line.strip()
            if line and not line.startswith(("#", "!")):
                key, _, value = line.partition("=")
                properties[key.strip()] = value.strip()
        stored_cluster_id = properties.get("cluster.id")
        if self._requested_cluster_id is not None and stored_cluster_id not in (None, self._requested_cluster_id):
            raise RuntimeError(
                f"{path}: the data directory belongs to cluster {stored_cluster_id}, "
                f"not {self._requested_cluster_id}"
            )
        stored_node_id = properties.get("node.id", properties.get("broker.id"))
        if stored_node_id is not None and int(stored_node_id) != self.node_id:
            raise RuntimeError(f"{path}: the data directory belongs to node {stored_node_id}, not {self.node_id}")
        self.cluster_id = stored_cluster_id or self._requested_cluster_id

    def _read_checkpoint(self, name: str) -> dict[tuple[str, int], int]:
        try:
            return read_offsets_checkpoint(self.data_dir / name)
        except (ValueError, OSError) as e:
            logger.warning("%s: ignoring unreadable checkpoint %s: %s", self.data_dir, name, e)
            return {}

    # -- logs ----------------------------------------------------------------------------------------

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def logs(self) -> Iterator[Log]:
        return iter(list(self._logs.values()))

    def logs_for_topic(self, topic: str) -> list[Log]:
        return [log for (name, _), log in sorted(self._logs.items()) if name == topic]

    def create_log(
        self, topic: str, partition: int, config: LogConfig, topic_id: uuid.UUID, *, now_ms: int | None = None
    ) -> Log:
        """The log of ``topic``-``partition``, created (empty) unless it already exists; see ``create_logs``."""
        return self.create_logs([(topic, partition, config, topic_id)], now_ms=now_ms)[0]

    def create_logs(
        self, specs: Iterable[tuple[str, int, LogConfig, uuid.UUID]], *, now_ms: int | None = None
    ) -> list[Log]:
        """The log of each ``(topic, partition, config, topic_id)``, in order, created (empty) unless
        it already exists; an existing log gets the config, and the topic id if it had none.

        New logs are durable on return (see ``LogCreation``). Raises ``ValueError``, before
        creating anything, for a log that belongs to another topic id or a directory name that is
        too long.
        """
        creation = self.prepare_logs(specs, now_ms=now_ms)
        creation.run()
        return self.add_created(creation)

    def prepare_logs(
        self, specs: Iterable[tuple[str, int, LogConfig, uuid.UUID]], *, now_ms: int | None = None
    ) -> LogCreation:
        """``create_logs`` in three steps, so that the file work can leave the caller's thread:
        check the specs here, ``run`` the returned creation in any thread, then pass it to
        ``add_created`` here. The caller keeps creations of the same partitions from overlapping."""
        self._require_loaded()
        specs = list(specs)
        topic_ids: dict[tuple[str, int], uuid.UUID] = {}
        new: dict[tuple[str, int], tuple[LogConfig, uuid.UUID]] = {}
        for topic, partition, config, topic_id in specs:
            existing = self._logs.get((topic, partition))
            known = topic_ids.get((topic, partition), existing.topic_id if existing is not None else None)
            if known is not None and known != topic_id:
                raise ValueError(f"log {topic}-{partition} belongs to topic id {known}, not {topic_id}")
            topic_ids[(topic, partition)] = topic_id
            name = files.partition_dir_name(topic, partition)
            if len(name.encode("utf-8")) > files.MAX_FILE_NAME_LENGTH:
                raise ValueError(f"partition directory name {name!r} is too long")
            if existing is None:
                new.setdefault((topic, partition), (config, topic_id))
        return LogCreation(self.data_dir, specs, new, _now_ms(now_ms))

    def add_created(self, creation: LogCreation) -> list[Log]:
        """The log of each of ``creation``'s specs, in order, after ``creation.run()``: the new ones
        join this manager; an existing one gets the spec's config, and its topic id if it had none."""
        if not creation.done:
            raise RuntimeError("LogCreation.run() has not completed")
        logs: list[Log] = []
        for topic, partition, config, topic_id in creation.specs:
            key = (topic, partition)
            log = creation.created.pop(key, None)
            if log is not None:
                if key in self._logs:
                    log.close()
                    raise RuntimeError(f"log {topic}-{partition} was created twice at once")
                self._logs[key] = log
            else:
                log = self._logs[key]
                if log.topic_id is None:
                    write_partition_metadata(log.dir, topic_id)
                    log.topic_id = topic_id
                log.update_config(config)
            logs.append(log)
        return logs

    def delete_logs(self, topic: str, *, now_ms: int | None = None) -> list[tuple[str, int]]:
        """Delete every partition log of ``topic`` (``remove_logs``, its deletion run at once) and
        checkpoint. Returns the partitions deleted."""
        deletion = self.remove_logs(topic, now_ms=now_ms)
        deletion.run()
        if deletion.partitions:
            self.checkpoint(now_ms=now_ms)
        return deletion.partitions

    def remove_logs(self, topic: str, *, partitions: Iterable[int] | None = None,
                    now_ms: int | None = None) -> LogDeletion:
        """Take every partition log of ``topic`` (or those of ``partitions``) out of this manager; the
        returned deletion's ``run``, in any thread, removes their directories. Their ``.log``
        descriptors are let go of at once (reads in flight keep theirs until sent); their indexes stay
        mapped for ``file.delete.delay.ms``."""
        now = _now_ms(now_ms)
        chosen = None if partitions is None else set(partitions)
        moves = []
        for key in sorted(k for k in self._logs if k[0] == topic and (chosen is None or k[1] in chosen)):
            log = self._logs.pop(key)
            log.release_descriptors()
            target = self.data_dir / files.delete_dir_name(*key)
            moves.append((key, log.dir, target))
            log.dir = target
            self._closing_logs.append((now + log.config.file_delete_delay_ms, log))
        return LogDeletion(self.data_dir, moves)

    def delete_expired_files(self, now_ms: int | None = None) -> None:
        """Close the files of deleted partitions, and remove those of deleted segments, once their
        ``file.delete.delay.ms`` has passed."""
        now = _now_ms(now_ms)
        keep = []
        for deadline, log in self._closing_logs:
            if deadline <= now:
                log.close_handles()
            else:
                keep.append((deadline, log))
        self._closing_logs = keep
        for log in self._logs.values():
            log.remove_deleted_segments(now)

    def due_flushes(self, now_ms: int | None = None) -> Iterator[tuple[Log, SegmentFlush]]:
        """The flushes that are due (see ``Log.due_flush``): segments left by rolls, and logs whose
        ``flush.ms`` has passed. Each is opened as the iteration reaches it."""
        now = _now_ms(now_ms)
        for log in list(self._logs.values()):
            try:
                flush = log.due_flush(now)
            except OSError as e:
                logger.error("cannot flush %s, its recovery point stays: %s", log.dir, e)
                continue
            if flush is not None:
                yield log, flush

    # -- checkpoints and shutdown --------------------------------------------------------------------

    def offsets_checkpoints(self) -> OffsetsCheckpoints:
        """Every log's recovery point, log start offset and high watermark as they stand, for
        ``write_checkpoints`` (which may run in another thread)."""
        self._require_loaded()
        logs = self._logs
        return OffsetsCheckpoints(self._checkpoint_writes.take(), {
            self.data_dir / RECOVERY_POINT_CHECKPOINT: {key: log.recovery_point for key, log in logs.items()},
            self.data_dir / LOG_START_OFFSET_CHECKPOINT: {key: log.log_start_offset for key, log in logs.items()},
            self.data_dir / REPLICATION_OFFSET_CHECKPOINT: {key: log.high_watermark for key, log in logs.items()},
        })

    def write_checkpoints(self, checkpoints: OffsetsCheckpoints) -> None:
        """Write ``checkpoints`` atomically, in any thread. Writers take turns, and checkpoints taken
        before the last ones written are dropped: the files never go back, say to the entries of a
        topic deleted meanwhile."""
        self._checkpoint_writes.write(checkpoints.generation, lambda: write_offsets_checkpoints(checkpoints.files))

    def checkpoint(self, *, now_ms: int | None = None) -> None:
        """Write the recovery point, log start offset and high watermark checkpoints atomically."""
        self.write_checkpoints(self.offsets_checkpoints())
        self.delete_expired_files(now_ms)

    def close(self) -> None:
        """Flush and close every log, checkpoint (recovery points at the log end offsets) and mark
        the shutdown clean."""
        if not self._loaded:
            self._unlock()
            return
        for log in self._logs.values():
            log.flush()
        self.checkpoint()
        for log in self._logs.values():
            log.close()
        for _, log in self._closing_logs:
            log.close_handles()
        self._closing_logs = []
        marker = {"version": 0, "brokerEpoch": -1}
        atomic_write(self.data_dir / CLEAN_SHUTDOWN_FILE, json.dumps(marker).encode("ascii"))
        self._logs = {}
        self._loaded = False
        self._unlock()

    @property
    def loaded(self) -> bool:
        """Whether the data directory is taken and its logs open (between ``load`` and ``close``)."""
        return self._loaded

    def _require_loaded(self) -> None:
        if not self._loaded:
            raise RuntimeError("LogManager.load() has not been called")

    def __enter__(self) -> LogManager:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

