"""The broker's state: logs, topics, producer ids, and the background work that keeps them healthy.

Handlers reach everything through :class:`Broker`. It is created by the server once the listeners are
bound (so the advertised port is known), recovers the logs at :meth:`start`, and flushes and
checkpoints everything at :meth:`stop`.
"""
from __future__ import annotations

import logging
import time

import trio

from broker.config import BrokerConfig
from broker.groups.coordinator import GroupCoordinator
from broker.producer_ids import ProducerIdManager
from broker.topics import TopicManager
from storage.config import LogConfig
from storage.manager import LogManager
from storage.topics import TopicCatalog

log = logging.getLogger(__name__)

# How often recovery points and high watermarks are checkpointed (Kafka's
# log.flush.offset.checkpoint.interval.ms and replica.high.watermark.checkpoint.interval.ms).
CHECKPOINT_INTERVAL_S = 60.0
# How often flushes due by flush.ms and deleted segments' files are looked after.
HOUSEKEEPING_INTERVAL_S = 1.0


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        config.data_dir.mkdir(parents=True, exist_ok=True)
        self.default_log_config = LogConfig.from_broker_properties(config.properties)
        self.log_manager = LogManager(
            config.data_dir,
            self.default_log_config,
            node_id=config.node_id,
            cluster_id=config.cluster_id,
        )
        self.catalog = TopicCatalog(config.data_dir)
        self.topics = TopicManager(config, self.default_log_config, self.log_manager, self.catalog)
        self.producer_ids = ProducerIdManager(config.data_dir)
        # Consumer groups and their committed offsets (kept in __consumer_offsets).
        self.groups = GroupCoordinator(self)
        self._background: trio.CancelScope | None = None

    @property
    def cluster_id(self) -> str:
        return self.log_manager.cluster_id

    async def start(self) -> None:
        started = time.monotonic()
        self.topics.load()
        log.info("recovered logs in %.3f s", time.monotonic() - started)

    async def run_background(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Periodic work, as Kafka's scheduler does it: flushes due by ``flush.ms``, removal of
        deleted segments once ``file.delete.delay.ms`` has passed, and checkpoints."""
        with trio.CancelScope() as self._background:
            async with trio.open_nursery() as nursery:
                # The coordinator replays __consumer_offsets, then runs the group timers.
                await nursery.start(self.groups.run)
                task_status.started()
                next_checkpoint = trio.current_time() + CHECKPOINT_INTERVAL_S
                while True:
                    await trio.sleep(HOUSEKEEPING_INTERVAL_S)
                    self.log_manager.flush_dirty_logs()
                    self.log_manager.delete_expired_files()
                    if trio.current_time() >= next_checkpoint:
                        self.log_manager.checkpoint()
                        next_checkpoint = trio.current_time() + CHECKPOINT_INTERVAL_S

    def begin_shutdown(self) -> None:
        """Shutdown has begun: answer requests parked on group rebalances now, so connections drain."""
        self.groups.stop()

    async def stop(self) -> None:
        if self._background is not None:
            self._background.cancel()
        self.groups.stop()
        self.log_manager.close()
        log.info("logs flushed and checkpointed")

