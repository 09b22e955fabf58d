"""Topics across restarts: the catalog and the logs on disk agree again after an interrupted delete."""
from __future__ import annotations

from pathlib import Path

import trio

from broker.tests.conftest import start_broker
from broker.tests.test_produce_fetch import create_topic, fetch, produce, values
from storage.topics import TopicCatalog
from wire.records import SimpleRecord, build_batch


async def test_logs_of_a_topic_missing_from_the_catalog_are_deleted_at_start(nursery: trio.Nursery, tmp_path: Path):
    running = await start_broker(nursery, tmp_path)
    client = await running.client()
    await create_topic(client, "doomed", partitions=2)
    await produce(client, "doomed", build_batch([SimpleRecord(None, b"old")]))
    await running.close()
    # A stop between the catalog update and the directory removal of a DeleteTopics.
    TopicCatalog(tmp_path).remove("doomed")

    running = await start_broker(nursery, tmp_path)
    assert running.broker.topics.get("doomed") is None
    assert not list(tmp_path.glob("doomed-*"))
    client = await running.client()
    await create_topic(client, "doomed")
    await produce(client, "doomed", build_batch([SimpleRecord(None, b"new")]))
    assert values((await fetch(client, "doomed", 0)).records) == [(0, b"new")]
    await running.close()


async def test_topics_and_their_data_survive_a_restart(nursery: trio.Nursery, tmp_path: Path):
    running = await start_broker(nursery, tmp_path)
    client = await running.client()
    await create_topic(client, "kept", partitions=3, **{"retention.ms": "3600000"})
    await produce(client, "kept", build_batch([SimpleRecord(None, b"a"), SimpleRecord(None, b"b")]))
    topic_id = running.broker.topics.get("kept").topic_id
    await running.close()

    running = await start_broker(nursery, tmp_path)
    topic = running.broker.topics.get("kept")
    assert topic.topic_id == topic_id
    assert len(topic.partitions) == 3
    assert topic.partitions[0].log.config.retention_ms == 3_600_000
    client = await running.client()
    assert (await produce(client, "kept", build_batch([SimpleRecord(None, b"c")]))).base_offset == 2
    assert values((await fetch(client, "kept", 0)).records) == [(0, b"a"), (1, b"b"), (2, b"c")]
    await running.close()
