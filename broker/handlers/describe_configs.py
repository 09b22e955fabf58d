"""DescribeConfigs (key 32), versions 1-4.

Describes topic and broker config resources, as Apache Kafka reports them:

* A topic lists every topic config with the topic's effective value (its own overrides over the
  broker's defaults). The source is DYNAMIC_TOPIC_CONFIG for a topic override; otherwise it comes
  from the broker synonyms (``retention.ms`` -> ``log.retention.ms``, ``log.retention.minutes``,
  ``log.retention.hours``): STATIC_BROKER_CONFIG where ``server.properties`` sets the synonym,
  DEFAULT_CONFIG otherwise. Like Kafka, only the first synonym counts for the source: a broker that
  sets ``log.retention.hours`` reports ``retention.ms`` as DEFAULT_CONFIG with no synonyms. Topic
  configs are never read-only or sensitive. An unknown topic gets UNKNOWN_TOPIC_OR_PARTITION, an
  illegal name INVALID_TOPIC_EXCEPTION.
* A broker resource named by this node's id lists the broker's configs: the properties it was given
  and the settings it acts on. The topic defaults (``log.*``, ``message.max.bytes`` ...) may be changed
  at run time (AlterConfigs): their source is then DYNAMIC_BROKER_CONFIG (set for this broker) or
  DYNAMIC_DEFAULT_BROKER_CONFIG (set for the cluster); every other config is read-only. Secrets
  (passwords, keys, JAAS configs) are sensitive and reported without a value. An empty name is the
  cluster-wide dynamic defaults, listed as far as they are set; any other name is INVALID_REQUEST.
  A topic's inherited configs take their source from the same layers. The log cleaner's own settings
  (``log.cleaner.enable``, ``.threads``, ``.backoff.ms``, ``.dedupe.buffer.size``, ``.io.buffer.size``,
  ``.io.buffer.load.factor``, ``.io.max.bytes.per.second``) are listed with their built-in defaults
  (DEFAULT_CONFIG) unless ``server.properties`` sets them (STATIC_BROKER_CONFIG); the cleaner reads them
  at start-up, so unlike Kafka's, which takes all but ``log.cleaner.enable`` at run time, they are
  read-only and a dynamic change is refused. DOUBLE values are written as Java writes them (``1.0E-5``).
* Group, client-metrics and broker-logger resources are not supported: INVALID_REQUEST.

``configuration_keys`` (null or empty for all) filters the configs by name. Synonyms are listed
when ``include_synonyms`` is set, first the one in effect.

Version notes: v1 added config sources and synonyms; v3 added config types and documentation
(only when ``include_documentation`` is set); v4 is the first flexible version.

The config model (resource types, config sources and types, topic config synonyms) is shared with
CreateTopics, AlterConfigs and IncrementalAlterConfigs.
"""
from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from enum import IntEnum
from typing import TYPE_CHECKING

from trafka.broker.config import BrokerConfig
from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.log_cleaner import DEFAULT_BACKOFF_MS
from trafka.broker.topics import validate_topic_name
from trafka.storage.cleaner import DEFAULT_DEDUPE_BUFFER_SIZE, DEFAULT_IO_BUFFER_LOAD_FACTOR, DEFAULT_IO_BUFFER_SIZE
from trafka.storage.config import BROKER_LOG_PROPERTIES, BROKER_TIME_CONFIGS, BROKER_TO_TOPIC_CONFIG, LogConfig
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.messages import DescribeConfigsRequest, DescribeConfigsResponse
from trafka.wire.protocol import ApiKey

if TYPE_CHECKING:
    from trafka.broker.broker import Broker

Result = DescribeConfigsResponse.DescribeConfigsResult
ConfigResult = DescribeConfigsResponse.DescribeConfigsResourceResult
SynonymResult = DescribeConfigsResponse.DescribeConfigsSynonym


class ResourceType(IntEnum):
    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class ConfigSource(IntEnum):
    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


class ConfigType(IntEnum):
    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


def resource_type_name(resource_type: int) -> str:
    try:
        return ResourceType(resource_type).name
    except ValueError:
        return str(resource_type)


# -- topic configs ---------------------------------------------------------------------------------

_NO_EFFECT = "Accepted for compatibility with Apache Kafka; it has no effect on this broker."

# Every topic config this broker knows: its type and what it does.
TOPIC_CONFIG_INFO: dict[str, tuple[ConfigType, str]] = {
    "segment.bytes": (ConfigType.INT, "Size in bytes at which the active segment is closed and a new one started."),
    "segment.ms": (ConfigType.LONG, "Age in milliseconds at which the active segment is closed even if not full, "
                   "so that retention and compaction can act on it."),
    "segment.jitter.ms": (ConfigType.LONG, "Largest random amount of time taken off segment.ms, so that the "
                          "segments of many partitions do not all roll at the same moment."),
    "segment.index.bytes": (ConfigType.INT, "Size in bytes of the offset and time indexes of each segment."),
    "index.interval.bytes": (ConfigType.INT, "Bytes of record batches between two entries of the sparse "
                             "offset index."),
    "flush.messages": (ConfigType.LONG, "Number of messages appended after which the log is fsynced."),
    "flush.ms": (ConfigType.LONG, "Milliseconds after which appended data is fsynced."),
    "max.message.bytes": (ConfigType.INT, "Largest record batch, in bytes, that the topic accepts."),
    "message.timestamp.type": (ConfigType.STRING, "CreateTime keeps the producer's timestamps; LogAppendTime "
                               "stamps each batch with the broker's clock."),
    "message.timestamp.before.max.ms": (ConfigType.LONG, "How far in the past of the broker's clock a "
                                        "CreateTime timestamp may be."),
    "message.timestamp.after.max.ms": (ConfigType.LONG, "How far in the future of the broker's clock a "
                                       "CreateTime timestamp may be."),
    "cleanup.policy": (ConfigType.LIST, "delete removes whole segments once retention allows; compact keeps "
                       "the latest record of each key; both may be given."),
    "retention.ms": (ConfigType.LONG, "How long a segment is kept under the delete policy; -1 keeps it forever."),
    "retention.bytes": (ConfigType.LONG, "Size a partition may reach before its oldest segments are deleted; "
                        "-1 means no limit."),
    "file.delete.delay.ms": (ConfigType.LONG, "Time between a segment's deletion and the removal of its files."),
    "delete.retention.ms": (ConfigType.LONG, "How long tombstones stay in a compacted log."),
    "min.compaction.lag.ms": (ConfigType.LONG, "Age a record must reach before compaction may remove it."),
    "max.compaction.lag.ms": (ConfigType.LONG, "Longest time a record may stay uncompacted."),
    "min.cleanable.dirty.ratio": (ConfigType.DOUBLE, "Share of not-yet-compacted bytes at which a log becomes "
                                  "eligible for compaction."),
    "min.insync.replicas": (ConfigType.INT, "Fewest in-sync replicas that must hold a record before an acks=all "
                            "produce succeeds."),
    "unclean.leader.election.enable": (ConfigType.BOOLEAN, "Whether a replica outside the ISR may become leader, "
                                       "at the risk of losing records."),
    "compression.type": (ConfigType.STRING, "Codec that batches are stored with; producer keeps the producer's "
                         "own codec."),
    "preallocate": (ConfigType.BOOLEAN, "Whether segment files are preallocated on disk when created."),
    "compression.gzip.level": (ConfigType.INT, _NO_EFFECT),
    "compression.lz4.level": (ConfigType.INT, _NO_EFFECT),
    "compression.zstd.level": (ConfigType.INT, _NO_EFFECT),
    "message.format.version": (ConfigType.STRING, _NO_EFFECT),
    "message.timestamp.difference.max.ms": (ConfigType.LONG, _NO_EFFECT),
    "message.downconversion.enable": (ConfigType.BOOLEAN, _NO_EFFECT),
    "leader.replication.throttled.replicas": (ConfigType.LIST, _NO_EFFECT),
    "follower.replication.throttled.replicas": (ConfigType.LIST, _NO_EFFECT),
    "remote.storage.enable": (ConfigType.BOOLEAN, _NO_EFFECT),
    "local.retention.ms": (ConfigType.LONG, _NO_EFFECT),
    "local.retention.bytes": (ConfigType.LONG, _NO_EFFECT),
    "remote.log.copy.disable": (ConfigType.BOOLEAN, _NO_EFFECT),
    "remote.log.delete.on.disable": (ConfigType.BOOLEAN, _NO_EFFECT),
}

# Topic-level defaults: what a topic has when neither it nor the broker says otherwise.
TOPIC_CONFIG_DEFAULTS: dict[str, str] = LogConfig().to_properties()


def _topic_config_synonyms() -> dict[str, tuple[tuple[str, str | None], ...]]:
    """Each topic config's broker synonyms, in order of precedence, with the broker's built-in default
    of each (``log.retention.hours`` has one, ``log.retention.ms`` has none)."""
    synonyms: dict[str, tuple[tuple[str, str | None], ...]] = {}
    for broker_name, topic_name in BROKER_TO_TOPIC_CONFIG.items():
        synonyms[topic_name] = ((broker_name, TOPIC_CONFIG_DEFAULTS[topic_name]),)
    for topic_name, alternatives in BROKER_TIME_CONFIGS.items():
        # The broker's default sits on the coarsest unit, the last alternative.
        default_ms = int(TOPIC_CONFIG_DEFAULTS[topic_name])
        last = len(alternatives) - 1
        synonyms[topic_name] = tuple(
            (broker_name, str(default_ms // unit_ms) if i == last else None)
            for i, (broker_name, unit_ms) in enumerate(alternatives)
        )
    return synonyms


TOPIC_CONFIG_SYNONYMS = _topic_config_synonyms()


def topic_config_values(configs: Mapping[str, str], log_config: LogConfig) -> dict[str, str]:
    """A topic's configs by name: every config of its effective LogConfig, plus the overrides of
    configs that are accepted but have no effect here."""
    values = log_config.to_properties()
    for name, value in configs.items():
        values.setdefault(name, value)
    return values


#: The broker's properties by where they were set, in order of precedence (see ``broker_layers``).
Layers = Sequence[tuple[Mapping[str, str], ConfigSource]]


def broker_layers(broker: Broker) -> Layers:
    """The broker's properties by where they were set, first the ones that win: its own dynamic
    configs, the cluster-wide dynamic defaults, then those it was started with."""
    return (
        (broker.dynamic_configs.broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
        (broker.dynamic_configs.defaults, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        (broker.config.properties, ConfigSource.STATIC_BROKER_CONFIG),
    )


def creation_config_source(name: str, configs: Mapping[str, str], layers: Layers) -> ConfigSource:
    """Where a new topic's config comes from, as CreateTopics (v5+) reports it: the topic's own
    override, else the first layer that sets a broker synonym, else the built-in default."""
    if name in configs:
        return ConfigSource.DYNAMIC_TOPIC_CONFIG
    synonyms = TOPIC_CONFIG_SYNONYMS.get(name, ())
    for properties, source in layers:
        if any(broker_name in properties for broker_name, _ in synonyms):
            return source
    return ConfigSource.DEFAULT_CONFIG


@dataclass(frozen=True, slots=True)
class Synonym:
    name: str
    value: str | None
    source: ConfigSource


def _broker_synonym_chain(
    synonyms: tuple[tuple[str, str | None], ...], layers: Layers, sensitive: bool = False
) -> list[Synonym]:
    """The broker-level synonyms of a config in precedence order: those set in each layer (dynamic,
    then ``server.properties``), then those with a built-in default; entries before the first one
    named like the config itself are dropped, as Kafka does."""
    if not synonyms:
        return []
    chain = [
        Synonym(name, None if sensitive else properties[name], source)
        for properties, source in layers
        for name, _ in synonyms
        if name in properties
    ]
    chain += [
        Synonym(name, None if sensitive else default, ConfigSource.DEFAULT_CONFIG)
        for name, default in synonyms
        if default is not None
    ]
    primary = synonyms[0][0]
    while chain and chain[0].name != primary:
        chain.pop(0)
    return chain


def _entry(
    name: str,
    value: str | None,
    synonyms: list[Synonym],
    *,
    read_only: bool,
    sensitive: bool,
    config_type: ConfigType,
    documentation: str | None,
    include_synonyms: bool,
    include_documentation: bool,
) -> ConfigResult:
    if config_type == ConfigType.DOUBLE and value is not None:
        value = _typed(value, config_type)  # Java's form: 1e-05 is 1.0E-5
    return ConfigResult(
        name=name,
        value=None if sensitive else value,
        read_only=read_only,
        config_source=synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG,
        is_sensitive=sensitive,
        synonyms=[SynonymResult(name=s.name, value=s.value, source=s.source) for s in synonyms]
        if include_synonyms
        else [],
        config_type=config_type,
        documentation=documentation if include_documentation else None,
    )


def describe_topic(
    broker: Broker, name: str, *, include_synonyms: bool = False, include_documentation: bool = False
) -> list[ConfigResult]:
    validate_topic_name(name)
    topic = broker.topics.get(name)
    if topic is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    layers = broker_layers(broker)
    results = []
    for config_name, value in sorted(topic_config_values(topic.configs, topic.log_config).items()):
        chain = _broker_synonym_chain(TOPIC_CONFIG_SYNONYMS.get(config_name, ()), layers)
        if config_name in topic.configs:
            chain.insert(0, Synonym(config_name, value, ConfigSource.DYNAMIC_TOPIC_CONFIG))
        config_type, documentation = TOPIC_CONFIG_INFO.get(config_name, (ConfigType.UNKNOWN, None))
        results.append(
            _entry(
                config_name,
                value,
                chain,
                read_only=False,
                sensitive=False,
                config_type=config_type,
                documentation=documentation,
                include_synonyms=include_synonyms,
                include_documentation=include_documentation,
            )
        )
    return results


# -- broker configs --------------------------------------------------------------------------------

# Broker settings held in BrokerConfig fields: Kafka name -> (field, type, what it does).
_BROKER_FIELDS: dict[str, tuple[str, ConfigType, str]] = {
    "num.partitions": ("num_partitions", ConfigType.INT, "Partitions of a topic created without a count."),
    "default.replication.factor": ("default_replication_factor", ConfigType.INT,
                                   "Replication factor of a topic created without one."),
    "auto.create.topics.enable": ("auto_create_topics_enable", ConfigType.BOOLEAN,
                                  "Whether a Metadata request for an unknown topic creates it."),
    "delete.topic.enable": ("delete_topic_enable", ConfigType.BOOLEAN, "Whether DeleteTopics may delete topics."),
    "socket.request.max.bytes": ("socket_request_max_bytes", ConfigType.INT, "Largest request frame accepted."),
    "fetch.max.bytes": ("fetch_max_bytes", ConfigType.INT, "Most record bytes one Fetch response carries."),
    "log.retention.check.interval.ms": ("log_retention_check_interval_ms", ConfigType.LONG,
                                        "How often retention looks for segments to delete."),
    "group.initial.rebalance.delay.ms": ("group_initial_rebalance_delay_ms", ConfigType.INT,
                                         "How long a new consumer group waits for another member to arrive before "
                                         "its first rebalance."),
    "group.min.session.timeout.ms": ("group_min_session_timeout_ms", ConfigType.INT,
                                     "Shortest session timeout a group member may ask for."),
    "group.max.session.timeout.ms": ("group_max_session_timeout_ms", ConfigType.INT,
                                     "Longest session timeout a group member may ask for."),
    "group.consumer.migration.policy": ("group_consumer_migration_policy", ConfigType.STRING,
                                        "Whether non-empty groups may change protocol online: bidirectional, "
                                        "upgrade (classic to consumer), downgrade (consumer to classic) or "
                                        "disabled."),
    "offsets.topic.num.partitions": ("offsets_topic_num_partitions", ConfigType.INT,
                                     "Partitions of the __consumer_offsets topic."),
    "offsets.retention.minutes": ("offsets_retention_minutes", ConfigType.INT,
                                  "How long committed offsets of an empty group are kept."),
    "offsets.topic.segment.bytes": ("offsets_topic_segment_bytes", ConfigType.INT,
                                    "segment.bytes of the __consumer_offsets topic, at its creation."),
    "offsets.topic.compression.codec": ("offsets_topic_compression_codec", ConfigType.INT,
                                        "Codec of the group coordinator's writes: 0 none, 1 gzip, 2 snappy, 3 lz4, "
                                        "4 zstd."),
    "offsets.load.buffer.size": ("offsets_load_buffer_size", ConfigType.INT,
                                 "Bytes read at a time while the groups of a __consumer_offsets partition load."),
    "transaction.max.timeout.ms": ("transaction_max_timeout_ms", ConfigType.INT,
                                   "Longest transaction timeout a producer may ask for."),
    "transaction.state.log.num.partitions": ("transaction_state_log_num_partitions", ConfigType.INT,
                                             "Partitions of the __transaction_state topic."),
    "transaction.state.log.replication.factor": ("transaction_state_log_replication_factor", ConfigType.SHORT,
                                                 "Replication factor of the __transaction_state topic."),
    "transaction.state.log.min.isr": ("transaction_state_log_min_isr", ConfigType.INT,
                                      "min.insync.replicas of the __transaction_state topic."),
    "transaction.state.log.segment.bytes": ("transaction_state_log_segment_bytes", ConfigType.INT,
                                            "segment.bytes of the __transaction_state topic."),
    "transaction.state.log.load.buffer.size": ("transaction_state_log_load_buffer_size", ConfigType.INT,
                                               "Bytes read at a time while a __transaction_state partition loads."),
    "transactional.id.expiration.ms": ("transactional_id_expiration_ms", ConfigType.INT,
                                       "How long a transactional id stays after its last transaction ended."),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": (
        "transaction_abort_timed_out_transaction_cleanup_interval_ms", ConfigType.INT,
        "How often transactions open past their timeout are looked for and aborted."),
    "transaction.remove.expired.transaction.cleanup.interval.ms": (
        "transaction_remove_expired_transaction_cleanup_interval_ms", ConfigType.INT,
        "How often expired transactional ids are looked for and removed."),
    "transaction.partition.verification.enable": (
        "transaction_partition_verification_enable", ConfigType.BOOLEAN,
        "Whether a transactional batch that would start a transaction in a partition is first verified "
        "with the transaction coordinator."),
    "controller.max.records.per.batch": ("controller_max_records_per_batch", ConfigType.INT,
                                         "Most partitions one CreateTopics or CreatePartitions request may create."),
}

# Where this broker is and who it is: Kafka name -> (type, what it says).
_BROKER_IDENTITY_CONFIGS: dict[str, tuple[ConfigType, str]] = {
    "node.id": (ConfigType.INT, "Id of this broker in the cluster."),
    "broker.id": (ConfigType.INT, "Id of this broker in the cluster (older name of node.id)."),
    "listeners": (ConfigType.STRING, "Address the broker listens on."),
    "advertised.listeners": (ConfigType.STRING, "Address clients are told to connect to."),
    "log.dirs": (ConfigType.STRING, "Directory holding the partitions' logs."),
}



def java_double(value: float) -> str:
    """A double as Java's ``Double.toString`` writes it, as Kafka reports DOUBLE configs: ``0.9``,
    ``1.0``, ``1.0E-5``, ``1.7976931348623157E308``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(float(value))  # the same shortest digits, never in exponent form in this range
    sign, digits, exponent = Decimal(repr(float(value))).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    power = len(digits) + int(exponent) - 1
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{power}"


# The log cleaner's own settings (broker.log_cleaner reads them at start-up): Kafka name -> (built-in
# default, type, what it does). Kafka changes all but log.cleaner.enable at run time; trafka's cleaner
# does not, so they are read-only here and a dynamic change is refused rather than ignored.
_CLEANER_CONFIGS: dict[str, tuple[str, ConfigType, str]] = {
    "log.cleaner.enable": ("true", ConfigType.BOOLEAN,
                           "Whether the log cleaner runs; without it compacted topics are not compacted."),
    "log.cleaner.threads": ("1", ConfigType.INT, "Threads that compact logs, each cleaning one log at a time."),
    "log.cleaner.backoff.ms": (str(DEFAULT_BACKOFF_MS), ConfigType.LONG,
                               "How long the cleaner sleeps when no log needs cleaning."),
    "log.cleaner.dedupe.buffer.size": (str(DEFAULT_DEDUPE_BUFFER_SIZE), ConfigType.LONG,
                                       "Memory of the offset maps (key hash -> latest offset), shared by the "
                                       "cleaner threads; bounds how much of a dirty log one cleaning covers."),
    "log.cleaner.io.buffer.size": (str(DEFAULT_IO_BUFFER_SIZE), ConfigType.INT,
                                   "Size of the cleaner's read and write buffers."),
    "log.cleaner.io.buffer.load.factor": (java_double(DEFAULT_IO_BUFFER_LOAD_FACTOR), ConfigType.DOUBLE,
                                          "How full the offset map may get."),
    "log.cleaner.io.max.bytes.per.second": (java_double(1.7976931348623157e308), ConfigType.DOUBLE,
                                            "Bytes per second the cleaner threads may read and write together."),
}

#: Broker settings this broker knows and reads at start-up only: a dynamic change is refused.
STATIC_BROKER_CONFIGS = (
    frozenset(_BROKER_FIELDS) | frozenset(_BROKER_IDENTITY_CONFIGS) | frozenset(_CLEANER_CONFIGS)
    | frozenset(name for alternatives in BROKER_TIME_CONFIGS.values() for name, _ in alternatives[1:])
)

# Names of secrets: their values are never sent.
_SENSITIVE_NAME = re.compile(r"password|secret|jaas|ssl\.keystore\.key$|certificate|credential", re.IGNORECASE)


def _format(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _typed(value: str, config_type: ConfigType) -> str:
    """A property's value as Kafka reports it once parsed: ``1`` of a DOUBLE is ``1.0``."""
    try:
        if config_type == ConfigType.DOUBLE:
            return java_double(float(value))
        if config_type in (ConfigType.INT, ConfigType.LONG, ConfigType.SHORT):
            return str(int(value.strip()))
        if config_type == ConfigType.BOOLEAN:
            return value.strip().lower()
    except ValueError:
        pass
    return value


@dataclass(frozen=True, slots=True)
class _BrokerConfigEntry:
    value: str | None
    synonyms: tuple[tuple[str, str | None], ...]  # (name, built-in default), in order of precedence
    config_type: ConfigType
    documentation: str | None


def _broker_configs(broker: Broker) -> dict[str, _BrokerConfigEntry]:
    config = broker.config
    properties = broker.dynamic_configs.effective(config.properties)
    builtin = BrokerConfig()
    entries: dict[str, _BrokerConfigEntry] = {}

    def own(name: str, value: str, default: str | None) -> None:
        config_type, documentation = _BROKER_IDENTITY_CONFIGS[name]
        entries[name] = _BrokerConfigEntry(value, ((name, default),), config_type, documentation)

    advertised_host, advertised_port = config.advertised_address
    own("node.id", str(config.node_id), None)
    own("broker.id", str(config.node_id), None)
    own("listeners", f"PLAINTEXT://{config.host}:{config.port}", f"PLAINTEXT://{builtin.host}:{builtin.port}")
    own("advertised.listeners", f"PLAINTEXT://{advertised_host}:{advertised_port}", None)
    own("log.dirs", str(config.data_dir), str(builtin.data_dir))
    for name, (field, config_type, documentation) in _BROKER_FIELDS.items():
        entries[name] = _BrokerConfigEntry(
            _format(getattr(config, field)), ((name, _format(getattr(builtin, field))),), config_type, documentation
        )
    for name, (default, config_type, documentation) in _CLEANER_CONFIGS.items():
        value = _typed(properties[name], config_type) if name in properties else default
        entries[name] = _BrokerConfigEntry(value, ((name, default),), config_type, documentation)
    log_defaults = broker.default_log_config.to_properties()
    for broker_name, topic_name in BROKER_TO_TOPIC_CONFIG.items():
        config_type, _ = TOPIC_CONFIG_INFO[topic_name]
        entries[broker_name] = _BrokerConfigEntry(
            log_defaults[topic_name],
            TOPIC_CONFIG_SYNONYMS[topic_name],
            config_type,
            f"Default of the topic config {topic_name} for topics that do not set it.",
        )
    for topic_name, alternatives in BROKER_TIME_CONFIGS.items():
        synonyms = TOPIC_CONFIG_SYNONYMS[topic_name]
        for index, (broker_name, unit_ms) in enumerate(alternatives):
            default = synonyms[index][1]
            entries[broker_name] = _BrokerConfigEntry(
                properties.get(broker_name, default),
                synonyms,
                ConfigType.LONG if unit_ms == 1 else ConfigType.INT,
                f"Default of the topic config {topic_name} for topics that do not set it "
                f"(in units of {unit_ms} ms; {synonyms[0][0]} takes precedence over the other units).",
            )
    for name, value in properties.items():
        if name not in entries:
            entries[name] = _BrokerConfigEntry(value, ((name, None),), ConfigType.UNKNOWN, None)
    return entries


def _broker_source_chain(name: str, entry: _BrokerConfigEntry, layers: Layers, sensitive: bool) -> list[Synonym]:
    # A time setting lists the other units as synonyms, starting from the one described.
    names = [n for n, _ in entry.synonyms]
    synonyms = entry.synonyms[names.index(name):] if name in names else ((name, None),)
    chain = _broker_synonym_chain(synonyms, layers, sensitive)
    set_somewhere = any(name in properties for properties, _ in layers)
    if not set_somewhere and entry.value is not None and entry.value != synonyms[0][1]:
        # Set on the command line rather than in server.properties: still the broker's static config.
        chain.insert(0, Synonym(name, None if sensitive else entry.value, ConfigSource.STATIC_BROKER_CONFIG))
    return chain


def describe_broker(
    broker: Broker, name: str, *, include_synonyms: bool = False, include_documentation: bool = False
) -> list[ConfigResult]:
    if name == "":
        return _describe_dynamic_defaults(broker, include_synonyms, include_documentation)
    try:
        node_id = int(name)
    except ValueError:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}") from None
    if node_id != broker.node_id:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST,
            f"Unexpected broker id, expected {broker.node_id} or empty string, but received {name}",
        )
    layers = broker_layers(broker)
    results = []
    for config_name, entry in sorted(_broker_configs(broker).items()):
        sensitive = entry.config_type == ConfigType.PASSWORD or bool(_SENSITIVE_NAME.search(config_name))
        chain = _broker_source_chain(config_name, entry, layers, sensitive)
        results.append(
            _entry(
                config_name,
                entry.value,
                chain,
                read_only=config_name not in BROKER_LOG_PROPERTIES,
                sensitive=sensitive,
                config_type=ConfigType.PASSWORD if sensitive else entry.config_type,
                documentation=entry.documentation,
                include_synonyms=include_synonyms,
                include_documentation=include_documentation,
            )
        )
    return results


def _describe_dynamic_defaults(
    broker: Broker, include_synonyms: bool, include_documentation: bool
) -> list[ConfigResult]:
    """The cluster-wide dynamic defaults (the broker resource named ``""``): only those that are set."""
    entries = _broker_configs(broker)
    results = []
    for config_name, value in sorted(broker.dynamic_configs.defaults.items()):
        entry = entries.get(config_name)
        sensitive = bool(_SENSITIVE_NAME.search(config_name))
        results.append(
            _entry(
                config_name,
                value,
                [Synonym(config_name, None if sensitive else value, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)],
                read_only=False,
                sensitive=sensitive,
                config_type=entry.config_type if entry is not None else ConfigType.UNKNOWN,
                documentation=entry.documentation if entry is not None else None,
                include_synonyms=include_synonyms,
                include_documentation=include_documentation,
            )
        )
    return results


# -- the handler -----------------------------------------------------------------------------------


@handles(ApiKey.DESCRIBE_CONFIGS, 1, 4)
async def handle_describe_configs(ctx: RequestContext, request: DescribeConfigsRequest) -> DescribeConfigsResponse:
    results = []
    for resource in request.resources:
        try:
            configs = _describe(ctx.broker, resource, request.include_synonyms, request.include_documentation)
        except KafkaError as exc:
            results.append(
                Result(
                    error_code=exc.code,
                    error_message=exc.message,  # an unknown topic: the empty string, as Kafka sends
                    resource_type=resource.resource_type,
                    resource_name=resource.resource_name,
                    configs=[],
                )
            )
            continue
        if resource.configuration_keys:
            wanted = set(resource.configuration_keys)
            configs = [config for config in configs if config.name in wanted]
        results.append(
            Result(
                error_code=ErrorCode.NONE,
                error_message=None,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                configs=configs,
            )
        )
    return DescribeConfigsResponse(results=results)


def _describe(
    broker: Broker,
    resource: DescribeConfigsRequest.DescribeConfigsResource,
    include_synonyms: bool,
    include_documentation: bool,
) -> list[ConfigResult]:
    options = {"include_synonyms": include_synonyms, "include_documentation": include_documentation}
    if resource.resource_type == ResourceType.TOPIC:
        return describe_topic(broker, resource.resource_name, **options)
    if resource.resource_type == ResourceType.BROKER:
        return describe_broker(broker, resource.resource_name or "", **options)
    raise KafkaError(
        ErrorCode.INVALID_REQUEST,
        f"Unsupported resource type {resource_type_name(resource.resource_type)} "
        f"for resource {resource.resource_name}",
    )
