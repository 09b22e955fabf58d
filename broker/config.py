"""Broker configuration, read from Kafka's own property names.

A ``server.properties`` written for Apache Kafka works as it is: ``listeners``, ``advertised.listeners``,
``log.dirs``, ``node.id``/``broker.id``, ``num.partitions``, ``log.segment.bytes`` and the rest keep
their meaning. Properties trafka does not act on are named in a warning, kept, and reported by
DescribeConfigs, so tools that read them back see what they wrote.

Defaults are a developer's: one broker on 127.0.0.1:9092, auto-created topics with one partition, and
a new consumer group formed once no further member has arrived for 100 ms
(``group.initial.rebalance.delay.ms``; Kafka waits 3 s).
"""
from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from trafka.storage.config import BROKER_TIME_CONFIGS, BROKER_TO_TOPIC_CONFIG
from trafka.wire.compression import Compression

log = logging.getLogger(__name__)

DEFAULT_PORT = 9092
DEFAULT_DATA_DIR = "./trafka-data"
#: Values of group.consumer.migration.policy: which way non-empty consumer groups may change protocol.
CONSUMER_GROUP_MIGRATION_POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")

class ConfigError(ValueError):
    """A property that cannot be used, with the property named."""


def parse_properties(text: str) -> dict[str, str]:
    """Java ``.properties`` syntax as Kafka's files use it: ``key=value`` or ``key: value``, ``#``/``!``
    comments, backslash line continuations."""
    props: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1]
            continue
        for i, ch in enumerate(line):
            if ch in "=:" or ch.isspace():
                key, value = line[:i], line[i + 1 :].strip()
                if ch.isspace() and value[:1] in ("=", ":"):
                    value = value[1:].strip()
                break
        else:
            key, value = line, ""
        props[key.strip()] = value
    return props


#: The security protocols Kafka's listeners may use; trafka serves PLAINTEXT.
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SERVED_SECURITY_PROTOCOL = "PLAINTEXT"


@dataclass(frozen=True)
class Listener:
    """One entry of ``listeners`` or ``advertised.listeners``: ``NAME://host:port``."""

    name: str
    host: str
    port: int


def parse_listeners(value: str, prop: str) -> list[Listener]:
    """Every listener of ``NAME://host:port[,NAME://host:port...]`` (a bare ``host:port`` is PLAINTEXT)."""
    listeners = []
    for entry in value.split(","):
        entry = entry.strip()
        if not entry:
            continue
        name, sep, address = entry.rpartition("://")
        if not sep:
            name, address = SERVED_SECURITY_PROTOCOL, entry
        host, colon, port = address.rpartition(":")
        if not colon:
            raise ConfigError(f"{prop}={value!r}: expected NAME://host:port")
        try:
            number = int(port)
        except ValueError:
            raise ConfigError(f"{prop}={value!r}: port {port!r} is not a number") from None
        if not 0 <= number <= 65535:
            raise ConfigError(f"{prop}={value!r}: port {number} is outside 0-65535")
        listeners.append(Listener(name.strip().upper(), host.strip("[]"), number))
    if not listeners:
        raise ConfigError(f"{prop}={value!r}: expected NAME://host:port")
    return listeners


def _security_protocol_map(props: Mapping[str, str]) -> dict[str, str]:
    """``listener.security.protocol.map`` (``NAME:PROTOCOL,...``); each protocol's name maps to itself."""
    mapping = {protocol: protocol for protocol in SECURITY_PROTOCOLS}
    value = props.get("listener.security.protocol.map", "")
    for entry in value.split(","):
        if not entry.strip():
            continue
        name, colon, protocol = entry.partition(":")
        if not colon or protocol.strip().upper() not in SECURITY_PROTOCOLS:
            raise ConfigError(
                f"listener.security.protocol.map={value!r}: expected NAME:PROTOCOL entries, PROTOCOL one of "
                f"{', '.join(SECURITY_PROTOCOLS)}"
            )
        mapping[name.strip().upper()] = protocol.strip().upper()
    return mapping


def served_listener(props: Mapping[str, str]) -> Listener | None:
    """The one listener this broker serves, from ``listeners``; None when it is not set.

    A listener whose security protocol is not PLAINTEXT (SSL, SASL) stops the start: serving it as
    plain text would be a silent downgrade. Controller listeners (``controller.listener.names``) of
    a KRaft configuration are left out with a warning: this broker is its own controller. More than
    one client listener is refused too: none is dropped without a word.
    """
    value = props.get("listeners")
    if not value:
        return None
    listeners = parse_listeners(value, "listeners")
    protocols = _security_protocol_map(props)
    controller_names = {
        name.strip().upper() for name in props.get("controller.listener.names", "").split(",") if name.strip()
    }
    served = []
    for listener in listeners:
        if listener.name in controller_names:
            log.warning("not serving controller listener %s://%s:%d: trafka needs no separate controller "
                        "listener", listener.name, listener.host, listener.port)
            continue
        protocol = protocols.get(listener.name)
        if protocol is None:
            raise ConfigError(
                f"listeners={value!r}: listener {listener.name} has no security protocol; name it "
                f"PLAINTEXT or map it in listener.security.protocol.map (e.g. {listener.name}:PLAINTEXT)"
            )
        if protocol != SERVED_SECURITY_PROTOCOL:
            raise ConfigError(
                f"listeners={value!r}: listener {listener.name} uses security protocol {protocol}, which trafka "
                f"does not serve; only PLAINTEXT listeners are supported"
            )
        served.append(listener)
    if not served:
        raise ConfigError(f"listeners={value!r}: no PLAINTEXT listener for clients")
    if len(served) > 1:
        raise ConfigError(
            f"listeners={value!r}: trafka serves one listener, and this names {len(served)} "
            f"({', '.join(listener.name for listener in served)}); keep one"
        )
    return served[0]


def _int(props: Mapping[str, str], name: str, default: int) -> int:
    value = props.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value.strip())
    except ValueError:
        raise ConfigError(f"{name}={value!r}: expected an integer") from None


def _bool(props: Mapping[str, str], name: str, default: bool) -> bool:
    value = props.get(name)
    if value is None or value == "":
        return default
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise ConfigError(f"{name}={value!r}: expected true or false")
    return lowered == "true"


@dataclass
class BrokerConfig:
    """Everything the broker needs at start-up. Build one with :meth:`from_properties`."""

    node_id: int = 1
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    advertised_host: str | None = None
    advertised_port: int | None = None
    data_dir: Path = field(default_factory=lambda: Path(DEFAULT_DATA_DIR))
    cluster_id: str | None = None
    num_partitions: int = 1
    default_replication_factor: int = 1
    auto_create_topics_enable: bool = True
    delete_topic_enable: bool = True
    socket_request_max_bytes: int = 104_857_600
    fetch_max_bytes: int = 57_671_680  # the most record bytes one consumer Fetch response carries
    log_retention_check_interval_ms: int = 300_000  # how often retention looks for segments to delete
    metrics_port: int | None = None  # Prometheus metrics on this port (0: a free one); None: none
    control_port: int | None = None  # the fault-rule control endpoint on 127.0.0.1:port (0: a free one)
    group_initial_rebalance_delay_ms: int = 100
    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    group_consumer_migration_policy: str = "bidirectional"
    offsets_topic_num_partitions: int = 50
    offsets_retention_minutes: int = 10_080
    offsets_topic_segment_bytes: int = 104_857_600  # segment.bytes of __consumer_offsets, at its creation
    offsets_topic_compression_codec: int = 0  # the codec of the group coordinator's batches (0: none)
    offsets_load_buffer_size: int = 5_242_880  # bytes read at a time while a partition's groups load
    # The transaction coordinator (broker.txn), under Kafka's names and defaults.
    transaction_max_timeout_ms: int = 900_000
    transaction_state_log_num_partitions: int = 50
    transaction_state_log_replication_factor: int = 1  # Kafka's 3 in a cluster (zookeeper.connect)
    transaction_state_log_min_isr: int = 1  # Kafka's 2 in a cluster
    transaction_state_log_segment_bytes: int = 104_857_600
    transaction_state_log_load_buffer_size: int = 5_242_880
    transactional_id_expiration_ms: int = 604_800_000
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10_000
    transaction_remove_expired_transaction_cleanup_interval_ms: int = 3_600_000
    # KIP-890: a transactional batch that would start a transaction in a partition is appended only
    # once the producer's coordinator confirms the partition is in its ongoing transaction.
    transaction_partition_verification_enable: bool = True
    # The most partitions one CreateTopics or CreatePartitions request may create (Kafka's
    # controller.max.records.per.batch: the records of one request go into one metadata batch).
    controller_max_records_per_batch: int = 10_000
    shutdown_timeout_s: float = 10.0
    # The cluster (broker.cluster): ZooKeeper's address, with a chroot path if any; None: a single node.
    zookeeper_connect: str | None = None
    zookeeper_session_timeout_ms: int = 18_000
    zookeeper_connection_timeout_ms: int | None = None  # None: the session timeout, as in Kafka
    broker_rack: str | None = None
    offsets_topic_replication_factor: int = 1  # Kafka's 3 in a cluster (zookeeper.connect)
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_seconds: int = 300
    leader_imbalance_per_broker_percentage: int = 10
    # Replication (broker.replication), under Kafka's names and defaults.
    replica_lag_time_max_ms: int = 30_000
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_min_bytes: int = 1
    replica_fetch_max_bytes: int = 1_048_576
    replica_fetch_response_max_bytes: int = 10_485_760
    replica_fetch_backoff_ms: int = 1_000
    # Every property as given, for DescribeConfigs and for the topic-level defaults
    # (storage.config.LogConfig.from_broker_properties reads the log.* names).
    properties: dict[str, str] = field(default_factory=dict)

    @property
    def advertised_address(self) -> tuple[str, int]:
        host = self.advertised_host or self.host
        if host in ("", "0.0.0.0", "::"):
            host = "127.0.0.1"
        return host, self.advertised_port if self.advertised_port is not None else self.port

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> BrokerConfig:
        props = dict(props)
        config = cls(properties=props)
        if "node.id" in props or "broker.id" in props:
            config.node_id = _int(props, "node.id", _int(props, "broker.id", 1))
        listener = served_listener(props)
        if listener is not None:
            config.host, config.port = listener.host, listener.port
        if props.get("advertised.listeners"):
            advertised = parse_listeners(props["advertised.listeners"], "advertised.listeners")
            # The advertised address of the served listener, by name; else the first one.
            chosen = next((a for a in advertised if listener is not None and a.name == listener.name), advertised[0])
            config.advertised_host, config.advertised_port = chosen.host, chosen.port
        log_dirs = props.get("log.dirs") or props.get("log.dir")
        if log_dirs:
            dirs = [d.strip() for d in log_dirs.split(",") if d.strip()]
            if len(dirs) > 1:
                log.warning("log.dirs lists %d directories; trafka uses the first, %s", len(dirs), dirs[0])
            config.data_dir = Path(dirs[0])
        config.cluster_id = props.get("cluster.id") or None
        config.num_partitions = _int(props, "num.partitions", config.num_partitions)
        config.default_replication_factor = _int(
            props, "default.replication.factor", config.default_replication_factor
        )
        config.auto_create_topics_enable = _bool(
            props, "auto.create.topics.enable", config.auto_create_topics_enable
        )
        config.delete_topic_enable = _bool(props, "delete.topic.enable", config.delete_topic_enable)
        config.socket_request_max_bytes = _int(
            props, "socket.request.max.bytes", config.socket_request_max_bytes
        )
        config.fetch_max_bytes = _int(props, "fetch.max.bytes", config.fetch_max_bytes)
        if props.get("metrics.port", "").strip():
            config.metrics_port = _int(props, "metrics.port", 0)
            if not 0 <= config.metrics_port <= 65535:
                raise ConfigError(f"metrics.port={config.metrics_port}: a port is 0-65535")
        config.log_retention_check_interval_ms = _int(
            props, "log.retention.check.interval.ms", config.log_retention_check_interval_ms
        )
        if config.log_retention_check_interval_ms < 1:
            raise ConfigError(
                f"log.retention.check.interval.ms={config.log_retention_check_interval_ms}: must be at least 1"
            )
        config.group_initial_rebalance_delay_ms = _int(
            props, "group.initial.rebalance.delay.ms", config.group_initial_rebalance_delay_ms
        )
        config.group_min_session_timeout_ms = _int(
            props, "group.min.session.timeout.ms", config.group_min_session_timeout_ms
        )
        config.group_max_session_timeout_ms = _int(
            props, "group.max.session.timeout.ms", config.group_max_session_timeout_ms
        )
        policy = props.get("group.consumer.migration.policy")
        if policy is not None and policy.strip():
            config.group_consumer_migration_policy = policy.strip().lower()
            if config.group_consumer_migration_policy not in CONSUMER_GROUP_MIGRATION_POLICIES:
                raise ConfigError(
                    f"group.consumer.migration.policy={policy!r}: expected one of "
                    f"{', '.join(CONSUMER_GROUP_MIGRATION_POLICIES)} (case-insensitive)"
                )
        config.offsets_topic_num_partitions = _int(
            props, "offsets.topic.num.partitions", config.offsets_topic_num_partitions
        )
        config.offsets_retention_minutes = _int(
            props, "offsets.retention.minutes", config.offsets_retention_minutes
        )
        _read_positive(config, props, "offsets.topic.segment.bytes", "offsets.load.buffer.size")
        config.offsets_topic_compression_codec = _int(
            props, "offsets.topic.compression.codec", config.offsets_topic_compression_codec
        )
        if config.offsets_topic_compression_codec not in {codec.value for codec in Compression}:
            raise ConfigError(f"offsets.topic.compression.codec={config.offsets_topic_compression_codec}: expected a "
                              "codec id: 0 (none), 1 (gzip), 2 (snappy), 3 (lz4) or 4 (zstd)")
        config.controller_max_records_per_batch = _int(
            props, "controller.max.records.per.batch", config.controller_max_records_per_batch
        )
        _read_cluster_settings(config, props)
        if config.zookeeper_connect is not None:
            config.transaction_state_log_replication_factor = 3
            config.transaction_state_log_min_isr = 2
        _read_positive(config, props, "transaction.max.timeout.ms", "transaction.state.log.num.partitions",
                       "transaction.state.log.replication.factor", "transaction.state.log.min.isr",
                       "transaction.state.log.segment.bytes", "transaction.state.log.load.buffer.size",
                       "transactional.id.expiration.ms", "transaction.abort.timed.out.transaction.cleanup.interval.ms",
                       "transaction.remove.expired.transaction.cleanup.interval.ms")
        config.transaction_partition_verification_enable = _bool(
            props, "transaction.partition.verification.enable", config.transaction_partition_verification_enable
        )
        _check_roles(props)
        ignored = properties_not_acted_on(props)
        if ignored:
            log.warning("trafka does not act on these properties: %s", ", ".join(ignored))
        if config.num_partitions < 1:
            raise ConfigError(f"num.partitions={config.num_partitions}: must be at least 1")
        if config.fetch_max_bytes < 0:
            raise ConfigError(f"fetch.max.bytes={config.fetch_max_bytes}: must not be negative")
        if config.controller_max_records_per_batch < 1:
            raise ConfigError(
                f"controller.max.records.per.batch={config.controller_max_records_per_batch}: must be at least 1"
            )
        return config


def _read_cluster_settings(config: BrokerConfig, props: Mapping[str, str]) -> None:
    """``zookeeper.connect`` makes this broker one of a cluster coordinated through ZooKeeper; the
    replication settings apply to its replicas."""
    config.zookeeper_connect = props.get("zookeeper.connect", "").strip() or None
    if config.zookeeper_connect is not None and not ("broker.id" in props or "node.id" in props):
        raise ConfigError("zookeeper.connect is set: each broker of a cluster needs its own broker.id")
    config.zookeeper_session_timeout_ms = _int(props, "zookeeper.session.timeout.ms",
                                               config.zookeeper_session_timeout_ms)
    if props.get("zookeeper.connection.timeout.ms", "").strip():
        config.zookeeper_connection_timeout_ms = _int(props, "zookeeper.connection.timeout.ms", 0)
    config.broker_rack = props.get("broker.rack", "").strip() or None
    config.auto_leader_rebalance_enable = _bool(props, "auto.leader.rebalance.enable",
                                                config.auto_leader_rebalance_enable)
    if config.zookeeper_connect is not None:
        config.offsets_topic_replication_factor = 3
    _read_positive(config, props, "offsets.topic.replication.factor", "leader.imbalance.check.interval.seconds",
                   "leader.imbalance.per.broker.percentage", "replica.lag.time.max.ms", "replica.fetch.wait.max.ms",
                   "replica.fetch.min.bytes", "replica.fetch.max.bytes", "replica.fetch.response.max.bytes",
                   "replica.fetch.backoff.ms")


def _read_positive(config: BrokerConfig, props: Mapping[str, str], *names: str) -> None:
    """Integer settings that must be at least 1, each into the attribute of its name (dots as underscores)."""
    for name in names:
        attribute = name.replace(".", "_")
        value = _int(props, name, getattr(config, attribute))
        if value < 1:
            raise ConfigError(f"{name}={value}: must be at least 1")
        setattr(config, attribute, value)


def _check_roles(props: Mapping[str, str]) -> None:
    """A KRaft-style role split is not served: settings that would make this node a broker without a
    controller, or one of several controllers, stop the start rather than being ignored."""
    roles = {role.strip() for role in props.get("process.roles", "").split(",") if role.strip()}
    if roles and roles != {"broker", "controller"}:
        raise ConfigError(
            f"process.roles={props['process.roles']!r}: trafka runs as one node that is both broker and "
            "controller (process.roles=broker,controller, or leave it out)"
        )
    voters = [voter for voter in props.get("controller.quorum.voters", "").split(",") if voter.strip()]
    if len(voters) > 1:
        raise ConfigError(
            f"controller.quorum.voters names {len(voters)} controllers: trafka runs as one node, its own "
            "controller (name one voter, or leave it out)"
        )


#: Every property this broker reads, besides the topic defaults (``trafka.storage.config.BROKER_LOG_PROPERTIES``
#: and their other units): its own settings, and those the group coordinator and handlers read.
BROKER_PROPERTIES = frozenset({
    "node.id", "broker.id", "listeners", "advertised.listeners", "listener.security.protocol.map",
    "controller.listener.names", "log.dirs", "log.dir", "cluster.id", "num.partitions",
    "default.replication.factor", "auto.create.topics.enable", "delete.topic.enable", "socket.request.max.bytes",
    "fetch.max.bytes", "log.retention.check.interval.ms", "metrics.port", "controller.max.records.per.batch", "process.roles",
    "controller.quorum.voters", "max.request.partition.size.limit",
    # the transaction coordinator (broker.txn)
    "transaction.max.timeout.ms", "transaction.state.log.num.partitions", "transaction.state.log.replication.factor",
    "transaction.state.log.min.isr", "transaction.state.log.segment.bytes", "transaction.state.log.load.buffer.size",
    "transactional.id.expiration.ms", "transaction.abort.timed.out.transaction.cleanup.interval.ms",
    "transaction.remove.expired.transaction.cleanup.interval.ms",
    "transaction.partition.verification.enable",
    # groups and their offsets (broker.groups)
    "group.initial.rebalance.delay.ms", "group.min.session.timeout.ms", "group.max.session.timeout.ms",
    "group.max.size", "group.consumer.migration.policy", "group.consumer.session.timeout.ms",
    "group.consumer.heartbeat.interval.ms", "group.consumer.max.size", "group.consumer.assignors",
    "offsets.topic.num.partitions", "offsets.retention.minutes", "offsets.retention.check.interval.ms",
    "offset.metadata.max.bytes", "offsets.commit.timeout.ms", "offsets.topic.segment.bytes",
    "offsets.topic.compression.codec", "offsets.load.buffer.size",
    # the cluster and replication (broker.cluster, broker.replication)
    "zookeeper.connect", "zookeeper.session.timeout.ms", "zookeeper.connection.timeout.ms", "broker.rack",
    "offsets.topic.replication.factor", "auto.leader.rebalance.enable", "leader.imbalance.check.interval.seconds",
    "leader.imbalance.per.broker.percentage", "replica.lag.time.max.ms",
    "replica.fetch.wait.max.ms", "replica.fetch.min.bytes", "replica.fetch.max.bytes",
    "replica.fetch.response.max.bytes", "replica.fetch.backoff.ms",
    # the log cleaner (broker.log_cleaner)
    "log.cleaner.enable", "log.cleaner.threads", "log.cleaner.backoff.ms", "log.cleaner.dedupe.buffer.size",
    "log.cleaner.io.buffer.size", "log.cleaner.io.buffer.load.factor", "log.cleaner.io.max.bytes.per.second",
})


def properties_not_acted_on(props: Mapping[str, str]) -> list[str]:
    """The names in ``props`` this broker neither reads nor serves (Kafka's or unknown), sorted."""
    log_properties = set(BROKER_TO_TOPIC_CONFIG) | {
        name for alternatives in BROKER_TIME_CONFIGS.values() for name, _ in alternatives
    }
    return sorted(name for name in props if name not in BROKER_PROPERTIES and name not in log_properties)


def merge_overrides(props: dict[str, str], overrides: Iterable[str]) -> dict[str, str]:
    """Apply ``key=value`` strings (from ``--override``) on top of ``props``."""
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--override {item!r}: expected key=value")
        props[key.strip()] = value.strip()
    return props
