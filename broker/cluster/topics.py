"""Topics of a cluster coordinated through ZooKeeper: the same lookups and changes as a single node's
(broker.topics), with the cluster's state as the source of truth.

A change (CreateTopics, CreatePartitions, DeleteTopics) is checked here as on a single node, then
written to ZooKeeper (broker.cluster.zookeeper), replicas placed as Kafka places them
(broker.cluster.controller); the request is answered once this broker has applied it. Every broker
applies what the cluster's state says, whoever changed it: one task takes the coordination's changes
in order and gives each topic its partitions (a log for those this broker holds a replica of, kept in
the local catalog for the next start) and each partition its leader, epoch and ISR (through the
replica manager, which leads or follows). Logs of a topic the cluster no longer has, or of a
partition this broker no longer holds, are deleted.
"""
from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence

import trio

from trafka.broker.cluster import ClusterChange, CoordinationError, TopicAssignment
from trafka.broker.cluster.controller import assign_replicas, imbalanced_partitions
from trafka.broker.cluster.zookeeper import TopicExistsError, ZooKeeperCluster
from trafka.broker.config import BrokerConfig
from trafka.broker.partition import Partition
from trafka.broker.replication.manager import ReplicaManager
from trafka.broker.topics import Topic, TopicManager, _partitions
from trafka.storage.config import LogConfig
from trafka.storage.manager import LogManager
from trafka.storage.topics import TopicCatalog, TopicRecord, new_topic_id
from trafka.wire.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)


class ClusterTopicManager(TopicManager):
    def __init__(self, config: BrokerConfig, default_log_config: LogConfig, log_manager: LogManager,
                 catalog: TopicCatalog, cluster: ZooKeeperCluster, replicas: ReplicaManager) -> None:
        super().__init__(config, default_log_config, log_manager, catalog)
        self.cluster = cluster
        self.replicas = replicas
        self._changes_in, self._changes_out = trio.open_memory_channel[ClusterChange](math.inf)
        self._applied = trio.Event()

    # -- the cluster --------------------------------------------------------------------------------

    def live_brokers(self, listener: str | None = None) -> dict[int, tuple[str, int, str | None]]:
        """The live brokers: id -> (host, port, rack), the address of their listener named ``listener`` (by
        default the inter-broker one); a broker without that listener is left out, as Kafka leaves it out
        of the answers to that listener's clients."""
        if listener is None:
            return {node_id: (r.host, r.port, r.rack) for node_id, r in sorted(self.cluster.brokers.items())}
        live = {}
        for node_id, registration in sorted(self.cluster.brokers.items()):
            address = registration.address(listener)
            if address is not None:
                live[node_id] = (*address, registration.rack)
        return live

    @property
    def controller_id(self) -> int:
        return self.cluster.controller_id if self.cluster.controller_id is not None else -1

    def load(self) -> None:
        """Recover the logs on disk; the topics come from the cluster (:meth:`run`)."""
        self.log_manager.load({
            record.name: LogConfig.from_properties(record.configs, self.default_log_config)
            for record in self.catalog.topics.values()
        })

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Apply the cluster's changes, in order, until cancelled; started once the cluster's state
        as it stands has been applied."""
        self.cluster.add_listener(self._changes_in.send_nowait)
        await self._apply(ClusterChange(
            brokers_changed=True, topics_created=frozenset(self.cluster.topics), topics_deleted=frozenset(),
            topics_changed=frozenset(), partitions_changed=frozenset()), first=True)
        task_status.started()
        async with trio.open_nursery() as nursery:
            if self.config.auto_leader_rebalance_enable:
                nursery.start_soon(self.rebalance_leaders)
            async for change in self._changes_out:
                await self._apply(change)

    async def _wait_until(self, condition: Callable[[], bool]) -> None:
        while not condition():
            await self._applied.wait()

    # -- applying the cluster's state ---------------------------------------------------------------

    async def _apply(self, change: ClusterChange, *, first: bool = False) -> None:
        for name in sorted(change.topics_deleted):
            await self._forget(name)
        for name in sorted(change.topics_created | change.topics_changed):
            assignment = self.cluster.topics.get(name)
            if assignment is not None:
                await self._materialize(assignment)
        if first:
            await self._delete_strays()
        for topic_name, index in sorted(change.partitions_changed):
            self._apply_state(topic_name, index)
        if change.brokers_changed:
            self.replicas.brokers_changed()
        applied, self._applied = self._applied, trio.Event()
        applied.set()

    async def _materialize(self, assignment: TopicAssignment) -> None:
        """Make ``assignment`` this broker's view of its topic: new partitions (with a log where this
        broker holds a replica), configs, and every partition's state."""
        name = assignment.name
        configs = dict(self.cluster.topic_configs.get(name, {}))
        topic = self._topics.get(name)
        if topic is not None and topic.topic_id != assignment.topic_id:
            await self._forget(name)  # deleted and created again while this broker looked away
            topic = None
        if topic is None:
            topic = Topic(name, assignment.topic_id, configs,
                          LogConfig.from_properties(configs, self.default_log_config))
        elif configs != topic.configs:
            topic.configs, topic.log_config = configs, LogConfig.from_properties(configs, self.default_log_config)
            for partition in topic.partitions:
                if partition.log is not None:
                    partition.log.update_config(topic.log_config)
        count = len(assignment.replicas)
        await self._move_replicas(topic, assignment)
        if len(topic.partitions) < count:
            await self._add_partitions(topic, assignment, count)
        self._add(topic)
        for index in range(count):
            self._apply_state(name, index)

    async def _move_replicas(self, topic: Topic, assignment: TopicAssignment) -> None:
        """Partitions reassigned to this broker get a log (and follow their leader once their state
        is applied); those reassigned away lose theirs."""
        node_id = self.config.node_id
        joining = [p for p in topic.partitions[:len(assignment.replicas)]
                   if p.log is None and node_id in assignment.replicas[p.index]]
        leaving = [p for p in topic.partitions[:len(assignment.replicas)]
                   if p.log is not None and node_id not in assignment.replicas[p.index]]
        if joining:
            specs = [(topic.name, p.index, topic.log_config, topic.topic_id) for p in joining]
            creation = self.log_manager.prepare_logs(specs)
            try:
                await self._write_files(creation.run)
            except OSError as exc:
                log.error("creating the logs of %s's reassigned partitions failed: %s", topic.name, exc)
                return
            for partition, storage_log in zip(joining, self.log_manager.add_created(creation)):
                partition.log = storage_log
                log.info("%s-%d: a replica here now (reassigned)", topic.name, partition.index)
        if leaving:
            for partition in leaving:
                self.replicas.stop_replica(partition)
                partition.log = None
            deletion = self.log_manager.remove_logs(topic.name, partitions=[p.index for p in leaving])
            try:
                await self._write_files(deletion.run)
            except OSError as exc:
                log.error("deleting the logs of %s's reassigned partitions failed: %s", topic.name, exc)
            for partition in leaving:
                log.info("%s-%d: no longer a replica here (reassigned); its log is deleted", topic.name,
                         partition.index)

    async def _add_partitions(self, topic: Topic, assignment: TopicAssignment, count: int) -> None:
        node_id = self.config.node_id
        first = len(topic.partitions)
        hosted = [index for index in range(first, count) if node_id in assignment.replicas[index]]
        record = self.catalog.get(topic.name)
        if record is None or record.topic_id != topic.topic_id:
            if record is not None:
                self.catalog.remove(topic.name, save=False)
            self.catalog.add(TopicRecord(topic.name, topic.topic_id, count, topic.configs), save=False)
        else:
            self.catalog.set_partitions(topic.name, count, save=False)
        specs = [(topic.name, index, topic.log_config, topic.topic_id) for index in hosted]
        creation = self.log_manager.prepare_logs(specs)
        try:
            await self._write_files(creation.run)
        except OSError as exc:
            log.error("creating the logs of %s failed: %s", topic.name, exc)
            return
        logs = dict(zip(hosted, self.log_manager.add_created(creation)))
        for index in range(first, count):
            topic.partitions.append(Partition(topic.name, topic.topic_id, index, logs.get(index), node_id,
                                              replicas=assignment.replicas[index]))
        if first == 0:
            log.info("topic %s (id %s): %s, %d here", topic.name, topic.topic_id, _partitions(count), len(hosted))

    def _apply_state(self, topic_name: str, index: int) -> None:
        partition = self.partition(topic_name, index)
        state = self.cluster.partition_states.get((topic_name, index))
        assignment = self.cluster.topics.get(topic_name)
        if partition is None or state is None or assignment is None or index >= len(assignment.replicas):
            return
        self.replicas.apply_state(partition, state, assignment.replicas[index])

    async def _forget(self, name: str) -> None:
        """The cluster deleted ``name``: stop its replicas, forget it, and delete its logs here."""
        topic = self._topics.pop(name, None)
        if topic is not None:
            self._by_id.pop(topic.topic_id, None)
            for partition in topic.partitions:
                self.replicas.stop_replica(partition)
        if name in self.catalog:
            self.catalog.remove(name, save=False)
        deletion = self.log_manager.remove_logs(name)
        checkpoints = self.log_manager.offsets_checkpoints()
        try:
            await self._write_files(deletion.run, lambda: self.log_manager.write_checkpoints(checkpoints))
        except OSError as exc:
            log.error("deleting topic %s: its files could not all be written or removed: %s", name, exc)
        if topic is not None:
            log.info("deleted topic %s", name)

    async def _delete_strays(self) -> None:
        """At start: logs of topics the cluster no longer has were deleted while this broker was away."""
        for name in sorted({storage_log.topic for storage_log in self.log_manager.logs()} - self._topics.keys()):
            log.warning("deleting the logs of %s, a topic the cluster no longer has", name)
            await self._forget(name)

    # -- changes ------------------------------------------------------------------------------------

    async def create(self, name: str, num_partitions: int = -1, replication_factor: int = -1,
                     configs: Mapping[str, str | None] | None = None, *, validate_only: bool = False,
                     replica_assignment: Sequence[Sequence[int]] | None = None) -> Topic:
        async with self._changes:
            if name in self.cluster.topics:
                raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
            num_partitions, replication_factor, topic_configs, log_config = self._check_new_topic(
                name, num_partitions, replication_factor, configs)
            if replica_assignment is not None:
                placement = dict(enumerate(replica_assignment))
            else:
                racks = {node_id: rack for node_id, (_, _, rack) in self.live_brokers().items()}
                placement = assign_replicas(racks, num_partitions, replication_factor)
            topic = Topic(name, new_topic_id(), topic_configs, log_config)
            if validate_only:
                return topic
            assignment = TopicAssignment(name, topic.topic_id,
                                         tuple(tuple(placement[index]) for index in range(num_partitions)))
            try:
                await self.cluster.create_topic(assignment, topic_configs)
            except TopicExistsError:
                raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.") from None
            await self._wait_until(lambda: name in self._topics
                                   and len(self._topics[name].partitions) == num_partitions)
            return self._topics[name]

    async def delete(self, name: str) -> Topic:
        async with self._changes:
            topic = self._topics.get(name)
            if topic is None:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 "This server does not host this topic-partition.")
            if not self.config.delete_topic_enable:
                raise KafkaError(ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
            await self.cluster.delete_topic(name)
            await self._wait_until(lambda: self._topics.get(name) is not topic)
            return topic

    async def create_partitions(self, name: str, count: int, *, validate_only: bool = False,
                                replica_assignment: Sequence[Sequence[int]] | None = None) -> Topic:
        async with self._changes:
            return await self._create_partitions(name, count, validate_only, replica_assignment)

    async def _create_partitions(self, name: str, count: int, validate_only: bool,
                                 replica_assignment: Sequence[Sequence[int]] | None = None) -> Topic:
        topic = self._check_growth(name, count)
        current = len(topic.partitions)
        replication_factor = len(topic.partitions[0].replicas)
        self._check_replication_factor(replication_factor)
        if replica_assignment is not None:
            placement = dict(enumerate(replica_assignment, start=current))
        else:
            racks = {node_id: rack for node_id, (_, _, rack) in self.live_brokers().items()}
            placement = assign_replicas(racks, count - current, replication_factor, first_partition=current)
        if validate_only:
            return topic
        await self.cluster.add_partitions(name, [tuple(placement[index]) for index in range(current, count)])
        await self._wait_until(lambda: len(topic.partitions) >= count or self._topics.get(name) is not topic)
        log.info("topic %s now has %s", name, _partitions(count))
        return topic

    async def elect_leaders(self, partitions: Sequence[tuple[str, int]] | None, *,
                            unclean: bool) -> dict[tuple[str, int], tuple[ErrorCode, str | None]]:
        """The controller elects (another broker answers NOT_CONTROLLER); this broker answers once it
        has applied the new states."""
        outcomes = await self.cluster.elect_leaders(partitions, unclean=unclean)
        elected = {key: self.cluster.partition_states[key].leader_epoch for key, (code, _) in outcomes.items()
                   if code == ErrorCode.NONE and key in self.cluster.partition_states}
        await self._wait_until(lambda: all(
            (p := self.partition(*key)) is None or p.leader_epoch >= epoch for key, epoch in elected.items()))
        return outcomes

    async def rebalance_leaders(self) -> None:
        """Kafka's ``auto.leader.rebalance.enable``: every ``leader.imbalance.check.interval.seconds``, the
        controller gives preferred replicas their leadership back where a broker's share of partitions
        it prefers but does not lead is above ``leader.imbalance.per.broker.percentage``."""
        config = self.config
        while True:
            await trio.sleep(config.leader_imbalance_check_interval_seconds)
            if not self.cluster.acting_as_controller:
                continue
            replicas = {(name, p): assignment.replicas[p] for name, assignment in self.cluster.topics.items()
                        for p in range(len(assignment.replicas))}
            keys = imbalanced_partitions(self.cluster.partition_states, replicas, set(self.cluster.brokers),
                                         config.leader_imbalance_per_broker_percentage)
            if keys:
                log.info("moving leadership of %d partitions back to their preferred replicas", len(keys))
                try:
                    await self.cluster.elect_leaders(keys, unclean=False)
                except (KafkaError, CoordinationError) as exc:
                    log.warning("leader rebalance: %s", exc)

    async def alter_partition_reassignments(
        self, changes: Mapping[tuple[str, int], Sequence[int] | None], *, timeout_ms: int
    ) -> dict[tuple[str, int], tuple[ErrorCode, str | None]]:
        """The controller starts (or cancels) the moves; they complete as the new replicas catch up."""
        return await self.cluster.reassign_partitions(changes)

    def list_partition_reassignments(
        self, partitions: Sequence[tuple[str, int]] | None
    ) -> dict[tuple[str, int], tuple[Sequence[int], Sequence[int], Sequence[int]]]:
        if not self.cluster.acting_as_controller:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, f"broker {self.config.node_id} is not the controller")
        wanted = None if partitions is None else set(partitions)
        ongoing = {}
        for name, assignment in self.cluster.topics.items():
            for index in sorted(set(assignment.adding) | set(assignment.removing)):
                if wanted is None or (name, index) in wanted:
                    ongoing[(name, index)] = (assignment.replicas[index], assignment.adding.get(index, ()),
                                              assignment.removing.get(index, ()))
        return ongoing

    async def alter_configs(self, name: str, configs: Mapping[str, str], *, validate_only: bool = False) -> Topic:
        """Replace the topic's config overrides in the cluster; every broker applies them (this one
        before answering)."""
        log_config = LogConfig.from_properties(configs, self.default_log_config)  # INVALID_CONFIG first
        topic = self._topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        if validate_only:
            return topic
        await self.cluster.set_topic_configs(name, configs)
        await self._wait_until(lambda: self._topics.get(name) is not topic or topic.log_config == log_config)
        log.info("topic %s configs are now %s", name, dict(configs))
        return topic
