"""The broker's state: logs, topics, producer ids, and the background work that keeps them healthy.

Handlers reach everything through :class:`Broker`; the services it holds do not: each is given the
narrow things it uses (the topics, the node id, the producer id allocator, a marker writer, a callback).
The broker is created by the server once the listeners are bound (so the advertised port is known),
recovers the logs at :meth:`start`, and flushes and checkpoints everything at :meth:`stop`.

The group and transaction coordinators are started with the broker's background tasks when their
internal topic exists, and otherwise by the first request that needs them
(:meth:`Broker.group_coordinator`, :meth:`Broker.transaction_coordinator`): a broker that only serves
producers and assigned consumers never imports the group code, the largest part of its own modules.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import trio

from trafka.broker.cluster import CoordinationError
from trafka.broker.config import BrokerConfig
from trafka.broker.faults import FaultRules
from trafka.broker.memory import RELEASED_BUFFERS
from trafka.broker.producer_ids import ClusterProducerIdManager, ProducerIdManager
from trafka.broker.topics import OFFSETS_TOPIC, SHARE_STATE_TOPIC, TRANSACTION_STATE_TOPIC, Topic, TopicManager
from trafka.storage import clock
from trafka.storage.broker_configs import DynamicBrokerConfigs
from trafka.storage.config import LogConfig
from trafka.storage.manager import LogManager
from trafka.storage.topics import TopicCatalog
from trafka.wire.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from trafka.broker.partition import Partition
    from trafka.broker.cluster.zookeeper import ZooKeeperCluster
    from trafka.broker.replication.manager import ReplicaManager
    from trafka.broker.groups.coordinator import GroupCoordinator
    from trafka.broker.txn.channel import PeerChannel
    from trafka.broker.txn.coordinator import TransactionCoordinator
    from trafka.broker.txn.markers import TxnMarker
    from trafka.broker.share.manager import SharePartitionManager
    from trafka.broker.share.coordinator import ShareCoordinator
    from trafka.broker.share.state import SharePersister
    from trafka.broker.metrics import Metrics
    from trafka.broker.cluster.users import ClusterScramCredentials
    from trafka.broker.cluster.acls import ClusterAcls
    from trafka.broker.security.acls import AclStore
    from trafka.broker.security.authorizer import Authorizer
    from trafka.broker.security.credentials import AlterResult, Deletion, ScramCredentialStore, Upsertion
    from trafka.broker.security.quotas import Alteration
    from trafka.broker.security.quotas import AlterResult as QuotaResult

log = logging.getLogger(__name__)

# How often recovery points and high watermarks are checkpointed (Kafka's
# log.flush.offset.checkpoint.interval.ms and replica.high.watermark.checkpoint.interval.ms).
CHECKPOINT_INTERVAL_S = 60.0
# How often due flushes (rolled segments, flush.ms) and deleted segments' files are looked after.
HOUSEKEEPING_INTERVAL_S = 1.0
# Retention's first look comes this soon after start (then every log.retention.check.interval.ms); it
# looks at this many logs between two chances for other tasks to run.
RETENTION_FIRST_CHECK_S = 30.0
RETENTION_BATCH = 500
# The log cleaner starts this long after the broker serves (log.cleaner.backoff.ms is 15 s between looks).
LOG_CLEANER_START_DELAY_S = 0.2


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        from trafka.broker.security.acls import authorizer_from_properties

        #: The authorizer (authorizer.class.name) every request is checked with; None: requests are not
        #: authorized. ``acls`` keeps the ACLs it enforces (a file here, or ZooKeeper in a cluster).
        self.authorizer: Authorizer | None = authorizer_from_properties(config.properties)
        self.acls: AclStore | ClusterAcls | None = None
        config.data_dir.mkdir(parents=True, exist_ok=True)
        # Broker properties set at run time, over those given at start-up (see change_dynamic_configs).
        self.dynamic_configs = DynamicBrokerConfigs.load(config.data_dir)
        self.default_log_config = LogConfig.from_broker_properties(self.dynamic_configs.effective(config.properties))
        self.log_manager = LogManager(
            config.data_dir,
            self.default_log_config,
            node_id=config.node_id,
            cluster_id=config.cluster_id,
        )
        self.catalog = TopicCatalog(config.data_dir)
        self._scram_credentials: ScramCredentialStore | ClusterScramCredentials | None = None
        #: The cluster this broker is one of (broker.cluster), or None: a single node.
        self.cluster: ZooKeeperCluster | None = None
        self.replicas: ReplicaManager | None = None
        #: Requests of the transaction machinery to the other brokers of the cluster (None: a single node).
        self.peers: PeerChannel | None = None
        if config.zookeeper_connect is None:
            self.topics = TopicManager(config, self.default_log_config, self.log_manager, self.catalog)
        else:
            self.topics = self._join_cluster(config)
        if self.cluster is None:
            self.producer_ids: ProducerIdManager | ClusterProducerIdManager = ProducerIdManager(config.data_dir)
        else:
            self.producer_ids = ClusterProducerIdManager(self.cluster.claim_producer_id_block)
        if self.authorizer is not None:
            if self.cluster is None:
                from trafka.broker.security.acls import AclStore

                self.acls = AclStore.load(config.data_dir, self.authorizer)
            else:
                from trafka.broker.cluster.acls import ClusterAcls

                self.acls = ClusterAcls(self.cluster, self.authorizer)
        self._dynamic_config_changes = trio.Lock()
        #: What tests ask the broker to do to some requests (broker.faults; the control endpoint).
        self.faults = FaultRules()
        #: Client quotas: every entity's configs and the measurement of clients (broker.security.quotas); a
        #: single node keeps the configs in its data directory, a cluster's broker follows ZooKeeper's.
        from trafka.broker.security.quotas import ClientQuotas, ClientQuotaStore

        self.client_quotas = ClientQuotas.from_properties(config.properties)
        if self.cluster is None:
            self._quota_store = ClientQuotaStore.load(config.data_dir)
            self.client_quotas.update(self._quota_store.configs)
        else:
            from trafka.broker.cluster.quotas import ClusterQuotas

            self._cluster_quotas = ClusterQuotas(self.cluster, self.client_quotas)
        #: broker.metrics.Metrics when metrics.port is set, for the handlers to count in.
        self.metrics: Metrics | None = None
        self._groups: GroupCoordinator | None = None
        self._transactions: TransactionCoordinator | None = None
        self._shares: ShareCoordinator | None = None
        self._share_persister: SharePersister | None = None
        self._share_partitions: SharePartitionManager | None = None
        self._background: trio.CancelScope | None = None
        self._background_tasks: trio.Nursery | None = None

    def _join_cluster(self, config: BrokerConfig) -> TopicManager:
        """The parts of a broker in a cluster coordinated through ZooKeeper (imported only then)."""
        from trafka.broker.cluster import BrokerRegistration, Endpoint
        from trafka.broker.cluster.topics import ClusterTopicManager
        from trafka.broker.cluster.zookeeper import ZooKeeperCluster
        from trafka.broker.replication.manager import ReplicaManager
        from trafka.broker.security.inter_broker import inter_broker_security

        host, port = config.inter_broker_listener.advertised_address
        endpoints = tuple(Endpoint(listener.name, listener.security_protocol, *listener.advertised_address)
                          for listener in config.listeners)
        self.cluster = ZooKeeperCluster(
            config.zookeeper_connect,
            BrokerRegistration(config.node_id, host, port, config.broker_rack, endpoints),
            session_timeout_ms=config.zookeeper_session_timeout_ms,
            connection_timeout_ms=config.zookeeper_connection_timeout_ms,
            unclean_leader_election_enable=self.default_log_config.unclean_leader_election_enable,
            delete_topic_enable=config.delete_topic_enable,
            inter_broker_listener=config.inter_broker_listener_name,
        )
        from trafka.broker.txn.channel import PeerChannel

        security = inter_broker_security(config)
        self.replicas = ReplicaManager(config, self.cluster, security=security)
        self.replicas.on_leadership = self._on_leadership
        topics = ClusterTopicManager(config, self.default_log_config, self.log_manager, self.catalog, self.cluster,
                                     self.replicas)
        self.peers = PeerChannel(topics.live_brokers, security=security)
        return topics

    def _on_leadership(self, partition: Partition, leading: bool) -> None:
        """The group coordinator follows the leaders of ``__consumer_offsets``' partitions, the
        transaction coordinator those of ``__transaction_state`` (once loaded; when one loads, it looks
        at which it leads)."""
        if partition.topic == OFFSETS_TOPIC and self._groups is not None:
            self._groups.on_partition_leadership(partition.index, leading)
        elif partition.topic == TRANSACTION_STATE_TOPIC and self._transactions is not None:
            self._transactions.on_partition_leadership(partition.index, leading)
        elif partition.topic == SHARE_STATE_TOPIC and self._shares is not None:
            self._shares.on_partition_leadership(partition.index, leading)

    async def change_dynamic_configs(
        self, defaults: bool, change: Callable[[dict[str, str]], dict[str, str]], *, validate_only: bool = False
    ) -> None:
        """Change one layer of the dynamic broker configs, the cluster-wide ``defaults`` or this broker's
        own, with ``change`` (old layer -> new layer; it raises KafkaError to refuse). The new layers are
        written to disk first (in a worker thread); then the topic defaults they set apply at once to
        every topic that does not override them. Changes take turns."""
        async with self._dynamic_config_changes:
            layers = {"defaults": dict(self.dynamic_configs.defaults), "broker": dict(self.dynamic_configs.broker)}
            key = "defaults" if defaults else "broker"
            layers[key] = change(layers[key])
            log_config = LogConfig.from_broker_properties(
                {**self.config.properties, **layers["defaults"], **layers["broker"]}
            )
            if validate_only:
                return
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(self.dynamic_configs.save, layers["defaults"], layers["broker"])
                self.default_log_config = log_config
                self.log_manager.default_config = log_config
                await self.topics.set_default_log_config(log_config)
            log.info("dynamic broker configs are now %s (cluster defaults) and %s (this broker)",
                     layers["defaults"], layers["broker"])

    @property
    def cluster_id(self) -> str:
        return self.log_manager.cluster_id

    def scram_credentials(self) -> ScramCredentialStore | ClusterScramCredentials:
        """The SCRAM credentials that SASL's SCRAM-SHA-256/512 check and AlterUserScramCredentials keeps: a
        single node's in its data directory (read on the first call), a cluster's in ZooKeeper."""
        if self._scram_credentials is None:
            if self.cluster is not None:
                from trafka.broker.cluster.users import ClusterScramCredentials

                self._scram_credentials = ClusterScramCredentials(self.cluster)
            else:
                from trafka.broker.security.credentials import ScramCredentialStore

                self._scram_credentials = ScramCredentialStore.load(self.config.data_dir)
        return self._scram_credentials

    async def alter_scram_credentials(self, deletions: Sequence[Deletion],
                                      upsertions: Sequence[Upsertion]) -> list[AlterResult]:
        """AlterUserScramCredentials: validate and apply (in a worker thread where a file is written)."""
        store = self.scram_credentials()
        if self.cluster is not None:
            return await store.alter(deletions, upsertions)
        return await trio.to_thread.run_sync(store.alter, deletions, upsertions)

    async def alter_client_quotas(self, alterations: Sequence[Alteration], validate_only: bool) -> list[QuotaResult]:
        """AlterClientQuotas: validate, keep and apply (a single node writes its file in a worker thread)."""
        if self.cluster is not None:
            return await self._cluster_quotas.alter(alterations, validate_only)
        results, changed = await trio.to_thread.run_sync(self._quota_store.alter, alterations, validate_only)
        if changed:
            self.client_quotas.update(self._quota_store.configs)
        return results

    def group_coordinator(self) -> GroupCoordinator:
        """The group coordinator: consumer groups and their committed offsets (kept in
        ``__consumer_offsets``). The first call starts it with the broker's background tasks."""
        if self._groups is None:
            if self._background_tasks is None:
                raise RuntimeError("the group coordinator runs with the broker's background tasks")
            from trafka.broker.groups.coordinator import GroupCoordinator

            self._groups = GroupCoordinator(self.config, self.topics, single_node=self.cluster is None)
            self._background_tasks.start_soon(self._groups.run)
        return self._groups

    @property
    def loaded_groups(self) -> GroupCoordinator | None:
        """The group coordinator if it has been started, without starting it."""
        return self._groups

    def transaction_coordinator(self) -> TransactionCoordinator:
        """The transaction coordinator: transactional ids and their transactions (kept in
        ``__transaction_state``). The first call starts it with the broker's background tasks."""
        if self._transactions is None:
            if self._background_tasks is None:
                raise RuntimeError("the transaction coordinator runs with the broker's background tasks")
            from trafka.broker.txn.coordinator import TransactionCoordinator

            self._transactions = TransactionCoordinator(
                self.config, self.topics, node_id=self.node_id, single_node=self.cluster is None,
                producer_ids=self.producer_ids, offsets_partition_for=self._offsets_partition_for,
                write_markers=self.write_markers, send_markers=None if self.peers is None else self.peers.send,
            )
            self._background_tasks.start_soon(self._transactions.run)
        return self._transactions

    def share_coordinator(self) -> ShareCoordinator:
        """The share coordinator: the state of share groups' partitions (kept in ``__share_group_state``). The
        first call starts it with the broker's background tasks."""
        if self._shares is None:
            if self._background_tasks is None:
                raise RuntimeError("the share coordinator runs with the broker's background tasks")
            from trafka.broker.share.coordinator import ShareCoordinator

            self._shares = ShareCoordinator(self.config.properties, self.topics, single_node=self.cluster is None,
                                            topic_partitions=self._topic_partitions)
            self._background_tasks.start_soon(self._shares.run)
        return self._shares

    def _topic_partitions(self, topic_id) -> int | None:
        topic = self.topics.by_id(topic_id)
        return None if topic is None else len(topic.partitions)

    def share_persister(self) -> SharePersister:
        """Where share partitions keep their state: the share coordinator leading the key's ``__share_group_state``
        partition, in this process or on another broker of the cluster (broker.share.persister)."""
        if self._share_persister is None:
            from trafka.broker.share.persister import ClusterPersister, LocalPersister

            if self.cluster is None:
                self._share_persister = LocalPersister(self.share_coordinator)
            else:
                from trafka.broker.security.inter_broker import inter_broker_security

                self._share_persister = ClusterPersister(self.share_coordinator, self.node_id, self.topics.live_brokers,
                                                         security=inter_broker_security(self.config))
        return self._share_persister

    def share_manager(self) -> SharePartitionManager:
        """The share partitions this broker leads, their share sessions and acquisition locks (ShareFetch and
        ShareAcknowledge, broker.share.manager). The first call starts it with the broker's background tasks."""
        if self._share_partitions is None:
            if self._background_tasks is None:
                raise RuntimeError("the share partition manager runs with the broker's background tasks")
            from trafka.broker.share.manager import SharePartitionManager

            groups = self.group_coordinator()
            self._share_partitions = SharePartitionManager(
                self.config.properties, self.share_persister,
                group_configs=getattr(groups, "share_group_config", None),
                group_members=lambda group_id: (lambda group: None if group is None else len(group.members))(
                    groups.share_group(group_id)))
            register = getattr(groups, "on_share_member_left", None)
            if register is not None:
                register(self._share_partitions.member_left)
            if self.metrics is not None:
                self.metrics.watch_share_partitions(self._share_partitions)
            self._background_tasks.start_soon(self._share_partitions.run)
        return self._share_partitions

    def connection_closed(self, connection_id: int) -> None:
        """A client's connection closed: the share sessions last used on it end, their records released."""
        if self._share_partitions is not None:
            self._share_partitions.connection_closed(connection_id)

    async def _offsets_partition_for(self, group_id: str) -> int:
        """The partition of ``__consumer_offsets`` that holds ``group_id`` (AddOffsetsToTxn), with the
        topic in place: a transaction may name a group before any group request created it."""
        coordinator = self.group_coordinator()
        await coordinator.ensure_offsets_topic()
        return coordinator.partition_for(group_id)

    async def create_internal_topic(self, name: str) -> Topic:
        """The internal topic ``name`` (one of topics.INTERNAL_TOPICS) created as its coordinator creates it, with
        the partitions, replication factor and configs of its own settings, when a Metadata request would
        auto-create it (as Kafka's AutoTopicCreationManager does); or as it is, if it exists."""
        coordinator = {OFFSETS_TOPIC: self.group_coordinator, TRANSACTION_STATE_TOPIC: self.transaction_coordinator,
                       SHARE_STATE_TOPIC: self.share_coordinator}[name]()
        await coordinator.runtime.ensure_topic()
        topic = self.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist")
        return topic

    async def write_markers(self, markers: Sequence[TxnMarker]) -> dict[tuple[str, int], ErrorCode]:
        """Transaction markers to the partitions led here (broker.txn.markers); once a marker is
        replicated in a partition of ``__consumer_offsets``, the group coordinator completes the
        producer's transactional offset commits there."""
        from trafka.broker.txn.markers import write_markers

        return await write_markers(self.topics, markers, on_replicated=self._complete_transactional_offsets)

    def _complete_transactional_offsets(self, partition: tuple[str, int], marker: TxnMarker) -> None:
        topic, index = partition
        if topic == OFFSETS_TOPIC and self._groups is not None:
            self._groups.complete_transaction(index, marker.producer_id, marker.committed)

    async def start(self) -> None:
        """Recover the logs (a broker of a cluster does it in :meth:`run_background`, once it has
        joined the cluster and knows its id)."""
        if self.cluster is None:
            self._load()

    def _load(self) -> None:
        started = time.monotonic()
        self.topics.load()
        log.info("recovered logs in %.3f s", time.monotonic() - started)

    async def _run_cluster(self, nursery: trio.Nursery) -> None:
        """Join the cluster, recover the logs of this cluster's data directory, then lead and follow
        as the cluster's state says; returns once that state has been applied."""
        await nursery.start(self.cluster.run)
        if self.acls is not None:
            await nursery.start(self.acls.run)  # the cluster's ACLs, read before requests are served
        self.log_manager.require_cluster_id(self.cluster.cluster_id)
        try:
            self._load()
        except RuntimeError as exc:  # a data directory of another cluster, or of another broker id
            raise CoordinationError(str(exc)) from None
        await nursery.start(self.replicas.run)
        await nursery.start(self.topics.run)

    async def run_background(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Periodic work, as Kafka's scheduler does it: flushes (of rolled segments, and those due by
        ``flush.ms``), retention every ``log.retention.check.interval.ms``, removal of deleted
        segments once ``file.delete.delay.ms`` has passed, and checkpoints (at once after retention
        moved log start offsets). The group coordinator and the log cleaner (compaction, broker.log_cleaner)
        run here too."""
        with trio.CancelScope() as self._background:
            async with trio.open_nursery() as nursery:
                self._background_tasks = nursery
                if self.cluster is not None:
                    await self._run_cluster(nursery)
                    await nursery.start(self._cluster_quotas.run)
                if self.topics.get(OFFSETS_TOPIC) is not None:
                    self.group_coordinator()  # which replays the topic
                if self.topics.get(TRANSACTION_STATE_TOPIC) is not None:
                    self.transaction_coordinator()
                if self.topics.get(SHARE_STATE_TOPIC) is not None:
                    self.share_coordinator()
                task_status.started()
                nursery.start_soon(self._run_log_cleaner)
                next_checkpoint = trio.current_time() + CHECKPOINT_INTERVAL_S
                retention_interval_s = self.config.log_retention_check_interval_ms / 1000
                next_retention = trio.current_time() + min(retention_interval_s, RETENTION_FIRST_CHECK_S)
                while True:
                    await trio.sleep(min(HOUSEKEEPING_INTERVAL_S, retention_interval_s))
                    await self._run_due_flushes()
                    if trio.current_time() >= next_retention:
                        if await self._apply_retention():
                            next_checkpoint = trio.current_time()  # the new log start offsets, at once
                        next_retention = trio.current_time() + retention_interval_s
                    self.log_manager.delete_expired_files()
                    await RELEASED_BUFFERS.give_back()
                    if trio.current_time() >= next_checkpoint:
                        await self._write_checkpoints()
                        next_checkpoint = trio.current_time() + CHECKPOINT_INTERVAL_S

    async def _apply_retention(self) -> int:
        """Retention over every log (storage.retention): the segments it deletes are renamed
        ``.deleted`` and their files removed once ``file.delete.delay.ms`` has passed, so reads
        already handed out stay valid. Other tasks run between every few hundred logs. Returns how
        many segments were deleted."""
        deleted = 0
        now_ms = clock.now_ms()
        for index, storage_log in enumerate(list(self.log_manager.logs()), start=1):
            try:
                deleted += storage_log.apply_retention(now_ms=now_ms)
            except OSError as exc:
                log.error("retention of %s failed: %s", storage_log.dir, exc)
            if not index % RETENTION_BATCH:
                await trio.lowlevel.checkpoint()
        return deleted

    async def _run_log_cleaner(self) -> None:
        """The log cleaner, loaded a moment after the broker serves: its modules are not on the way to ready."""
        await trio.sleep(LOG_CLEANER_START_DELAY_S)
        from trafka.broker.log_cleaner import LogCleaner

        await LogCleaner(self.log_manager, self.config).run()

    async def _run_due_flushes(self) -> None:
        """fsync what rolls left behind and what ``flush.ms`` asks for, each in a worker thread:
        requests go on being served while the disk catches up (an fsync of a full 1 GB segment
        takes about as long as writing it out)."""
        for storage_log, flush in self.log_manager.due_flushes():
            try:
                await trio.to_thread.run_sync(flush.run)
            except OSError as exc:
                log.error("flush of %s failed, its recovery point stays: %s", storage_log.dir, exc)
            else:
                storage_log.complete_flush(flush)
            finally:
                flush.close()

    async def _write_checkpoints(self) -> None:
        """The offsets checkpoints, written in a worker thread: an fsync waits behind whatever the
        disk is writing (100-250 ms here while a rolled segment is flushed)."""
        checkpoints = self.log_manager.offsets_checkpoints()
        try:
            await trio.to_thread.run_sync(self.log_manager.write_checkpoints, checkpoints)
        except OSError as exc:
            log.error("cannot write the offsets checkpoints: %s", exc)

    def begin_shutdown(self) -> None:
        """Shutdown has begun: answer requests parked on group rebalances now, so connections drain."""
        if self._groups is not None:
            self._groups.stop()

    async def stop(self) -> None:
        if self._background is not None:
            self._background.cancel()
        if self._groups is not None:
            self._groups.stop()
        if self._shares is not None:
            self._shares.stop()
        if self.log_manager.loaded:
            self.log_manager.close()
            log.info("logs flushed and checkpointed")
        else:
            self.log_manager.close()

