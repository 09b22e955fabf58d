"""Topics across restarts (the catalog and the logs on disk agree again after an interrupted delete),
and topic changes made while other clients are served."""
from __future__ import annotations

from pathlib import Path

import trio

from trafka.broker.tests.conftest import start_broker
from trafka.broker.tests.test_produce_fetch import create_topic, fetch, produce, values
from trafka.storage.topics import TopicCatalog
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import CreateTopicsRequest, DeleteTopicsRequest, MetadataRequest
from trafka.wire.records import SimpleRecord, build_batch


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


async def _create(client, name: str, partitions: int) -> int:
    topic = CreateTopicsRequest.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1)
    response = await client.request(CreateTopicsRequest(topics=[topic], timeout_ms=30000), 5)
    return response.topics[0].error_code


async def test_other_clients_are_served_while_a_large_topic_is_created(nursery: trio.Nursery, tmp_path: Path):
    """The files of a thousand partitions are made in a worker thread: another connection's request
    is answered meanwhile, and the topic appears once all of them are there."""
    running = await start_broker(nursery, tmp_path)
    creator, other = await running.client(), await running.client()
    answered: list[str] = []

    async def create_big() -> None:
        assert await _create(creator, "big", 1000) == ErrorCode.NONE
        answered.append("create")

    async def ask_meanwhile() -> None:
        with trio.fail_after(30):  # the files appear while the creation is under way
            while not (tmp_path / "big-0").exists():
                await trio.sleep(0.001)
        response = await other.request(MetadataRequest(topics=[], allow_auto_topic_creation=False), 9)
        assert response.topics == []
        metadata = await other.request(
            MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="big")], allow_auto_topic_creation=False),
            9,
        )
        assert metadata.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        answered.append("metadata")

    async with trio.open_nursery() as requests:
        requests.start_soon(create_big)
        requests.start_soon(ask_meanwhile)
    assert answered == ["metadata", "create"]
    assert len(running.broker.topics.get("big").partitions) == 1000
    assert len(list(tmp_path.glob("big-*"))) == 1000
    await running.close()


async def test_one_topic_from_concurrent_creations_of_the_same_name(nursery: trio.Nursery, tmp_path: Path):
    running = await start_broker(nursery, tmp_path)
    clients = [await running.client() for _ in range(3)]
    codes: list[int] = []
    auto_created: list[int] = []

    async def create(client) -> None:
        codes.append(await _create(client, "twice", 50))

    async def auto_create(client) -> None:
        await trio.sleep(0.01)
        wanted = [MetadataRequest.MetadataRequestTopic(name="twice")]
        metadata = await client.request(MetadataRequest(topics=wanted, allow_auto_topic_creation=True), 9)
        auto_created.append(len(metadata.topics[0].partitions))

    async with trio.open_nursery() as requests:
        requests.start_soon(create, clients[0])
        requests.start_soon(create, clients[1])
        requests.start_soon(auto_create, clients[2])
    assert sorted(codes) == [ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS]
    assert auto_created == [50]
    assert len(running.broker.topics.get("twice").partitions) == 50
    await running.close()


async def test_other_clients_are_served_while_a_large_topic_is_deleted(nursery: trio.Nursery, tmp_path: Path):
    running = await start_broker(nursery, tmp_path)
    deleter, other = await running.client(), await running.client()
    assert await _create(deleter, "big", 1000) == ErrorCode.NONE
    answered: list[str] = []

    async def delete_big() -> None:
        response = await deleter.request(DeleteTopicsRequest(topic_names=["big"], timeout_ms=30000), 5)
        assert response.responses[0].error_code == ErrorCode.NONE
        answered.append("delete")

    async def ask_meanwhile() -> None:
        with trio.fail_after(30):  # renamed directories appear while the deletion is under way
            while not list(tmp_path.glob("big-*-delete")):
                await trio.sleep(0.001)
        response = await other.request(MetadataRequest(topics=[], allow_auto_topic_creation=False), 9)
        assert response.topics == []
        answered.append("metadata")

    async with trio.open_nursery() as requests:
        requests.start_soon(delete_big)
        requests.start_soon(ask_meanwhile)
    assert answered == ["metadata", "delete"]
    assert not list(tmp_path.glob("big-*"))
    assert await _create(deleter, "big", 1) == ErrorCode.NONE
    await running.close()
