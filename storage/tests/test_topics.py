"""The topic catalog (persisted topic ids, partition counts, config overrides) and topic configs."""
from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from trafka.storage.config import LogConfig
from trafka.storage.topics import (
    TOPIC_CATALOG_FILE,
    TopicCatalog,
    TopicRecord,
    new_topic_id,
    topic_id_from_string,
    topic_id_to_string,
)
from trafka.wire.errors import ErrorCode, KafkaError


def test_topic_id_text_form_is_kafkas() -> None:
    assert topic_id_to_string(uuid.UUID(int=0)) == "AAAAAAAAAAAAAAAAAAAAAA"
    assert topic_id_to_string(uuid.UUID(int=1)) == "AAAAAAAAAAAAAAAAAAAAAQ"
    topic_id = uuid.uuid4()
    assert topic_id_from_string(topic_id_to_string(topic_id)) == topic_id
    with pytest.raises(ValueError):
        topic_id_from_string("AAAA")


def test_new_topic_ids_are_valid_kafka_ids() -> None:
    for _ in range(200):
        topic_id = new_topic_id()
        assert topic_id.int > 1
        assert not topic_id_to_string(topic_id).startswith("-")


def test_catalog_survives_a_restart(tmp_path: Path) -> None:
    catalog = TopicCatalog(tmp_path)
    orders_id, audit_id = uuid.uuid4(), uuid.uuid4()
    catalog.add(TopicRecord("orders", orders_id, 3, {"retention.ms": "1000"}))
    catalog.add(TopicRecord("audit.log-v2", audit_id, 1))
    catalog.set_partitions("orders", 5)
    catalog.set_configs("audit.log-v2", {"cleanup.policy": "compact"})

    reloaded = TopicCatalog(tmp_path)
    assert reloaded.topics == catalog.topics
    assert reloaded.get("orders") == TopicRecord("orders", orders_id, 5, {"retention.ms": "1000"})
    assert reloaded.by_id(audit_id).configs == {"cleanup.policy": "compact"}
    document = json.loads((tmp_path / TOPIC_CATALOG_FILE).read_text())
    assert document["version"] == 1
    assert [t["name"] for t in document["topics"]] == ["audit.log-v2", "orders"]

    reloaded.remove("orders")
    assert "orders" not in TopicCatalog(tmp_path)
    assert len(TopicCatalog(tmp_path)) == 1


def test_a_change_saved_later_and_an_older_state_never_replaces_a_newer_one(tmp_path: Path) -> None:
    catalog = TopicCatalog(tmp_path)
    catalog.add(TopicRecord("big", uuid.uuid4(), 1000), save=False)
    assert "big" not in TopicCatalog(tmp_path)
    with_big = catalog.state()
    catalog.set_configs("big", {"retention.ms": "1000"})  # saved at once
    catalog.write(with_big)  # taken before: dropped
    assert TopicCatalog(tmp_path).get("big").configs == {"retention.ms": "1000"}
    catalog.remove("big", save=False)
    catalog.write(catalog.state())
    assert "big" not in TopicCatalog(tmp_path)


def test_catalog_errors(tmp_path: Path) -> None:
    catalog = TopicCatalog(tmp_path / "fresh")
    topic_id = uuid.uuid4()
    catalog.add(TopicRecord("t", topic_id, 2))
    with pytest.raises(KafkaError) as e:
        catalog.add(TopicRecord("t", uuid.uuid4(), 2))
    assert e.value.code == ErrorCode.TOPIC_ALREADY_EXISTS
    with pytest.raises(KafkaError) as e:
        catalog.set_partitions("t", 1)
    assert e.value.code == ErrorCode.INVALID_PARTITIONS
    with pytest.raises(KafkaError) as e:
        catalog.remove("nope")
    assert e.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    with pytest.raises(KafkaError) as e:
        catalog.add(TopicRecord("u", uuid.uuid4(), 0))
    assert e.value.code == ErrorCode.INVALID_PARTITIONS


def test_unreadable_catalog_is_an_error_not_an_empty_catalog(tmp_path: Path) -> None:
    (tmp_path / TOPIC_CATALOG_FILE).write_text("{not json")
    with pytest.raises(ValueError, match="unreadable topic catalog"):
        TopicCatalog(tmp_path)


def test_log_config_from_topic_properties() -> None:
    base = LogConfig(segment_bytes=4096)
    config = LogConfig.from_properties(
        {"retention.ms": "-1", "cleanup.policy": "compact, Delete", "message.timestamp.type": "LogAppendTime",
         "unclean.leader.election.enable": "TRUE", "message.format.version": "3.0"},
        base,
    )
    assert config.segment_bytes == 4096
    assert config.retention_ms == -1
    assert config.compact and config.delete
    assert config.log_append_time
    assert config.unclean_leader_election_enable is True
    assert LogConfig().delete and not LogConfig().compact


@pytest.mark.parametrize("props", [
    {"segment.bytes": "10"},
    {"segment.bytes": "abc"},
    {"segment.bytes": str(2**31)},
    {"message.timestamp.type": "WallClock"},
    {"cleanup.policy": "delete,shred"},
    {"min.cleanable.dirty.ratio": "1.5"},
    {"no.such.config": "1"},
])
def test_log_config_rejects_invalid_values(props: dict[str, str]) -> None:
    with pytest.raises(KafkaError) as e:
        LogConfig.from_properties(props)
    assert e.value.code == ErrorCode.INVALID_CONFIG


def test_log_config_from_broker_properties() -> None:
    config = LogConfig.from_broker_properties({
        "log.segment.bytes": "1048576",
        "log.retention.hours": "1",
        "log.roll.ms": "60000",
        "log.roll.hours": "5",
        "message.max.bytes": "2000000",
        "broker.id": "7",
    })
    assert config.segment_bytes == 1048576
    assert config.retention_ms == 3600000
    assert config.segment_ms == 60000
    assert config.max_message_bytes == 2000000
    assert LogConfig.from_broker_properties({"log.retention.hours": "-1"}).retention_ms == -1


def test_log_config_to_properties_round_trips() -> None:
    config = LogConfig(segment_bytes=12345, preallocate=True, cleanup_policy="compact")
    props = config.to_properties()
    assert props["segment.bytes"] == "12345"
    assert props["preallocate"] == "true"
    assert props["max.message.bytes"] == "1048588"
    assert LogConfig.from_properties(props) == config
