"""Per-log configuration: Kafka's topic-level configs, as the catalog (``storage.config_defs``) defines them.

``LogConfig.from_properties`` reads topic config names (``segment.bytes``, ``retention.ms``, ...)
as found in CreateTopics/AlterConfigs requests and in the topic catalog;
``LogConfig.from_broker_properties`` reads the broker-wide defaults from ``server.properties``
names (``log.segment.bytes``, ``log.retention.hours``, ...). ``to_properties`` gives every topic
config back as strings, for DescribeConfigs. The fields' defaults, the names, ranges and refusals are
the catalog's.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trafka.storage.config_defs import (
    BROKER_CONFIG_DEFS,
    CLEANUP_POLICY_COMPACT,
    CLEANUP_POLICY_DELETE,
    LOG_APPEND_TIME,
    LONG_MAX,
    TOPIC_CONFIG_DEFS,
    format_value,
    parse_integer,
)
from trafka.wire.errors import ErrorCode, KafkaError

__all__ = ["LONG_MAX", "LogConfig", "check_broker_log_property"]

#: The topic configs a LogConfig holds, by name (the others are accepted and have no effect).
_FIELDS = {name: d for name, d in TOPIC_CONFIG_DEFS.items() if d.field is not None}


def _default(name: str) -> Any:
    return TOPIC_CONFIG_DEFS[name].default


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = _default("segment.bytes")
    segment_ms: int = _default("segment.ms")
    segment_jitter_ms: int = _default("segment.jitter.ms")
    segment_index_bytes: int = _default("segment.index.bytes")
    index_interval_bytes: int = _default("index.interval.bytes")
    flush_interval_messages: int = _default("flush.messages")
    flush_interval_ms: int = _default("flush.ms")
    max_message_bytes: int = _default("max.message.bytes")
    message_timestamp_type: str = _default("message.timestamp.type")
    message_timestamp_before_max_ms: int = _default("message.timestamp.before.max.ms")
    message_timestamp_after_max_ms: int = _default("message.timestamp.after.max.ms")
    cleanup_policy: str = _default("cleanup.policy")
    retention_ms: int = _default("retention.ms")
    retention_bytes: int = _default("retention.bytes")
    file_delete_delay_ms: int = _default("file.delete.delay.ms")
    delete_retention_ms: int = _default("delete.retention.ms")
    min_compaction_lag_ms: int = _default("min.compaction.lag.ms")
    max_compaction_lag_ms: int = _default("max.compaction.lag.ms")
    min_cleanable_dirty_ratio: float = _default("min.cleanable.dirty.ratio")
    min_insync_replicas: int = _default("min.insync.replicas")
    unclean_leader_election_enable: bool = _default("unclean.leader.election.enable")
    compression_type: str = _default("compression.type")
    preallocate: bool = _default("preallocate")

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
            definition = TOPIC_CONFIG_DEFS.get(name)
            if definition is None:
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {name}")
            if definition.field is not None:  # else accepted for compatibility, without effect
                changes[definition.field] = definition.parse(name, value)
        return dataclasses.replace(base if base is not None else cls(), **changes)

    @classmethod
    def from_broker_properties(cls, props: Mapping[str, str]) -> LogConfig:
        """The broker-wide default log config from ``server.properties`` names.

        Names that are not log configs are ignored; of a topic config's broker synonyms the first one set
        counts (``log.retention.ms`` over ``log.retention.minutes`` over ``log.retention.hours``). A bad value
        is ``KafkaError(INVALID_CONFIG)`` naming the broker property as given.
        """
        topic_props: dict[str, str] = {}
        for topic_name, definition in _FIELDS.items():
            for broker_name in definition.broker_synonyms:
                if broker_name in props:
                    topic_props[topic_name] = check_broker_log_property(broker_name, props[broker_name])
                    break
        return cls.from_properties(topic_props)

    def to_properties(self) -> dict[str, str]:
        """Every topic config this broker acts on by its Kafka name, as the strings DescribeConfigs reports."""
        return {name: format_value(getattr(self, definition.field)) for name, definition in _FIELDS.items()}


def check_broker_log_property(name: str, raw: str) -> str:
    """The value of the topic config that the broker setting ``name`` (a topic default: ``log.segment.bytes``,
    ``log.retention.hours``) gives, in the topic config's unit. Raises ``KafkaError(INVALID_CONFIG)``, naming
    the broker setting, for a value the topic config cannot take; ``KeyError`` for a name that is no topic
    default."""
    definition = BROKER_CONFIG_DEFS[name]
    if definition.default_of is None:
        raise KeyError(name)
    topic = TOPIC_CONFIG_DEFS[definition.default_of]
    if definition.unit_ms == 1:
        topic.parse(name, raw)
        return raw
    value = parse_integer(name, str(raw).strip())
    scaled = str(value if value < 0 else value * definition.unit_ms)
    topic.parse(name, scaled)
    return scaled
