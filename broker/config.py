"""Broker configuration, read from Kafka's own property names.

A ``server.properties`` written for Apache Kafka works as it is: ``listeners``, ``advertised.listeners``,
``log.dirs``, ``node.id``/``broker.id``, ``num.partitions``, ``log.segment.bytes`` and the rest keep
their meaning. Properties trafka does not act on are named in a warning, kept, and reported by
DescribeConfigs, so tools that read them back see what they wrote.

Defaults are a developer's: one broker on 127.0.0.1:9092, auto-created topics with one partition, and
a new consumer group formed once no further member has arrived for 100 ms
(``group.initial.rebalance.delay.ms``; Kafka waits 3 s).

The settings, their types, defaults and valid values are the catalog's (``trafka.storage.config_defs``):
each one held in a ``BrokerConfig`` attribute is parsed from it, and a property it does not list is one
trafka does not act on.
"""
from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trafka.storage.config_defs import (
    BROKER_CONFIG_DEFS,
    DEFAULT_DATA_DIR,
    DEFAULT_HOST,
    DEFAULT_PORT,
    ConfigDef,
    ConfigType,
)

log = logging.getLogger(__name__)


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


#: The security protocols of Kafka's listeners.
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
#: Those this broker serves.
SERVED_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_TLS_PROTOCOLS = ("SSL", "SASL_SSL")
_SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")


@dataclass(frozen=True)
class Listener:
    """One entry of ``listeners`` or ``advertised.listeners``: ``NAME://host:port``."""

    name: str
    host: str
    port: int


@dataclass(frozen=True)
class ListenerConfig:
    """A listener this broker serves: its name, its security protocol, the address it binds and the one
    it advertises (Metadata answers a client with the addresses of the listener it came in on)."""

    name: str
    security_protocol: str
    host: str
    port: int
    advertised_host: str | None = None
    advertised_port: int | None = None

    @property
    def advertised_address(self) -> tuple[str, int]:
        host = self.advertised_host or self.host
        if host in ("", "0.0.0.0", "::"):
            host = "127.0.0.1"
        return host, self.advertised_port if self.advertised_port is not None else self.port

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in _TLS_PROTOCOLS

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in _SASL_PROTOCOLS


DEFAULT_LISTENER = ListenerConfig("PLAINTEXT", "PLAINTEXT", DEFAULT_HOST, DEFAULT_PORT)


def parse_listeners(value: str, prop: str) -> list[Listener]:
    """Every listener of ``NAME://host:port[,NAME://host:port...]`` (a bare ``host:port`` is PLAINTEXT)."""
    listeners = []
    for entry in value.split(","):
        entry = entry.strip()
        if not entry:
            continue
        name, sep, address = entry.rpartition("://")
        if not sep:
            name, address = "PLAINTEXT", entry
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
    names = [listener.name for listener in listeners]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ConfigError(f"{prop}={value!r}: each listener needs a name of its own ({', '.join(repeated)} repeats)")
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


def served_listeners(props: Mapping[str, str]) -> tuple[ListenerConfig, ...]:
    """The listeners this broker serves, from ``listeners`` (one PLAINTEXT listener on the default address
    when it is not set), each with its security protocol (``listener.security.protocol.map``) and the
    address ``advertised.listeners`` gives it by name.

    Controller listeners (``controller.listener.names``) of a KRaft configuration are left out with a
    warning: this broker is its own controller. A listener without a security protocol, or with one this
    broker does not serve, stops the start: serving it otherwise would be a silent downgrade.
    """
    value = props.get("listeners")
    if not value:
        listeners = [Listener(DEFAULT_LISTENER.name, DEFAULT_LISTENER.host, DEFAULT_LISTENER.port)]
    else:
        listeners = parse_listeners(value, "listeners")
    protocols = _security_protocol_map(props)
    controller_names = {
        name.strip().upper() for name in props.get("controller.listener.names", "").split(",") if name.strip()
    }
    advertised = {}
    if props.get("advertised.listeners"):
        advertised = {a.name: a for a in parse_listeners(props["advertised.listeners"], "advertised.listeners")}
    served = []
    for listener in listeners:
        if listener.name in controller_names:
            log.warning("not serving controller listener %s://%s:%d: trafka needs no separate controller "
                        "listener", listener.name, listener.host, listener.port)
            continue
        protocol = protocols.get(listener.name)
        if protocol is None:
            raise ConfigError(
                f"listeners={value!r}: listener {listener.name} has no security protocol; name it after one "
                f"({', '.join(SECURITY_PROTOCOLS)}) or map it in listener.security.protocol.map "
                f"(e.g. {listener.name}:PLAINTEXT)"
            )
        if protocol not in SERVED_SECURITY_PROTOCOLS:
            raise ConfigError(
                f"listeners={value!r}: listener {listener.name} uses security protocol {protocol}, which trafka "
                f"does not serve; served: {', '.join(SERVED_SECURITY_PROTOCOLS)}"
            )
        address = advertised.get(listener.name)
        if address is None and advertised and len(listeners) == 1:
            address = next(iter(advertised.values()))  # one listener: the first advertised address, whatever its name
        served.append(ListenerConfig(listener.name, protocol, listener.host, listener.port,
                                     address.host if address else None, address.port if address else None))
    if not served:
        raise ConfigError(f"listeners={value!r}: no listener for clients")
    return tuple(served)


def inter_broker_listener(props: Mapping[str, str], listeners: tuple[ListenerConfig, ...], *,
                          clustered: bool) -> str:
    """The name of the listener other brokers reach this one on: ``inter.broker.listener.name``, or the
    listener whose security protocol is ``security.inter.broker.protocol`` (PLAINTEXT unless told), as in
    Kafka. A single node, which has no other broker to talk to, takes its first listener when none fits."""
    names = [listener.name for listener in listeners]
    named = props.get("inter.broker.listener.name", "").strip().upper()
    protocol = props.get("security.inter.broker.protocol", "").strip().upper()
    if named and protocol:
        raise ConfigError("inter.broker.listener.name and security.inter.broker.protocol are both set: set one")
    if named:
        if named not in names:
            raise ConfigError(f"inter.broker.listener.name={named}: not one of the listeners ({', '.join(names)})")
        return named
    protocol = protocol or "PLAINTEXT"
    if protocol not in SECURITY_PROTOCOLS:
        raise ConfigError(f"security.inter.broker.protocol={protocol}: expected one of {', '.join(SECURITY_PROTOCOLS)}")
    for listener in listeners:
        if listener.security_protocol == protocol and listener.name == protocol:
            return listener.name
    if not clustered:
        return listeners[0].name
    raise ConfigError(
        f"security.inter.broker.protocol={protocol}: no listener named {protocol}; name the listener other brokers "
        f"use with inter.broker.listener.name (one of {', '.join(names)})"
    )


def _int(props: Mapping[str, str], name: str, default: int) -> int:
    value = props.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value.strip())
    except ValueError:
        raise ConfigError(f"{name}={value!r}: expected an integer") from None


def read_setting(props: Mapping[str, str], definition: ConfigDef, default: Any) -> Any:
    """The setting ``definition`` names, from ``props`` by its type and checked as the catalog says; ``default``
    where it is not set (or set to nothing). Raises ConfigError naming the property."""
    name, raw = definition.name, props.get(definition.name)
    if raw is None or not raw.strip():
        return default
    if definition.type in (ConfigType.INT, ConfigType.LONG, ConfigType.SHORT):
        value: Any = _int(props, name, default)
        shown = str(value)
    elif definition.type == ConfigType.BOOLEAN:
        lowered = raw.strip().lower()
        if lowered not in ("true", "false"):
            raise ConfigError(f"{name}={raw!r}: expected true or false")
        return lowered == "true"
    else:
        value = raw.strip().lower() if definition.ignore_case else raw.strip()
        shown = repr(raw)
    if definition.choices is not None and value not in definition.choices:
        expected = definition.expected or f"expected one of {', '.join(map(str, definition.choices))}" + (
            " (case-insensitive)" if definition.ignore_case else "")
        raise ConfigError(f"{name}={shown}: {expected}")
    below = definition.minimum is not None and value < definition.minimum
    if below or (definition.maximum is not None and value > definition.maximum):
        if definition.expected is not None:
            raise ConfigError(f"{name}={shown}: {definition.expected}")
        if below:
            at_least = "must not be negative" if definition.minimum == 0 else f"must be at least {definition.minimum}"
            raise ConfigError(f"{name}={shown}: {at_least}")
        raise ConfigError(f"{name}={shown}: must be at most {definition.maximum}")
    return value


def broker_setting(props: Mapping[str, str], name: str, *, key: str | None = None) -> Any:
    """The broker setting ``name`` of the catalog, read from ``props`` by its type and checked against its bounds;
    its default where it is not set. ``key``: the property holding it, when that is not ``name`` itself (a
    listener's own ``listener.name.<l>.<name>``); the default is then the catalog's too. ConfigError names the
    property."""
    definition = BROKER_CONFIG_DEFS[name]
    if key is not None and key != name:
        definition = dataclasses.replace(definition, name=key)
    return read_setting(props, definition, definition.default)


def _default(name: str) -> Any:
    return BROKER_CONFIG_DEFS[name].default


#: The settings held in BrokerConfig attributes, in the order they are parsed.
_FIELD_SETTINGS = tuple(definition for definition in BROKER_CONFIG_DEFS.values() if definition.field is not None)


@dataclass
class BrokerConfig:
    """Everything the broker needs at start-up. Build one with :meth:`from_properties`.

    The attributes named after a setting hold its value (``num_partitions``: ``num.partitions``), with the
    catalog's default; the address, data directory and node id come from ``listeners``,
    ``advertised.listeners``, ``log.dirs`` and ``node.id``/``broker.id`` (or the command line).
    """

    node_id: int = 1  # when neither node.id nor broker.id is set
    #: The listeners served, the first one the address tools print; see also the ``host``, ``port`` and
    #: ``advertised_*`` properties, which read and set the first one.
    listeners: tuple[ListenerConfig, ...] = (DEFAULT_LISTENER,)
    #: The listener other brokers of the cluster reach this one on.
    inter_broker_listener_name: str = DEFAULT_LISTENER.name
    data_dir: Path = field(default_factory=lambda: Path(DEFAULT_DATA_DIR))
    cluster_id: str | None = _default("cluster.id")
    num_partitions: int = _default("num.partitions")
    default_replication_factor: int = _default("default.replication.factor")
    auto_create_topics_enable: bool = _default("auto.create.topics.enable")
    delete_topic_enable: bool = _default("delete.topic.enable")
    socket_request_max_bytes: int = _default("socket.request.max.bytes")
    fetch_max_bytes: int = _default("fetch.max.bytes")
    log_retention_check_interval_ms: int = _default("log.retention.check.interval.ms")
    metrics_port: int | None = _default("metrics.port")  # Prometheus metrics on this port (0: a free one)
    control_port: int | None = None  # the fault-rule control endpoint on 127.0.0.1:port (0: a free one)
    kafka_version: str | None = _default("kafka.version")  # the Kafka release whose API versions it serves
    group_initial_rebalance_delay_ms: int = _default("group.initial.rebalance.delay.ms")
    group_min_session_timeout_ms: int = _default("group.min.session.timeout.ms")
    group_max_session_timeout_ms: int = _default("group.max.session.timeout.ms")
    group_consumer_migration_policy: str = _default("group.consumer.migration.policy")
    group_max_size: int = _default("group.max.size")
    group_consumer_session_timeout_ms: int = _default("group.consumer.session.timeout.ms")
    group_consumer_heartbeat_interval_ms: int = _default("group.consumer.heartbeat.interval.ms")
    group_consumer_max_size: int = _default("group.consumer.max.size")
    offsets_retention_check_interval_ms: int = _default("offsets.retention.check.interval.ms")
    offsets_commit_timeout_ms: int = _default("offsets.commit.timeout.ms")
    offset_metadata_max_bytes: int = _default("offset.metadata.max.bytes")
    max_request_partition_size_limit: int = _default("max.request.partition.size.limit")
    offsets_topic_num_partitions: int = _default("offsets.topic.num.partitions")
    offsets_retention_minutes: int = _default("offsets.retention.minutes")
    offsets_topic_segment_bytes: int = _default("offsets.topic.segment.bytes")
    offsets_topic_compression_codec: int = _default("offsets.topic.compression.codec")
    offsets_load_buffer_size: int = _default("offsets.load.buffer.size")
    controller_max_records_per_batch: int = _default("controller.max.records.per.batch")
    # The cluster (broker.cluster): ZooKeeper's address, with a chroot path if any; None: a single node.
    zookeeper_connect: str | None = _default("zookeeper.connect")
    zookeeper_session_timeout_ms: int = _default("zookeeper.session.timeout.ms")
    zookeeper_connection_timeout_ms: int | None = _default("zookeeper.connection.timeout.ms")  # None: the session's
    broker_rack: str | None = _default("broker.rack")
    auto_leader_rebalance_enable: bool = _default("auto.leader.rebalance.enable")
    offsets_topic_replication_factor: int = _default("offsets.topic.replication.factor")  # 3 in a cluster
    leader_imbalance_check_interval_seconds: int = _default("leader.imbalance.check.interval.seconds")
    leader_imbalance_per_broker_percentage: int = _default("leader.imbalance.per.broker.percentage")
    # Replication (broker.replication).
    replica_lag_time_max_ms: int = _default("replica.lag.time.max.ms")
    replica_fetch_wait_max_ms: int = _default("replica.fetch.wait.max.ms")
    replica_fetch_min_bytes: int = _default("replica.fetch.min.bytes")
    replica_fetch_max_bytes: int = _default("replica.fetch.max.bytes")
    replica_fetch_response_max_bytes: int = _default("replica.fetch.response.max.bytes")
    replica_fetch_backoff_ms: int = _default("replica.fetch.backoff.ms")
    # The transaction coordinator (broker.txn).
    transaction_max_timeout_ms: int = _default("transaction.max.timeout.ms")
    transaction_state_log_num_partitions: int = _default("transaction.state.log.num.partitions")
    transaction_state_log_replication_factor: int = _default("transaction.state.log.replication.factor")  # 3 in a
    transaction_state_log_min_isr: int = _default("transaction.state.log.min.isr")  # cluster, and 2
    transaction_state_log_segment_bytes: int = _default("transaction.state.log.segment.bytes")
    transaction_state_log_load_buffer_size: int = _default("transaction.state.log.load.buffer.size")
    transactional_id_expiration_ms: int = _default("transactional.id.expiration.ms")
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = _default(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms")
    transaction_remove_expired_transaction_cleanup_interval_ms: int = _default(
        "transaction.remove.expired.transaction.cleanup.interval.ms")
    # KIP-890: a transactional batch that would start a transaction in a partition is appended only
    # once the producer's coordinator confirms the partition is in its ongoing transaction.
    transaction_partition_verification_enable: bool = _default("transaction.partition.verification.enable")
    shutdown_timeout_s: float = 10.0
    # Every property as given, for DescribeConfigs, for the topic-level defaults
    # (storage.config.LogConfig.from_broker_properties reads the log.* names) and for the settings other
    # parts of the broker read themselves (the consumer groups' assignors, the log cleaner's).
    properties: dict[str, str] = field(default_factory=dict)

    @property
    def advertised_address(self) -> tuple[str, int]:
        """Where clients of the first listener are told to connect."""
        return self.listeners[0].advertised_address

    @property
    def inter_broker_listener(self) -> ListenerConfig:
        return self.listener(self.inter_broker_listener_name)

    def listener(self, name: str) -> ListenerConfig:
        return next(listener for listener in self.listeners if listener.name == name)

    def _first_listener(self, **changes: Any) -> None:
        self.listeners = (dataclasses.replace(self.listeners[0], **changes), *self.listeners[1:])

    # The first listener's address, as the command line's --host, --port, --advertised-* set it.
    host = property(lambda self: self.listeners[0].host, lambda self, value: self._first_listener(host=value))
    port = property(lambda self: self.listeners[0].port, lambda self, value: self._first_listener(port=value))
    advertised_host = property(lambda self: self.listeners[0].advertised_host,
                               lambda self, value: self._first_listener(advertised_host=value))
    advertised_port = property(lambda self: self.listeners[0].advertised_port,
                               lambda self, value: self._first_listener(advertised_port=value))

    def serving_on(self, ports: Mapping[str, int], *, control_port: int | None = None) -> BrokerConfig:
        """A copy of this config with the ports the server bound, by listener name (a port 0 asks the
        system for one): the broker advertises the ports it serves on. This config is left as it is."""
        if control_port is None:
            control_port = self.control_port
        listeners = tuple(dataclasses.replace(listener, port=ports.get(listener.name, listener.port))
                          for listener in self.listeners)
        return dataclasses.replace(self, listeners=listeners, control_port=control_port)

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> BrokerConfig:
        props = dict(props)
        config = cls(properties=props)
        if "node.id" in props or "broker.id" in props:
            config.node_id = _int(props, "node.id", _int(props, "broker.id", 1))
        config.listeners = served_listeners(props)
        log_dirs = props.get("log.dirs") or props.get("log.dir")
        if log_dirs:
            dirs = [d.strip() for d in log_dirs.split(",") if d.strip()]
            if len(dirs) > 1:
                log.warning("log.dirs lists %d directories; trafka uses the first, %s", len(dirs), dirs[0])
            config.data_dir = Path(dirs[0])
        # One of a cluster (zookeeper.connect), the internal topics take a cluster's replication defaults.
        clustered = bool(props.get("zookeeper.connect", "").strip())
        for definition in _FIELD_SETTINGS:
            default = definition.cluster_default if clustered and definition.cluster_default is not None else (
                definition.default)
            setattr(config, definition.field, read_setting(props, definition, default))
        config.inter_broker_listener_name = inter_broker_listener(props, config.listeners, clustered=clustered)
        if config.zookeeper_connect is not None and not ("broker.id" in props or "node.id" in props):
            raise ConfigError("zookeeper.connect is set: each broker of a cluster needs its own broker.id")
        if config.kafka_version is not None and clustered and all(
                listener.name == config.inter_broker_listener_name for listener in config.listeners):
            raise ConfigError(
                f"kafka.version={config.kafka_version} in a cluster: the brokers talk to each other in trafka's own "
                "protocol, which that release's API versions cannot carry; give clients a listener of their own "
                "beside the inter-broker one (listeners, inter.broker.listener.name)")
        _check_roles(props)
        ignored = properties_not_acted_on(props)
        if ignored:
            log.warning("trafka does not act on these properties: %s", ", ".join(ignored))
        return config


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


def properties_not_acted_on(props: Mapping[str, str]) -> list[str]:
    """The names in ``props`` this broker neither reads nor serves (Kafka's or unknown), sorted: those the
    catalog of settings does not list, directly or under a listener's prefix (``listener.name.<l>.ssl.*``,
    ``listener.name.<l>.<mechanism>.sasl.jaas.config``)."""
    return sorted(name for name in props if not _known(name))


def _known(name: str) -> bool:
    if name in BROKER_CONFIG_DEFS:
        return True
    if not name.startswith(LISTENER_PREFIX):
        return False
    _listener, _, setting = name[len(LISTENER_PREFIX):].partition(".")
    if setting in BROKER_CONFIG_DEFS:
        return True
    _mechanism, _, sasl_setting = setting.partition(".")
    return sasl_setting.startswith("sasl.") and sasl_setting in BROKER_CONFIG_DEFS


#: Kafka's prefix of a setting given for one listener: ``listener.name.<listener, lower case>.<setting>``.
LISTENER_PREFIX = "listener.name."


def listener_settings(props: Mapping[str, str], listener: str, prefix: str) -> dict[str, str]:
    """The settings named ``prefix...`` for ``listener``: those given under its prefix
    (``listener.name.<listener>.<setting>``) over those given for every listener."""
    own = f"{LISTENER_PREFIX}{listener.lower()}."
    settings = {name: value for name, value in props.items() if name.startswith(prefix)}
    settings.update({name[len(own):]: value for name, value in props.items() if name.startswith(own + prefix)})
    return settings


def merge_overrides(props: dict[str, str], overrides: Iterable[str]) -> dict[str, str]:
    """Apply ``key=value`` strings (from ``--override``) on top of ``props``."""
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--override {item!r}: expected key=value")
        props[key.strip()] = value.strip()
    return props
