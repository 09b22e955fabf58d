"""The catalog of configuration definitions: every topic config and every broker setting trafka knows.

Each :class:`ConfigDef` holds Kafka's name, Kafka's type and the default, how a value is checked, whether
it may change while the broker runs, and what it does in a line (trafka's words). A topic config also
names the broker settings that give it its default, first the one that wins (``retention.ms`` <-
``log.retention.ms``, ``log.retention.minutes``, ``log.retention.hours``); each of those is a broker
setting of its own here too, derived from the topic config's definition.

Readers: ``storage.config.LogConfig`` (its fields, defaults and parsing), ``broker.config.BrokerConfig``
(the properties it parses at start-up), the config handlers (DescribeConfigs, AlterConfigs,
IncrementalAlterConfigs, CreateTopics), the log cleaner's defaults, and the README's tables of settings,
which :func:`render_readme` writes (``python -m trafka.storage.config_defs README.md``; a test fails when
they are out of date).

Kafka's enums of the config model live here too: :class:`ConfigType`, :class:`ConfigSource` and
:class:`ResourceType`, with the values the config APIs send.
"""
from __future__ import annotations

import math
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal
from enum import IntEnum
from typing import Any

from trafka.wire.compression import Compression
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.kafka_versions import KAFKA_VERSIONS

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
DOUBLE_MAX = sys.float_info.max

CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"
CLEANUP_POLICY_DELETE = "delete"
CLEANUP_POLICY_COMPACT = "compact"
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
#: Values of group.consumer.migration.policy: which way non-empty consumer groups may change protocol.
CONSUMER_GROUP_MIGRATION_POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 9092
DEFAULT_DATA_DIR = "trafka-data"  # relative to the working directory

_MINUTE_MS = 60 * 1000
_HOUR_MS = 60 * _MINUTE_MS


class ConfigType(IntEnum):
    """Kafka's type of a config, as DescribeConfigs (v3+) reports it."""

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


class ConfigSource(IntEnum):
    """Where a config's value comes from, as DescribeConfigs (v1+) and CreateTopics (v5+) report it."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


class ResourceType(IntEnum):
    """The kinds of config resource the config APIs name."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


def resource_type_name(resource_type: int) -> str:
    try:
        return ResourceType(resource_type).name
    except ValueError:
        return str(resource_type)


# -- values: parsing with Kafka's refusals, and formatting as Kafka reports them ----------------------


def _invalid(name: str, raw: str, reason: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_CONFIG, f"Invalid value {raw} for configuration {name}: {reason}")


def parse_integer(name: str, raw: str, type_name: str = "LONG") -> int:
    """An integer of Kafka's type ``type_name`` (INT, SHORT or LONG); INVALID_CONFIG otherwise."""
    bits = {"SHORT": 16, "INT": 32, "LONG": 64}[type_name]
    try:
        value = int(raw)
    except ValueError:
        raise _invalid(name, raw, f"Not a number of type {type_name}") from None
    if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
        raise _invalid(name, raw, f"Not a number of type {type_name}")
    return value


def _parse_double(name: str, raw: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise _invalid(name, raw, "Not a number of type DOUBLE") from None


def _parse_bool(name: str, raw: str) -> bool:
    lowered = raw.lower()
    if lowered not in ("true", "false"):
        raise _invalid(name, raw, "Expected value to be either true or false")
    return lowered == "true"


def _parse_list(name: str, raw: str) -> str:
    return ",".join(item.strip().lower() for item in raw.split(",") if item.strip())


_PARSERS: dict[ConfigType, Callable[[str, str], Any]] = {
    ConfigType.BOOLEAN: _parse_bool,
    ConfigType.STRING: lambda name, raw: raw,
    ConfigType.INT: lambda name, raw: parse_integer(name, raw, "INT"),
    ConfigType.SHORT: lambda name, raw: parse_integer(name, raw, "SHORT"),
    ConfigType.LONG: lambda name, raw: parse_integer(name, raw, "LONG"),
    ConfigType.DOUBLE: _parse_double,
    ConfigType.LIST: _parse_list,
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


def format_value(value: Any, config_type: ConfigType = ConfigType.UNKNOWN) -> str | None:
    """A typed value as Kafka reports it: ``true``, ``1.0E-5``, ``604800000``; None stays None."""
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    if config_type == ConfigType.DOUBLE:
        return java_double(float(value))
    return str(value)


def normalize(raw: str, config_type: ConfigType) -> str:
    """A property's value as Kafka reports it once parsed (``1`` of a DOUBLE is ``1.0``); a value that
    does not parse is reported as given."""
    try:
        if config_type == ConfigType.DOUBLE:
            return java_double(float(raw))
        if config_type in (ConfigType.INT, ConfigType.LONG, ConfigType.SHORT):
            return str(int(raw.strip()))
        if config_type == ConfigType.BOOLEAN:
            return raw.strip().lower()
    except ValueError:
        pass
    return raw


# -- the definitions ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConfigDef:
    """One config: a topic config, or a broker setting (``server.properties``)."""

    name: str
    type: ConfigType
    #: The value when nothing sets it, typed (int, float, bool or str); None: no value.
    default: Any
    #: What it does, in a sentence or two (DescribeConfigs' documentation and the README's tables).
    doc: str
    #: Checks of a value: the least and greatest, or the only values allowed (each item, for a LIST).
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[Any, ...] | None = None
    ignore_case: bool = False
    #: How broker start-up states what is valid when a value is refused, where the bounds say too little.
    expected: str | None = None
    #: Whether it may change while the broker runs (AlterConfigs on the broker resource).
    dynamic: bool = False
    #: The attribute of ``LogConfig`` (topic configs) or ``BrokerConfig`` (broker settings) holding it;
    #: None for a topic config accepted without effect, or a setting another part of the broker reads.
    field: str | None = None
    #: The default instead when the broker is one of a cluster (``zookeeper.connect`` set).
    cluster_default: Any = None
    #: Topic configs: the broker settings that give the default, with their unit in ms, first the one that wins.
    synonyms: tuple[tuple[str, int], ...] = ()
    #: Broker settings that are a topic config's default: that topic config, and this setting's unit in ms.
    default_of: str | None = None
    unit_ms: int = 1
    #: The default as documentation states it, where the bare value says less ("168 hours").
    default_doc: str | None = None
    #: Where trafka differs from Kafka.
    note: str | None = None

    @property
    def default_string(self) -> str | None:
        """The default as DescribeConfigs reports it."""
        return format_value(self.default, self.type)

    @property
    def broker_synonyms(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.synonyms)

    def parse(self, name: str, raw: str) -> Any:
        """``raw`` as this config's typed value, checked; ``name`` is the name the refusal gives (a broker
        synonym checks its value under its own name). Raises ``KafkaError(INVALID_CONFIG)`` with Kafka's
        message."""
        raw = str(raw)
        value = _PARSERS[self.type](name, raw.strip())
        if self.minimum is not None and value < self.minimum:
            raise _invalid(name, raw, f"Value must be at least {self.minimum}")
        if self.maximum is not None and value > self.maximum:
            raise _invalid(name, raw, f"Value must be no more than {self.maximum}")
        if self.choices is not None:
            # An empty list (cleanup.policy neither delete nor compact) is allowed, as in Kafka 4.1+.
            items = [item for item in value.split(",") if item] if self.type == ConfigType.LIST else [value]
            for item in items:
                if item not in self.choices:
                    raise _invalid(name, raw, f"String must be one of: {', '.join(map(str, self.choices))}")
        return value


def _topic(name: str, config_type: ConfigType, default: Any, doc: str, field: str,
           synonyms: tuple[tuple[str, int], ...] | str, **facts: Any) -> ConfigDef:
    if isinstance(synonyms, str):
        synonyms = ((synonyms, 1),)
    return ConfigDef(name, config_type, default, doc, field=field, synonyms=synonyms, dynamic=True, **facts)


_NO_EFFECT = "Accepted for compatibility with Apache Kafka; it has no effect on this broker."


def _no_effect(name: str, config_type: ConfigType) -> ConfigDef:
    return ConfigDef(name, config_type, None, _NO_EFFECT, dynamic=True)


_T = ConfigType

#: Every topic config this broker knows, by name: those it acts on, then those it accepts without effect.
TOPIC_CONFIG_DEFS: dict[str, ConfigDef] = {d.name: d for d in (
    _topic("segment.bytes", _T.INT, 1_073_741_824,
           "Size in bytes at which the active segment is closed and a new one started.",
           "segment_bytes", "log.segment.bytes", minimum=14, default_doc="1 GiB",
           note="trafka takes any size from 14 bytes (Kafka 4: from 1 MiB)"),
    _topic("segment.ms", _T.LONG, 604_800_000,
           "Age in milliseconds at which the active segment is closed even if not full, so that retention and "
           "compaction can act on it.",
           "segment_ms", (("log.roll.ms", 1), ("log.roll.hours", _HOUR_MS)), minimum=1, default_doc="168 hours"),
    _topic("segment.jitter.ms", _T.LONG, 0,
           "Largest random amount of time taken off segment.ms, so that the segments of many partitions do not "
           "all roll at the same moment.",
           "segment_jitter_ms", (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", _HOUR_MS)), minimum=0),
    _topic("segment.index.bytes", _T.INT, 10_485_760, "Size in bytes of the offset and time indexes of each segment.",
           "segment_index_bytes", "log.index.size.max.bytes", minimum=4),
    _topic("index.interval.bytes", _T.INT, 4096,
           "Bytes of record batches between two entries of the sparse offset index.",
           "index_interval_bytes", "log.index.interval.bytes", minimum=0),
    _topic("flush.messages", _T.LONG, LONG_MAX, "Number of messages appended after which the log is fsynced.",
           "flush_interval_messages", "log.flush.interval.messages", minimum=1),
    _topic("flush.ms", _T.LONG, LONG_MAX, "Milliseconds after which appended data is fsynced.",
           "flush_interval_ms", (("log.flush.interval.ms", 1), ("log.flush.scheduler.interval.ms", 1)), minimum=0),
    _topic("max.message.bytes", _T.INT, 1_048_588, "Largest record batch, in bytes, that the topic accepts.",
           "max_message_bytes", "message.max.bytes", minimum=0),
    _topic("message.timestamp.type", _T.STRING, CREATE_TIME,
           "CreateTime keeps the producer's timestamps; LogAppendTime stamps each batch with the broker's clock.",
           "message_timestamp_type", "log.message.timestamp.type", choices=(CREATE_TIME, LOG_APPEND_TIME)),
    _topic("message.timestamp.before.max.ms", _T.LONG, LONG_MAX,
           "How far in the past of the broker's clock a CreateTime timestamp may be.",
           "message_timestamp_before_max_ms", "log.message.timestamp.before.max.ms", minimum=0),
    _topic("message.timestamp.after.max.ms", _T.LONG, 3_600_000,  # an hour, as in Kafka 4
           "How far in the future of the broker's clock a CreateTime timestamp may be.",
           "message_timestamp_after_max_ms", "log.message.timestamp.after.max.ms", minimum=0),
    _topic("cleanup.policy", _T.LIST, CLEANUP_POLICY_DELETE,
           "delete removes whole segments once retention allows; compact keeps the latest record of each key; "
           "both may be given.",
           "cleanup_policy", "log.cleanup.policy", choices=(CLEANUP_POLICY_COMPACT, CLEANUP_POLICY_DELETE)),
    _topic("retention.ms", _T.LONG, 604_800_000,
           "How long a segment is kept under the delete policy, by its newest record's timestamp; -1 keeps it "
           "forever.",
           "retention_ms", (("log.retention.ms", 1), ("log.retention.minutes", _MINUTE_MS),
                            ("log.retention.hours", _HOUR_MS)), minimum=-1, default_doc="168 hours"),
    _topic("retention.bytes", _T.LONG, -1,
           "Size a partition may reach before its oldest segments are deleted; -1 means no limit.",
           "retention_bytes", "log.retention.bytes"),
    _topic("file.delete.delay.ms", _T.LONG, 60_000,
           "Time between a segment's deletion (its files renamed .deleted) and the removal of its files.",
           "file_delete_delay_ms", "log.segment.delete.delay.ms", minimum=0),
    _topic("delete.retention.ms", _T.LONG, 86_400_000, "How long tombstones stay in a compacted log.",
           "delete_retention_ms", "log.cleaner.delete.retention.ms", minimum=0),
    _topic("min.compaction.lag.ms", _T.LONG, 0, "Age a record must reach before compaction may remove it.",
           "min_compaction_lag_ms", "log.cleaner.min.compaction.lag.ms", minimum=0),
    _topic("max.compaction.lag.ms", _T.LONG, LONG_MAX,
           "Longest time a record may stay uncompacted: past it a log is cleaned whatever its dirty ratio.",
           "max_compaction_lag_ms", "log.cleaner.max.compaction.lag.ms", minimum=1),
    _topic("min.cleanable.dirty.ratio", _T.DOUBLE, 0.5,
           "Share of not-yet-compacted bytes at which a log becomes eligible for compaction.",
           "min_cleanable_dirty_ratio", "log.cleaner.min.cleanable.ratio", minimum=0, maximum=1),
    _topic("min.insync.replicas", _T.INT, 1,
           "Fewest in-sync replicas that must hold a record before an acks=all produce succeeds.",
           "min_insync_replicas", "min.insync.replicas", minimum=1),
    _topic("unclean.leader.election.enable", _T.BOOLEAN, False,
           "Whether a replica outside the ISR may become leader, at the risk of losing records.",
           "unclean_leader_election_enable", "unclean.leader.election.enable"),
    _topic("compression.type", _T.STRING, "producer",
           "Codec that batches are stored with; producer keeps the producer's own codec.",
           "compression_type", "compression.type", choices=COMPRESSION_TYPES),
    _topic("preallocate", _T.BOOLEAN, False, "Whether segment files are preallocated on disk when created.",
           "preallocate", "log.preallocate"),
    _no_effect("compression.gzip.level", _T.INT),
    _no_effect("compression.lz4.level", _T.INT),
    _no_effect("compression.zstd.level", _T.INT),
    _no_effect("message.format.version", _T.STRING),
    _no_effect("message.timestamp.difference.max.ms", _T.LONG),
    _no_effect("message.downconversion.enable", _T.BOOLEAN),
    _no_effect("leader.replication.throttled.replicas", _T.LIST),
    _no_effect("follower.replication.throttled.replicas", _T.LIST),
    _no_effect("remote.storage.enable", _T.BOOLEAN),
    _no_effect("local.retention.ms", _T.LONG),
    _no_effect("local.retention.bytes", _T.LONG),
    _no_effect("remote.log.copy.disable", _T.BOOLEAN),
    _no_effect("remote.log.delete.on.disable", _T.BOOLEAN),
)}


def _topic_defaults() -> Iterable[ConfigDef]:
    """The broker settings that are topic defaults, from the topic configs' synonyms. The first synonym may
    change at run time (``log.retention.ms``, not ``log.retention.hours``), as in Kafka; the built-in default
    sits on the last one, in its unit."""
    for topic in TOPIC_CONFIG_DEFS.values():
        last = len(topic.synonyms) - 1
        for index, (name, unit_ms) in enumerate(topic.synonyms):
            doc = f"Default of the topic config {topic.name} for topics that do not set it"
            if last > 0:
                doc += (f" (in units of {unit_ms} ms; {topic.synonyms[0][0]} takes precedence over the other "
                        f"units)")
            yield ConfigDef(
                name,
                topic.type if unit_ms == 1 else ConfigType.INT,
                (topic.default if unit_ms == 1 else topic.default // unit_ms) if index == last else None,
                doc + ".",
                dynamic=index == 0,
                default_of=topic.name,
                unit_ms=unit_ms,
            )


_CLEANER_AT_START = "read at start-up only (Kafka changes it at run time)"


def _broker(name: str, config_type: ConfigType, default: Any, doc: str, field: str | None = None,
            **facts: Any) -> ConfigDef:
    return ConfigDef(name, config_type, default, doc, field=field, **facts)


def _group_config_settings() -> tuple[ConfigDef, ...]:
    """Broker settings that are only the defaults and bounds of group configs (GROUP config resources): the
    default a group's config shows, and the range IncrementalAlterConfigs and AlterConfigs keep it in."""
    note = "the default or bound of a group config; trafka serves no streams groups"
    rows: list[tuple[str, ConfigType, Any, str]] = [
        ("group.consumer.min.session.timeout.ms", _T.INT, 45_000, "Least consumer.session.timeout.ms of a group."),
        ("group.consumer.max.session.timeout.ms", _T.INT, 60_000, "Greatest consumer.session.timeout.ms of a group."),
        ("group.consumer.min.heartbeat.interval.ms", _T.INT, 5000, "Least consumer.heartbeat.interval.ms of a group."),
        ("group.consumer.max.heartbeat.interval.ms", _T.INT, 15_000,
         "Greatest consumer.heartbeat.interval.ms of a group."),
        ("group.consumer.assignment.interval.ms", _T.INT, 1000,
         "Default consumer.assignment.interval.ms of a group (least time between two target assignments)."),
        ("group.consumer.min.assignment.interval.ms", _T.INT, 0, "Least consumer.assignment.interval.ms of a group."),
        ("group.consumer.max.assignment.interval.ms", _T.INT, 15_000,
         "Greatest consumer.assignment.interval.ms of a group."),
        ("group.consumer.assignor.offload.enable", _T.BOOLEAN, True,
         "Default consumer.assignor.offload.enable of a group."),
        ("group.share.min.assignment.interval.ms", _T.INT, 0, "Least share.assignment.interval.ms of a share group."),
        ("group.share.max.assignment.interval.ms", _T.INT, 15_000,
         "Greatest share.assignment.interval.ms of a share group."),
        ("group.share.min.delivery.count.limit", _T.INT, 2, "Least share.delivery.count.limit of a share group."),
        ("group.share.max.delivery.count.limit", _T.INT, 10, "Greatest share.delivery.count.limit of a share group."),
        ("group.share.min.partition.max.record.locks", _T.INT, 100,
         "Least share.partition.max.record.locks of a share group."),
        ("group.share.max.partition.max.record.locks", _T.INT, 4000,
         "Greatest share.partition.max.record.locks of a share group."),
        ("group.streams.session.timeout.ms", _T.INT, 45_000, "Default streams.session.timeout.ms of a group."),
        ("group.streams.min.session.timeout.ms", _T.INT, 45_000, "Least streams.session.timeout.ms of a group."),
        ("group.streams.max.session.timeout.ms", _T.INT, 60_000, "Greatest streams.session.timeout.ms of a group."),
        ("group.streams.heartbeat.interval.ms", _T.INT, 5000, "Default streams.heartbeat.interval.ms of a group."),
        ("group.streams.min.heartbeat.interval.ms", _T.INT, 5000, "Least streams.heartbeat.interval.ms of a group."),
        ("group.streams.max.heartbeat.interval.ms", _T.INT, 15_000,
         "Greatest streams.heartbeat.interval.ms of a group."),
        ("group.streams.assignment.interval.ms", _T.INT, 1000, "Default streams.assignment.interval.ms of a group."),
        ("group.streams.min.assignment.interval.ms", _T.INT, 0, "Least streams.assignment.interval.ms of a group."),
        ("group.streams.max.assignment.interval.ms", _T.INT, 15_000,
         "Greatest streams.assignment.interval.ms of a group."),
        ("group.streams.assignor.offload.enable", _T.BOOLEAN, True,
         "Default streams.assignor.offload.enable of a group."),
        ("group.streams.assignors", _T.LIST, "sticky", "Task assignors of streams groups (streams.assignor.name)."),
        ("group.streams.initial.rebalance.delay.ms", _T.INT, 3000,
         "Default streams.initial.rebalance.delay.ms of a group."),
        ("group.streams.num.standby.replicas", _T.INT, 0, "Default streams.num.standby.replicas of a group."),
        ("group.streams.max.standby.replicas", _T.INT, 2, "Greatest streams.num.standby.replicas of a group."),
        ("group.streams.rack.aware.assignment.tags", _T.LIST, "",
         "Default streams.rack.aware.assignment.tags of a group."),
    ]
    return tuple(_broker(name, config_type, default, doc, note=note if name.startswith("group.streams.") else None)
                 for name, config_type, default, doc in rows)


#: The broker's own settings: where it is and who it is, what it serves, and the settings each part of it
#: reads (the ones held in ``BrokerConfig`` name their attribute, in the order they are parsed).
_BROKER_SETTINGS: tuple[ConfigDef, ...] = (
    # Where this broker is and who it is (BrokerConfig reads these itself).
    _broker("node.id", _T.INT, None, "Id of this broker in the cluster.", default_doc="1 when neither node.id nor "
            "broker.id is set"),
    _broker("broker.id", _T.INT, None, "Id of this broker in the cluster (older name of node.id)."),
    _broker("listeners", _T.LIST, f"PLAINTEXT://{DEFAULT_HOST}:{DEFAULT_PORT}", "Address the broker listens on.",
            note="one PLAINTEXT listener, on loopback unless told (Kafka: every interface); read at start-up only "
            "(Kafka changes it at run time)"),
    _broker("listener.security.protocol.map", _T.STRING,
            "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
            "Security protocol of each listener name (NAME:PROTOCOL,...).",
            note="a listener that is not PLAINTEXT stops the start; read at start-up only (Kafka changes it at run "
            "time)"),
    _broker("inter.broker.listener.name", _T.STRING, None,
            "Listener other brokers of the cluster reach this one on.",
            default_doc="the listener security.inter.broker.protocol names"),
    _broker("security.inter.broker.protocol", _T.STRING, "PLAINTEXT",
            "Security protocol between brokers, where inter.broker.listener.name is not set."),
    # TLS (SSL and SASL_SSL listeners, and the broker's own client side); each may be set per listener as
    # listener.name.<listener>.<setting>.
    _broker("ssl.keystore.type", _T.STRING, "JKS", "Format of the key store: PEM or PKCS12 (JKS is refused).",
            note="JKS key stores are refused with how to convert them"),
    _broker("ssl.keystore.location", _T.STRING, None, "File of the broker's private key and certificate chain."),
    _broker("ssl.keystore.password", _T.PASSWORD, None, "Password of the key store."),
    _broker("ssl.key.password", _T.PASSWORD, None, "Password of the private key in the key store."),
    _broker("ssl.keystore.certificate.chain", _T.PASSWORD, None, "Certificate chain in PEM, given inline."),
    _broker("ssl.keystore.key", _T.PASSWORD, None, "Private key in PEM, given inline."),
    _broker("ssl.truststore.type", _T.STRING, "JKS", "Format of the trust store: PEM or PKCS12."),
    _broker("ssl.truststore.location", _T.STRING, None, "File of the certificates trusted to sign peers'."),
    _broker("ssl.truststore.password", _T.PASSWORD, None, "Password of the trust store."),
    _broker("ssl.truststore.certificates", _T.PASSWORD, None, "Trusted certificates in PEM, given inline."),
    _broker("ssl.client.auth", _T.STRING, "none", "Whether clients present a certificate: required, requested or none.",
            choices=("required", "requested", "none")),
    _broker("ssl.enabled.protocols", _T.LIST, "TLSv1.2,TLSv1.3", "TLS versions served."),
    _broker("ssl.protocol", _T.STRING, "TLSv1.3", "TLS version the contexts are made for."),
    _broker("ssl.cipher.suites", _T.LIST, None, "Cipher suites served (IANA or OpenSSL names); all by default."),
    _broker("ssl.endpoint.identification.algorithm", _T.STRING, "https",
            "Host name check of the broker's own connections to others: https, or empty for none."),
    _broker("ssl.principal.mapping.rules", _T.STRING, "DEFAULT",
            "Rules mapping a client certificate's subject to its principal's name."),
    # SASL (SASL_PLAINTEXT and SASL_SSL listeners).
    _broker("sasl.enabled.mechanisms", _T.LIST, "GSSAPI",
            "Mechanisms served: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER.",
            note="GSSAPI (Kerberos) is not served: a listener that enables it stops the start"),
    _broker("sasl.mechanism.inter.broker.protocol", _T.STRING, "GSSAPI",
            "Mechanism brokers authenticate to each other with."),
    _broker("sasl.jaas.config", _T.PASSWORD, None,
            "JAAS login module line of a mechanism (usually set per listener and mechanism)."),
    _broker("java.security.auth.login.config", _T.STRING, None,
            "JAAS file whose KafkaServer sections (or <listener>.KafkaServer) configure SASL, where no "
            "sasl.jaas.config is set (Kafka takes it as the JVM's system property)."),
    _broker("connections.max.reauth.ms", _T.LONG, 0,
            "Longest session of a SASL connection before it must authenticate again (KIP-368); 0: no limit.",
            minimum=0),
    _broker("connection.failed.authentication.delay.ms", _T.INT, 100,
            "How long a connection that failed authentication waits before it is closed.", minimum=0),
    # Client quotas and connection limits (broker.security.quotas, broker.security.connection_quotas).
    _broker("quota.window.num", _T.INT, 11, "Samples a client's rate is measured over, for client quotas.",
            minimum=1),
    _broker("quota.window.size.seconds", _T.INT, 1, "Length of each sample of a client's rate, in seconds.",
            minimum=1),
    _broker("controller.quota.window.num", _T.INT, 11,
            "Samples of the controller mutation quota (a client may go this many windows' worth ahead).", minimum=1),
    _broker("controller.quota.window.size.seconds", _T.INT, 1,
            "Length of each sample of the controller mutation quota, in seconds.", minimum=1),
    _broker("max.connections", _T.INT, 2147483647,
            "Most connections the broker holds open (also per listener: listener.name.<l>.max.connections); "
            "at the limit, new connections wait to be accepted.", minimum=0),
    _broker("max.connections.per.ip", _T.INT, 2147483647,
            "Most connections from one address; beyond it a new connection is closed at once.", minimum=0),
    _broker("max.connections.per.ip.overrides", _T.STRING, "",
            "Per address or host name limits over max.connections.per.ip (host:count,...)."),
    _broker("max.connection.creation.rate", _T.INT, 2147483647,
            "Most new connections accepted per second (also per listener: "
            "listener.name.<l>.max.connection.creation.rate); beyond it accepting waits.", minimum=0),
    # OAUTHBEARER validated against a JWKS (each also per listener, and per listener and mechanism:
    # listener.name.<l>.oauthbearer.<setting>).
    _broker("sasl.server.callback.handler.class", _T.STRING, None,
            "Validator of a mechanism's credentials, given as listener.name.<l>.oauthbearer.sasl.server.callback."
            "handler.class: org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler "
            "validates OAUTHBEARER tokens against a JWKS.",
            note="only OAuthBearerValidatorCallbackHandler is served; another class stops the start"),
    _broker("sasl.oauthbearer.jwks.endpoint.url", _T.STRING, None,
            "Where the keys verifying OAUTHBEARER tokens are: a JWKS file (file:), read at start, or an "
            "http:/https: URL, fetched at start and refreshed in the background."),
    _broker("sasl.oauthbearer.jwks.endpoint.refresh.ms", _T.LONG, 3_600_000,
            "How often the JWKS URL is fetched again.", minimum=0),
    _broker("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", _T.LONG, 100,
            "First wait before fetching the JWKS URL again after a failure; it doubles with each attempt."),
    _broker("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", _T.LONG, 10_000,
            "Longest a refresh of the JWKS URL keeps retrying."),
    _broker("sasl.oauthbearer.expected.audience", _T.LIST, None,
            "Audiences a token's aud must name one of; needed unless sasl.oauthbearer.allow.unverified.audience."),
    _broker("sasl.oauthbearer.expected.issuer", _T.STRING, None,
            "Issuer a token's iss must be; needed unless sasl.oauthbearer.allow.unverified.issuer."),
    _broker("sasl.oauthbearer.allow.unverified.audience", _T.BOOLEAN, False,
            "Whether a listener without sasl.oauthbearer.expected.audience accepts tokens whatever their aud."),
    _broker("sasl.oauthbearer.allow.unverified.issuer", _T.BOOLEAN, False,
            "Whether a listener without sasl.oauthbearer.expected.issuer accepts tokens whatever their iss."),
    _broker("sasl.oauthbearer.jwt.validator.class", _T.STRING,
            "org.apache.kafka.common.security.oauthbearer.DefaultJwtValidator",
            "Validator of OAUTHBEARER tokens behind OAuthBearerValidatorCallbackHandler.",
            note="only Kafka's DefaultJwtValidator (BrokerJwtValidator) is served; another class stops the start"),
    _broker("sasl.oauthbearer.clock.skew.seconds", _T.INT, 30,
            "Leeway in seconds for a token's exp and nbf against the broker's clock."),
    _broker("sasl.oauthbearer.scope.claim.name", _T.STRING, "scope", "Claim holding a token's scope."),
    _broker("sasl.oauthbearer.sub.claim.name", _T.STRING, "sub", "Claim holding a token's principal name."),
    # Authorization (ACLs).
    _broker("authorizer.class.name", _T.STRING, "",
            "Authorizer of requests: org.apache.kafka.metadata.authorizer.StandardAuthorizer (or Kafka 3.x's "
            "kafka.security.authorizer.AclAuthorizer) enables ACLs; empty: every request is allowed.",
            note="another class stops the start"),
    _broker("super.users", _T.STRING, None,
            "Principals (User:name, separated by ;) allowed everything, whatever the ACLs say."),
    _broker("allow.everyone.if.no.acl.found", _T.BOOLEAN, False,
            "Whether a request on a resource that no ACL names is allowed."),
    _broker("controller.listener.names", _T.LIST, None,
            "Listener names of KRaft controllers: left out, this broker being its own controller."),
    _broker("advertised.listeners", _T.LIST, None, "Address clients are told to connect to."),
    _broker("log.dirs", _T.LIST, DEFAULT_DATA_DIR, "Directory holding the partitions' logs.",
            note="one directory is used"),
    _broker("log.dir", _T.LIST, None, "Directory holding the partitions' logs, where log.dirs is not set."),
    _broker("process.roles", _T.LIST, None, "Roles of this node in a KRaft cluster.",
            note="only broker,controller: one node that is both"),
    _broker("controller.quorum.voters", _T.LIST, "", "The KRaft controllers.", note="at most one, this node"),
    # Settings held in BrokerConfig, parsed at start-up.
    _broker("cluster.id", _T.STRING, None,
            "Id of the cluster written into a new data directory (else a random one); a data directory of "
            "another cluster is refused.", "cluster_id", note="trafka's own"),
    _broker("num.partitions", _T.INT, 1, "Partitions of a topic created without a count.", "num_partitions",
            minimum=1),
    _broker("default.replication.factor", _T.INT, 1, "Replication factor of a topic created without one.",
            "default_replication_factor"),
    _broker("auto.create.topics.enable", _T.BOOLEAN, True, "Whether a Metadata request for an unknown topic creates "
            "it.", "auto_create_topics_enable"),
    _broker("delete.topic.enable", _T.BOOLEAN, True, "Whether DeleteTopics may delete topics.", "delete_topic_enable"),
    _broker("socket.request.max.bytes", _T.INT, 104_857_600, "Largest request frame accepted.",
            "socket_request_max_bytes"),
    _broker("fetch.max.bytes", _T.INT, 57_671_680, "Most record bytes one Fetch response carries.", "fetch_max_bytes",
            minimum=0),
    _broker("metrics.port", _T.INT, None, "Port of the Prometheus metrics endpoint (0: a free one); unset, none.",
            "metrics_port", minimum=0, maximum=65535, expected="a port is 0-65535", note="trafka's own"),
    _broker("kafka.version", _T.STRING, None,
            "Apache Kafka release (major.minor) whose broker's ApiVersions answer this broker gives, serving only "
            "those API versions (within its own); unset, all it serves.", "kafka_version",
            choices=tuple(KAFKA_VERSIONS), expected=f"one of Apache Kafka's releases {', '.join(KAFKA_VERSIONS)}",
            note="trafka's own"),
    _broker("log.retention.check.interval.ms", _T.LONG, 300_000, "How often retention looks for segments to delete.",
            "log_retention_check_interval_ms", minimum=1, default_doc="300000 (the first look 30 s after start)"),
    _broker("group.initial.rebalance.delay.ms", _T.INT, 100,
            "How long a new consumer group waits for another member to arrive before its first rebalance.",
            "group_initial_rebalance_delay_ms", note="Kafka waits 3000"),
    _broker("group.min.session.timeout.ms", _T.INT, 6000, "Shortest session timeout a group member may ask for.",
            "group_min_session_timeout_ms"),
    _broker("group.max.session.timeout.ms", _T.INT, 1_800_000, "Longest session timeout a group member may ask for.",
            "group_max_session_timeout_ms"),
    _broker("group.consumer.migration.policy", _T.STRING, "bidirectional",
            "Whether non-empty groups may change protocol online: bidirectional, upgrade (classic to consumer), "
            "downgrade (consumer to classic) or disabled.",
            "group_consumer_migration_policy", choices=CONSUMER_GROUP_MIGRATION_POLICIES, ignore_case=True),
    _broker("offsets.topic.num.partitions", _T.INT, 50, "Partitions of the __consumer_offsets topic, at its creation.",
            "offsets_topic_num_partitions"),
    _broker("offsets.retention.minutes", _T.INT, 10_080,
            "How long the offsets of a group stay once it is empty (of a group that commits outside group "
            "management: since its last commit); the group goes with its last offsets.",
            "offsets_retention_minutes"),
    _broker("offsets.topic.segment.bytes", _T.INT, 104_857_600,
            "segment.bytes of the __consumer_offsets topic, at its creation: small segments let compaction keep "
            "it small.", "offsets_topic_segment_bytes", minimum=1),
    _broker("offsets.load.buffer.size", _T.INT, 5_242_880,
            "Bytes read at a time while the groups of a __consumer_offsets partition load.",
            "offsets_load_buffer_size", minimum=1),
    _broker("offsets.topic.compression.codec", _T.INT, 0,
            "Codec of the group coordinator's writes: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.",
            "offsets_topic_compression_codec", choices=tuple(codec.value for codec in Compression),
            expected="expected a codec id: 0 (none), 1 (gzip), 2 (snappy), 3 (lz4) or 4 (zstd)"),
    _broker("controller.max.records.per.batch", _T.INT, 10_000,
            "Most records one CreateTopics or CreatePartitions request may create (each partition, and for "
            "CreateTopics each topic and config too).", "controller_max_records_per_batch", minimum=1),
    # The cluster (broker.cluster) and replication (broker.replication).
    _broker("zookeeper.connect", _T.STRING, None,
            "ZooKeeper's address (host:port,... and a chroot path if any); set, the broker is one of a replicated "
            "cluster, and needs its own broker.id.", "zookeeper_connect", note="Kafka 4 has no ZooKeeper mode"),
    _broker("zookeeper.session.timeout.ms", _T.INT, 18_000,
            "ZooKeeper session timeout: a broker silent this long leaves the cluster.", "zookeeper_session_timeout_ms"),
    _broker("zookeeper.connection.timeout.ms", _T.INT, None,
            "How long the broker waits to connect to ZooKeeper.", "zookeeper_connection_timeout_ms",
            default_doc="zookeeper.session.timeout.ms"),
    _broker("broker.rack", _T.STRING, None, "Rack of this broker.", "broker_rack"),
    _broker("auto.leader.rebalance.enable", _T.BOOLEAN, True,
            "Whether leadership moves back to each partition's preferred replica.", "auto_leader_rebalance_enable"),
    _broker("offsets.topic.replication.factor", _T.SHORT, 1,
            "Replication factor of the __consumer_offsets topic, at its creation.",
            "offsets_topic_replication_factor", minimum=1, cluster_default=3),
    _broker("leader.imbalance.check.interval.seconds", _T.LONG, 300,
            "How often the controller looks at the balance of leadership.",
            "leader_imbalance_check_interval_seconds", minimum=1),
    _broker("leader.imbalance.per.broker.percentage", _T.INT, 10,
            "Share of a broker's preferred partitions led by others above which leadership is moved back.",
            "leader_imbalance_per_broker_percentage", minimum=1),
    _broker("replica.lag.time.max.ms", _T.LONG, 30_000,
            "How long a follower may go without catching up before it leaves the ISR.",
            "replica_lag_time_max_ms", minimum=1),
    _broker("replica.fetch.wait.max.ms", _T.INT, 500, "Longest wait of a follower's fetch.",
            "replica_fetch_wait_max_ms", minimum=1),
    _broker("replica.fetch.min.bytes", _T.INT, 1, "Fewest bytes a follower's fetch waits for.",
            "replica_fetch_min_bytes", minimum=1),
    _broker("replica.fetch.max.bytes", _T.INT, 1_048_576,
            "Most bytes a follower fetches of one partition at a time (a larger first batch still comes).",
            "replica_fetch_max_bytes", minimum=1),
    _broker("replica.fetch.response.max.bytes", _T.INT, 10_485_760, "Most bytes of one follower fetch response.",
            "replica_fetch_response_max_bytes", minimum=1),
    _broker("replica.fetch.backoff.ms", _T.INT, 1000, "How long a follower waits after a failed fetch.",
            "replica_fetch_backoff_ms", minimum=1),
    # The transaction coordinator (broker.txn).
    _broker("transaction.max.timeout.ms", _T.INT, 900_000, "Longest transaction timeout a producer may ask for.",
            "transaction_max_timeout_ms", minimum=1),
    _broker("transaction.state.log.num.partitions", _T.INT, 50,
            "Partitions of the __transaction_state topic, at its creation.", "transaction_state_log_num_partitions",
            minimum=1),
    _broker("transaction.state.log.replication.factor", _T.SHORT, 1,
            "Replication factor of the __transaction_state topic, at its creation.",
            "transaction_state_log_replication_factor", minimum=1, cluster_default=3),
    _broker("transaction.state.log.min.isr", _T.INT, 1,
            "min.insync.replicas of the __transaction_state topic, at its creation.",
            "transaction_state_log_min_isr", minimum=1, cluster_default=2),
    _broker("transaction.state.log.segment.bytes", _T.INT, 104_857_600,
            "segment.bytes of the __transaction_state topic, at its creation.", "transaction_state_log_segment_bytes",
            minimum=1),
    _broker("transaction.state.log.load.buffer.size", _T.INT, 5_242_880,
            "Bytes read at a time while a __transaction_state partition loads.",
            "transaction_state_log_load_buffer_size", minimum=1),
    # The share coordinator (broker.share): the state of share groups' partitions in __share_group_state.
    _broker("share.coordinator.state.topic.num.partitions", _T.INT, 50,
            "Partitions of the __share_group_state topic, at its creation.", minimum=1),
    _broker("share.coordinator.state.topic.replication.factor", _T.SHORT, 1,
            "Replication factor of the __share_group_state topic, at its creation.", minimum=1, cluster_default=3),
    _broker("share.coordinator.state.topic.min.isr", _T.SHORT, 1,
            "min.insync.replicas of the __share_group_state topic, at its creation.", minimum=1, cluster_default=2),
    _broker("share.coordinator.state.topic.segment.bytes", _T.INT, 104_857_600,
            "segment.bytes of the __share_group_state topic, at its creation.", minimum=1),
    _broker("share.coordinator.load.buffer.size", _T.INT, 5_242_880,
            "Bytes read at a time while a __share_group_state partition loads.", minimum=1),
    _broker("share.coordinator.snapshot.update.records.per.snapshot", _T.INT, 500,
            "Update records the share coordinator writes for a share partition between two snapshots of it.",
            minimum=0),
    _broker("share.coordinator.write.timeout.ms", _T.INT, 5000,
            "How long a write to __share_group_state waits for its replicas.", minimum=1),
    _broker("share.coordinator.state.topic.prune.interval.ms", _T.INT, 300_000,
            "How often the records of __share_group_state that later snapshots supersede are deleted.", minimum=1),
    _broker("share.coordinator.cold.partition.snapshot.interval.ms", _T.INT, 300_000,
            "How often share partitions not snapshotted for that long are snapshotted again (so that their older "
            "records can be deleted).", minimum=1),
    _broker("transactional.id.expiration.ms", _T.INT, 604_800_000,
            "How long a transactional id stays after its last transaction ended.", "transactional_id_expiration_ms",
            minimum=1),
    _broker("transaction.abort.timed.out.transaction.cleanup.interval.ms", _T.INT, 10_000,
            "How often transactions open past their timeout are looked for and aborted.",
            "transaction_abort_timed_out_transaction_cleanup_interval_ms", minimum=1),
    _broker("transaction.remove.expired.transaction.cleanup.interval.ms", _T.INT, 3_600_000,
            "How often expired transactional ids are looked for and removed.",
            "transaction_remove_expired_transaction_cleanup_interval_ms", minimum=1),
    _broker("transaction.partition.verification.enable", _T.BOOLEAN, True,
            "Whether a transactional batch that would start a transaction in a partition is first verified with "
            "the transaction coordinator.", "transaction_partition_verification_enable",
            note="read at start-up only (Kafka changes it at run time)"),
    # The group coordinator (broker.groups).
    _broker("group.max.size", _T.INT, INT_MAX, "Most members of a classic group.", "group_max_size", minimum=1),
    _broker("group.consumer.session.timeout.ms", _T.INT, 45_000,
            "Session timeout of the members of a consumer group (KIP-848).", "group_consumer_session_timeout_ms",
            minimum=1),
    _broker("group.consumer.heartbeat.interval.ms", _T.INT, 5000,
            "Heartbeat interval of the members of a consumer group (KIP-848).",
            "group_consumer_heartbeat_interval_ms", minimum=1),
    _broker("group.consumer.max.size", _T.INT, INT_MAX, "Most members of a consumer group (KIP-848).",
            "group_consumer_max_size", minimum=1),
    _broker("group.consumer.assignors", _T.LIST, "uniform,range",
            "Server-side assignors of consumer groups, the first the default (names or Kafka's class names)."),
    # Share groups (KIP-932, broker.groups.share): membership.
    _broker("group.share.session.timeout.ms", _T.INT, 45_000,
            "Session timeout of the members of a share group, where the group does not say "
            "(share.session.timeout.ms).", minimum=1),
    _broker("group.share.min.session.timeout.ms", _T.INT, 45_000,
            "Least share.session.timeout.ms a share group may set.", minimum=1),
    _broker("group.share.max.session.timeout.ms", _T.INT, 60_000,
            "Greatest share.session.timeout.ms a share group may set.", minimum=1),
    _broker("group.share.heartbeat.interval.ms", _T.INT, 5000,
            "Heartbeat interval of the members of a share group, where the group does not say "
            "(share.heartbeat.interval.ms).", minimum=1),
    _broker("group.share.min.heartbeat.interval.ms", _T.INT, 5000,
            "Least share.heartbeat.interval.ms a share group may set.", minimum=1),
    _broker("group.share.max.heartbeat.interval.ms", _T.INT, 15_000,
            "Greatest share.heartbeat.interval.ms a share group may set.", minimum=1),
    _broker("group.share.max.size", _T.INT, 200, "Most members of a share group (GROUP_MAX_SIZE_REACHED beyond it).",
            minimum=1, maximum=1000),
    _broker("group.share.assignors", _T.LIST, "simple",
            "Server-side assignor of share groups (Kafka's SimpleAssignor, by name or class name).",
            note="only the simple assignor"),
    _broker("group.share.assignment.interval.ms", _T.INT, 1000,
            "Least time between two target assignments of a share group (share.assignment.interval.ms): members "
            "that join meanwhile get their partitions at a heartbeat after it.", minimum=0),
    _broker("group.share.assignor.offload.enable", _T.BOOLEAN, True,
            "Whether share group assignments are computed off the coordinator's thread.",
            note="accepted; the simple assignor runs at the heartbeat that needs it"),
    _broker("group.share.initialize.retry.interval.ms", _T.INT, 30_000,
            "How long before the share state of partitions a share group could not initialize is tried again.",
            minimum=1, note="tried again at the group's next heartbeat"),
    *_group_config_settings(),
    _broker("offsets.retention.check.interval.ms", _T.LONG, 600_000, "How often expired offsets are looked for.",
            "offsets_retention_check_interval_ms", minimum=1),
    _broker("offsets.commit.timeout.ms", _T.INT, 5000,
            "How long an offset commit waits for its replicas before REQUEST_TIMED_OUT.",
            "offsets_commit_timeout_ms", minimum=1),
    _broker("offset.metadata.max.bytes", _T.INT, 4096,
            "Longest metadata string of a committed offset (OFFSET_METADATA_TOO_LARGE beyond it).",
            "offset_metadata_max_bytes"),
    # Share partitions (broker.share.manager): what a share group's consumers acquire, and for how long.
    _broker("group.share.record.lock.duration.ms", _T.INT, 30_000,
            "How long records acquired by a share consumer stay locked to it, where its group does not say "
            "(share.record.lock.duration.ms).", minimum=1000, maximum=3_600_000),
    _broker("group.share.min.record.lock.duration.ms", _T.INT, 15_000,
            "Least share.record.lock.duration.ms a share group may set.", minimum=1000, maximum=30_000),
    _broker("group.share.max.record.lock.duration.ms", _T.INT, 60_000,
            "Greatest share.record.lock.duration.ms a share group may set.", minimum=30_000, maximum=3_600_000),
    _broker("group.share.delivery.count.limit", _T.INT, 5,
            "Deliveries of a record to share consumers before it is archived, where its group does not say "
            "(share.delivery.count.limit).", minimum=2, maximum=10),
    _broker("group.share.partition.max.record.locks", _T.INT, 2000,
            "Most records of a share partition in flight (acquired or waiting for redelivery) at once, where its "
            "group does not say (share.partition.max.record.locks).", minimum=100, maximum=10_000),
    _broker("group.share.max.share.sessions", _T.INT, 2000,
            "Most share sessions (ShareFetch) this broker keeps at once.", minimum=1),
    # DescribeTopicPartitions.
    _broker("max.request.partition.size.limit", _T.INT, 2000,
            "Most partitions one DescribeTopicPartitions response describes.", "max_request_partition_size_limit",
            minimum=1),
    # The log cleaner (broker.log_cleaner), from the properties at its start.
    _broker("log.cleaner.enable", _T.BOOLEAN, True,
            "Whether the log cleaner runs; without it compacted topics are not compacted."),
    _broker("log.cleaner.threads", _T.INT, 1, "Threads that compact logs, each cleaning one log at a time.",
            minimum=1, note=_CLEANER_AT_START),
    _broker("log.cleaner.backoff.ms", _T.LONG, 15_000, "How long the cleaner sleeps when no log needs cleaning.",
            minimum=0, note=_CLEANER_AT_START),
    _broker("log.cleaner.dedupe.buffer.size", _T.LONG, 134_217_728,
            "Memory of the offset maps (key hash -> latest offset), shared by the cleaner threads; bounds how much "
            "of a dirty log one cleaning covers.", minimum=1, note=_CLEANER_AT_START),
    _broker("log.cleaner.io.buffer.size", _T.INT, 524_288, "Size of the cleaner's read and write buffers.",
            minimum=1, note=_CLEANER_AT_START),
    _broker("log.cleaner.io.buffer.load.factor", _T.DOUBLE, 0.9, "How full the offset map may get.", minimum=0,
            note=_CLEANER_AT_START),
    _broker("log.cleaner.io.max.bytes.per.second", _T.DOUBLE, DOUBLE_MAX,
            "Bytes per second the cleaner threads may read and write together.", minimum=0, note=_CLEANER_AT_START),
)

#: Every broker setting this broker knows, by name: its own, then the topic defaults (``log.retention.ms``...).
BROKER_CONFIG_DEFS: dict[str, ConfigDef] = {d.name: d for d in (*_BROKER_SETTINGS, *_topic_defaults())}

#: The broker settings that may change at run time: the topic defaults, by the first of their names.
DYNAMIC_BROKER_CONFIGS: frozenset[str] = frozenset(name for name, d in BROKER_CONFIG_DEFS.items() if d.dynamic)


# -- the README's tables -----------------------------------------------------------------------------

#: The README's tables of settings, by the name their markers give: a row per topic config (with its broker
#: synonyms) or broker setting.
README_TABLES: dict[str, tuple[str, ...]] = {
    "oauthbearer": (
        "sasl.oauthbearer.jwks.endpoint.url", "sasl.oauthbearer.jwks.endpoint.refresh.ms",
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
        "sasl.oauthbearer.expected.audience", "sasl.oauthbearer.allow.unverified.audience",
        "sasl.oauthbearer.expected.issuer", "sasl.oauthbearer.allow.unverified.issuer",
        "sasl.oauthbearer.clock.skew.seconds", "sasl.oauthbearer.sub.claim.name", "sasl.oauthbearer.scope.claim.name",
    ),
    "retention and cleaner": (
        "retention.ms", "retention.bytes", "log.retention.check.interval.ms", "segment.bytes", "segment.ms",
        "segment.jitter.ms", "file.delete.delay.ms", "cleanup.policy", "log.cleaner.enable", "log.cleaner.threads",
        "log.cleaner.backoff.ms", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.size",
        "log.cleaner.io.buffer.load.factor", "log.cleaner.io.max.bytes.per.second", "delete.retention.ms",
        "min.compaction.lag.ms", "max.compaction.lag.ms", "min.cleanable.dirty.ratio",
    ),
    "quotas": (
        "quota.window.num", "quota.window.size.seconds", "controller.quota.window.num",
        "controller.quota.window.size.seconds", "max.connections", "max.connections.per.ip",
        "max.connections.per.ip.overrides", "max.connection.creation.rate",
    ),
    "share groups": (
        "group.share.session.timeout.ms", "group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms",
        "group.share.heartbeat.interval.ms", "group.share.min.heartbeat.interval.ms",
        "group.share.max.heartbeat.interval.ms", "group.share.max.size", "group.share.assignors",
        "group.share.assignment.interval.ms", "group.share.assignor.offload.enable",
        "group.share.initialize.retry.interval.ms", "group.share.record.lock.duration.ms",
        "group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms",
        "group.share.delivery.count.limit", "group.share.partition.max.record.locks", "group.share.max.share.sessions",
    ),
    "internal topics": (
        "offsets.topic.num.partitions", "offsets.topic.replication.factor", "offsets.topic.segment.bytes",
        "offsets.topic.compression.codec", "offsets.load.buffer.size", "offsets.retention.minutes",
        "offsets.retention.check.interval.ms", "offsets.commit.timeout.ms", "offset.metadata.max.bytes",
        "transaction.state.log.num.partitions", "transaction.state.log.replication.factor",
        "transaction.state.log.min.isr", "transaction.state.log.segment.bytes",
        "transaction.state.log.load.buffer.size", "share.coordinator.state.topic.num.partitions",
        "share.coordinator.state.topic.replication.factor", "share.coordinator.state.topic.min.isr",
        "share.coordinator.state.topic.segment.bytes", "share.coordinator.load.buffer.size",
        "share.coordinator.snapshot.update.records.per.snapshot", "share.coordinator.write.timeout.ms",
        "share.coordinator.state.topic.prune.interval.ms", "share.coordinator.cold.partition.snapshot.interval.ms",
    ),
}

_TABLE_START = re.compile(r"^(?P<indent> *)<!-- settings table: (?P<name>[a-z ]+) \(generated from "
                          r"storage/config_defs\.py\) -->$")
_TABLE_END = "<!-- end of settings table -->"


def _default_doc(d: ConfigDef) -> str:
    if d.default_doc is not None:
        text = d.default_doc
    elif d.cluster_default is not None:
        single, cluster = format_value(d.default, d.type), format_value(d.cluster_default, d.type)
        text = f"{single} on a single node, {cluster} in a cluster"
    elif d.default in (LONG_MAX, DOUBLE_MAX):
        text = "unlimited"
    elif d.default is None:
        text = "none"
    else:
        text = format_value(d.default, d.type) or ""
    return f"{text}; {d.note}" if d.note else text


def readme_table(names: Iterable[str]) -> list[str]:
    """The Markdown rows of a table of settings: a topic config is listed under its broker synonyms, with the
    topic config in brackets (it overrides the broker's default for one topic)."""
    definitions = [TOPIC_CONFIG_DEFS.get(name) or BROKER_CONFIG_DEFS[name] for name in names]
    header = "property (topic config)" if any(d.synonyms for d in definitions) else "property"
    rows = [f"| {header} | what it does | default |", "| --- | --- | --- |"]
    for d in definitions:
        if d.synonyms:
            first = d.synonyms[0][0]
            others = [synonym[len(first.rsplit(".", 1)[0]):] if synonym.startswith(first.rsplit(".", 1)[0] + ".")
                      else synonym for synonym, _ in d.synonyms[1:]]
            names_column = ", ".join(f"`{n}`" for n in (first, *others)) + f" (`{d.name}`)"
        else:
            names_column = f"`{d.name}`"
        rows.append(f"| {names_column} | {d.doc} | {_default_doc(d)} |")
    return rows


def render_readme(text: str) -> str:
    """``text`` (the README) with each table of settings between its markers written from the catalog."""
    out: list[str] = []
    lines = iter(text.splitlines())
    for line in lines:
        out.append(line)
        start = _TABLE_START.match(line)
        if start is None:
            continue
        for skipped in lines:
            if skipped.strip() == _TABLE_END:
                break
        else:
            raise ValueError(f"README: the settings table {start['name']!r} has no end marker")
        indent = start["indent"]
        out += ["", *(indent + row for row in readme_table(README_TABLES[start["name"]])), "", indent + _TABLE_END]
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


if __name__ == "__main__":  # python -m trafka.storage.config_defs README.md: rewrite its tables of settings
    from pathlib import Path

    for argument in sys.argv[1:]:
        path = Path(argument)
        path.write_text(render_readme(path.read_text(encoding="utf-8")), encoding="utf-8")
