"""Per-log configuration: Kafka's topic-level configs, with Kafka's names, defaults and ranges.

``LogConfig.from_properties`` reads topic config names (``segment.bytes``, ``retention.ms``, ...)
as found in CreateTopics/AlterConfigs requests and in the topic catalog;
``LogConfig.from_broker_properties`` reads the broker-wide defaults from ``server.properties``
names (``log.segment.bytes``, ``log.retention.hours``, ...). ``to_properties`` gives every topic
config back as strings, for DescribeConfigs.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from trafka.wire.errors import ErrorCode, KafkaError

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1

CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"
CLEANUP_POLICY_DELETE = "delete"
CLEANUP_POLICY_COMPACT = "compact"
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10485760
    index_interval_bytes: int = 4096
    flush_interval_messages: int = LONG_MAX
    flush_interval_ms: int = LONG_MAX
    max_message_bytes: int = 1048588
    message_timestamp_type: str = CREATE_TIME
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = 3_600_000  # an hour, as in Kafka 4
    cleanup_policy: str = CLEANUP_POLICY_DELETE
    retention_ms: int = 604800000
    retention_bytes: int = -1
    file_delete_delay_ms: int = 60000
    delete_retention_ms: int = 86400000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    compression_type: str = "producer"
    preallocate: bool = False

    @property
    def log_append_time(self) -> bool:
        """Whether the broker stamps its own time on every batch (``LogAppendTime`` topics)."""
        return self.message_timestamp_type == LOG_APPEND_TIME

    @property
    def compact(self) -> bool:
        return CLEANUP_POLICY_COMPACT in self.cleanup_policy.split(",")

    @property
    def delete(self) -> bool:
        return CLEANUP_POLICY_DELETE in self.cleanup_policy.split(",")

    @classmethod
    def from_properties(cls, props: Mapping[str, str], base: LogConfig | None = None) -> LogConfig:
        """``base`` (or the defaults) overridden by topic configs named as Kafka names them.

        Raises ``KafkaError(INVALID_CONFIG)`` for an unknown name or an invalid value.
        """
        changes: dict[str, Any] = {}
        for name, value in props.items():
            spec = TOPIC_CONFIGS.get(name)
            if spec is None:
                if name in ACCEPTED_UNUSED_TOPIC_CONFIGS:
                    continue
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {name}")
            changes[spec.field] = spec.parse(name, value)
        return dataclasses.replace(base if base is not None else cls(), **changes)

    @classmethod
    def from_broker_properties(cls, props: Mapping[str, str]) -> LogConfig:
        """The broker-wide default log config from ``server.properties`` names.

        Names that are not log configs are ignored; time settings follow Kafka's precedence
        (``log.retention.ms`` over ``log.retention.minutes`` over ``log.retention.hours``). A bad value
        is ``KafkaError(INVALID_CONFIG)`` naming the broker property as given.
        """
        topic_props: dict[str, str] = {}
        for broker_name, topic_name in BROKER_TO_TOPIC_CONFIG.items():
            if broker_name in props:
                TOPIC_CONFIGS[topic_name].parse(broker_name, props[broker_name])  # a refusal names the broker's
                topic_props[topic_name] = props[broker_name]
        for topic_name, alternatives in BROKER_TIME_CONFIGS.items():
            for broker_name, unit_ms in alternatives:
                if broker_name in props:
                    check_broker_log_property(broker_name, props[broker_name])
                    value = _parse_int(broker_name, props[broker_name])
                    topic_props[topic_name] = str(value if value < 0 else value * unit_ms)
                    break
        return cls.from_properties(topic_props)

    def to_properties(self) -> dict[str, str]:
        """Every topic config by its Kafka name, as the strings DescribeConfigs reports."""
        out: dict[str, str] = {}
        for name, spec in TOPIC_CONFIGS.items():
            value = getattr(self, spec.field)
            out[name] = str(value).lower() if isinstance(value, bool) else str(value)
        return out


@dataclass(frozen=True, slots=True)
class _ConfigSpec:
    field: str
    parse_value: Callable[[str, str], Any]
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] | None = None

    def parse(self, name: str, raw: str) -> Any:
        value = self.parse_value(name, str(raw).strip())
        if self.minimum is not None and value < self.minimum:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Invalid value {raw} for configuration {name}: "
                             f"Value must be at least {self.minimum}")
        if self.maximum is not None and value > self.maximum:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Invalid value {raw} for configuration {name}: "
                             f"Value must be no more than {self.maximum}")
        if self.choices is not None:
            # An empty cleanup.policy (neither delete nor compact) is allowed, as in Kafka 4.1+.
            items = [item for item in value.split(",") if item] if self.field == "cleanup_policy" else [value]
            for item in items:
                if item not in self.choices:
                    raise KafkaError(ErrorCode.INVALID_CONFIG, f"Invalid value {raw} for configuration "
                                     f"{name}: String must be one of: {', '.join(self.choices)}")
        return value


def _parse_int(name: str, raw: str, type_name: str = "LONG") -> int:
    try:
        return int(raw)
    except ValueError:
        raise _not_a_number(name, raw, type_name) from None


def _not_a_number(name: str, raw: str, type_name: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_CONFIG, f"Invalid value {raw} for configuration {name}: "
                      f"Not a number of type {type_name}")


def _parse_int32(name: str, raw: str) -> int:
    value = _parse_int(name, raw, "INT")
    if not -(2**31) <= value <= INT_MAX:
        raise _not_a_number(name, raw, "INT")
    return value


def _parse_int64(name: str, raw: str) -> int:
    value = _parse_int(name, raw, "LONG")
    if not -(2**63) <= value <= LONG_MAX:
        raise _not_a_number(name, raw, "LONG")
    return value


def _parse_double(name: str, raw: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise _not_a_number(name, raw, "DOUBLE") from None


def _parse_bool(name: str, raw: str) -> bool:
    lowered = raw.lower()
    if lowered not in ("true", "false"):
        raise KafkaError(ErrorCode.INVALID_CONFIG,
                         f"Invalid value {raw} for configuration {name}: Expected value to be either true or false")
    return lowered == "true"


def _parse_string(name: str, raw: str) -> str:
    return raw


def _parse_list(name: str, raw: str) -> str:
    return ",".join(item.strip().lower() for item in raw.split(",") if item.strip())


TOPIC_CONFIGS: dict[str, _ConfigSpec] = {
    "segment.bytes": _ConfigSpec("segment_bytes", _parse_int32, minimum=14),
    "segment.ms": _ConfigSpec("segment_ms", _parse_int64, minimum=1),
    "segment.jitter.ms": _ConfigSpec("segment_jitter_ms", _parse_int64, minimum=0),
    "segment.index.bytes": _ConfigSpec("segment_index_bytes", _parse_int32, minimum=4),
    "index.interval.bytes": _ConfigSpec("index_interval_bytes", _parse_int32, minimum=0),
    "flush.messages": _ConfigSpec("flush_interval_messages", _parse_int64, minimum=1),
    "flush.ms": _ConfigSpec("flush_interval_ms", _parse_int64, minimum=0),
    "max.message.bytes": _ConfigSpec("max_message_bytes", _parse_int32, minimum=0),
    "message.timestamp.type": _ConfigSpec("message_timestamp_type", _parse_string,
                                          choices=(CREATE_TIME, LOG_APPEND_TIME)),
    "message.timestamp.before.max.ms": _ConfigSpec("message_timestamp_before_max_ms", _parse_int64, minimum=0),
    "message.timestamp.after.max.ms": _ConfigSpec("message_timestamp_after_max_ms", _parse_int64, minimum=0),
    "cleanup.policy": _ConfigSpec("cleanup_policy", _parse_list,
                                  choices=(CLEANUP_POLICY_COMPACT, CLEANUP_POLICY_DELETE)),
    "retention.ms": _ConfigSpec("retention_ms", _parse_int64, minimum=-1),
    "retention.bytes": _ConfigSpec("retention_bytes", _parse_int64),
    "file.delete.delay.ms": _ConfigSpec("file_delete_delay_ms", _parse_int64, minimum=0),
    "delete.retention.ms": _ConfigSpec("delete_retention_ms", _parse_int64, minimum=0),
    "min.compaction.lag.ms": _ConfigSpec("min_compaction_lag_ms", _parse_int64, minimum=0),
    "max.compaction.lag.ms": _ConfigSpec("max_compaction_lag_ms", _parse_int64, minimum=1),
    "min.cleanable.dirty.ratio": _ConfigSpec("min_cleanable_dirty_ratio", _parse_double, minimum=0, maximum=1),
    "min.insync.replicas": _ConfigSpec("min_insync_replicas", _parse_int32, minimum=1),
    "unclean.leader.election.enable": _ConfigSpec("unclean_leader_election_enable", _parse_bool),
    "compression.type": _ConfigSpec("compression_type", _parse_string, choices=COMPRESSION_TYPES),
    "preallocate": _ConfigSpec("preallocate", _parse_bool),
}

# Valid Kafka topic configs that have no effect here; accepted so that tools setting them work.
ACCEPTED_UNUSED_TOPIC_CONFIGS = frozenset({
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.zstd.level",
    "message.format.version",
    "message.timestamp.difference.max.ms",
    "message.downconversion.enable",
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
    "remote.storage.enable",
    "local.retention.ms",
    "local.retention.bytes",
    "remote.log.copy.disable",
    "remote.log.delete.on.disable",
})

BROKER_TO_TOPIC_CONFIG: dict[str, str] = {
    "log.segment.bytes": "segment.bytes",
    "log.index.size.max.bytes": "segment.index.bytes",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.flush.interval.messages": "flush.messages",
    "message.max.bytes": "max.message.bytes",
    "log.message.timestamp.type": "message.timestamp.type",
    "log.message.timestamp.before.max.ms": "message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms": "message.timestamp.after.max.ms",
    "log.cleanup.policy": "cleanup.policy",
    "log.retention.bytes": "retention.bytes",
    "log.segment.delete.delay.ms": "file.delete.delay.ms",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms": "max.compaction.lag.ms",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
    "min.insync.replicas": "min.insync.replicas",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "compression.type": "compression.type",
    "log.preallocate": "preallocate",
}

_HOUR_MS = 3600 * 1000
BROKER_TIME_CONFIGS: dict[str, tuple[tuple[str, int], ...]] = {
    "segment.ms": (("log.roll.ms", 1), ("log.roll.hours", _HOUR_MS)),
    "segment.jitter.ms": (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", _HOUR_MS)),
    "retention.ms": (("log.retention.ms", 1), ("log.retention.minutes", 60 * 1000),
                     ("log.retention.hours", _HOUR_MS)),
    "flush.ms": (("log.flush.interval.ms", 1), ("log.flush.scheduler.interval.ms", 1)),
}

#: The broker properties that are topic defaults and may change at run time, by broker name: of the time
#: settings, the one in milliseconds (``log.retention.ms``, not ``log.retention.hours``), as in Kafka.
BROKER_LOG_PROPERTIES: frozenset[str] = frozenset(BROKER_TO_TOPIC_CONFIG) | frozenset(
    alternatives[0][0] for alternatives in BROKER_TIME_CONFIGS.values()
)


def check_broker_log_property(name: str, raw: str) -> None:
    """Raises ``KafkaError(INVALID_CONFIG)``, naming the broker property, for a value the topic default
    ``name`` cannot take."""
    topic_name = BROKER_TO_TOPIC_CONFIG.get(name)
    if topic_name is not None:
        TOPIC_CONFIGS[topic_name].parse(name, raw)
        return
    for topic_name, alternatives in BROKER_TIME_CONFIGS.items():
        for broker_name, unit_ms in alternatives:
            if broker_name == name:
                value = _parse_int64(name, str(raw).strip())
                TOPIC_CONFIGS[topic_name].parse(name, str(value if value < 0 else value * unit_ms))
                return
    raise KeyError(name)
