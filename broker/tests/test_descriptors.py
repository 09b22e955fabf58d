"""File descriptors: the budget of new partitions, and a topic creation that runs out of
descriptors anyway (another client took them meanwhile): that request alone fails, with
KAFKA_STORAGE_ERROR, nothing of the topic is left, and every other topic goes on serving."""
from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
import trio

from trafka.broker import descriptors
from trafka.broker.descriptors import BROKER_DESCRIPTORS, RESERVE, DescriptorBudget
from trafka.broker.tests.conftest import start_broker
from trafka.broker.topics import OFFSETS_TOPIC
from trafka.broker.tests.test_produce_fetch import create_topic, fetch, produce, values
from trafka.storage import open_files
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.messages import CreatePartitionsRequest, CreateTopicsRequest, MetadataRequest
from trafka.wire.records import SimpleRecord, build_batch


def test_budget_leaves_the_reserve_and_names_the_limit():
    budget = DescriptorBudget(limit=20_000, in_use=5_100, partitions=5_000)
    assert budget.left == 15_000 - RESERVE - BROKER_DESCRIPTORS
    budget.check(budget.left)
    with pytest.raises(KafkaError) as refused:
        budget.check(budget.left + 1)
    assert refused.value.code == ErrorCode.POLICY_VIOLATION
    message = refused.value.message
    assert f"Creating {budget.left + 1} partitions" in message
    assert f"has {budget.left} left of its limit of 20000 (ulimit -n): its 5000 partitions hold 1 each" in message
    with pytest.raises(KafkaError) as refused:
        budget.check(budget.left - 49, kept_for_offsets=50)
    assert f"has {budget.left - 50} left" in refused.value.message
    assert "and 50 for the consumer offsets topic to come" in refused.value.message
    budget.check(budget.left - 50, kept_for_offsets=50)
    # connections come out of the reserve, until the process holds more than it accounts for
    assert DescriptorBudget(limit=20_000, in_use=5_400, partitions=5_000).left == budget.left
    assert DescriptorBudget(limit=20_000, in_use=19_900, partitions=5_000).left == 36
    assert DescriptorBudget(limit=100, in_use=90, partitions=0).left == 0


def test_descriptors_in_use_counts_this_process():
    before = descriptors.descriptors_in_use()
    fd = os.open(os.devnull, os.O_RDONLY)
    try:
        assert descriptors.descriptors_in_use() == before + 1
    finally:
        os.close(fd)
    assert descriptors.descriptor_limit() > 0


def _run_out_of_descriptors_after(count: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Segment files fail to open with EMFILE after ``count`` more have opened."""
    real_init = open_files.LogFile.__init__
    opened = 0

    def open_or_run_out(self, path, *, writable):
        nonlocal opened
        opened += 1
        if opened > count:
            raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))
        real_init(self, path, writable=writable)

    monkeypatch.setattr(open_files.LogFile, "__init__", open_or_run_out)


async def _create(client, name: str, partitions: int, *, validate_only: bool = False):
    topic = CreateTopicsRequest.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1)
    request = CreateTopicsRequest(topics=[topic], timeout_ms=30000, validate_only=validate_only)
    return (await client.request(request, 5)).topics[0]


async def test_partitions_past_the_budget_are_refused_whole(
    nursery: trio.Nursery, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    running = await start_broker(nursery, tmp_path)
    client = await running.client()
    await create_topic(client, "kept", partitions=2)
    # room for 10 more partitions, and for the 50 of __consumer_offsets, still to come
    limit = BROKER_DESCRIPTORS + 2 + RESERVE + 10 + 50
    assert descriptors.descriptors_in_use() + descriptors.MARGIN < limit - 60
    monkeypatch.setattr(descriptors, "descriptor_limit", lambda: limit)
    for validate_only in (True, False):
        refused = await _create(client, "wide", 11, validate_only=validate_only)
        assert refused.error_code == ErrorCode.POLICY_VIOLATION
        assert f"limit of {limit} (ulimit -n)" in refused.error_message
    grow = CreatePartitionsRequest.CreatePartitionsTopic(name="kept", count=13, assignments=None)
    response = await client.request(CreatePartitionsRequest(topics=[grow], timeout_ms=30000), 3)
    assert response.results[0].error_code == ErrorCode.POLICY_VIOLATION
    assert running.broker.topics.get("wide") is None and not list(tmp_path.glob("wide-*"))
    assert len(running.broker.topics.get("kept").partitions) == 2
    assert (await _create(client, "narrow", 5)).error_code == ErrorCode.NONE
    assert (await _create(client, "more", 6)).error_code == ErrorCode.POLICY_VIOLATION
    # the group coordinator's topic still fits
    await running.broker.topics.create(OFFSETS_TOPIC, 50)
    await running.close()


async def test_running_out_of_descriptors_while_creating_fails_that_topic_alone(
    nursery: trio.Nursery, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    running = await start_broker(nursery, tmp_path)
    client = await running.client()
    await create_topic(client, "kept", partitions=2)
    await produce(client, "kept", build_batch([SimpleRecord(None, b"before")]))

    _run_out_of_descriptors_after(10, monkeypatch)
    failed = await _create(client, "unlucky", 50)
    monkeypatch.undo()
    assert failed.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert "Too many open files" in failed.error_message

    # the other topic serves; the failed one is not there, and can be created again
    await produce(client, "kept", build_batch([SimpleRecord(None, b"after")]))
    assert values((await fetch(client, "kept", 0)).records) == [(0, b"before"), (1, b"after")]
    metadata = await client.request(
        MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="unlucky")], allow_auto_topic_creation=False),
        9,
    )
    assert metadata.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert (await _create(client, "unlucky", 50)).error_code == ErrorCode.NONE
    assert len(running.broker.topics.get("unlucky").partitions) == 50
    await running.close()


async def test_a_topic_that_ran_out_of_descriptors_is_gone_after_a_restart(
    nursery: trio.Nursery, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    running = await start_broker(nursery, tmp_path)
    client = await running.client()
    await create_topic(client, "kept")
    _run_out_of_descriptors_after(10, monkeypatch)
    assert (await _create(client, "unlucky", 50)).error_code == ErrorCode.KAFKA_STORAGE_ERROR
    monkeypatch.undo()
    await running.close()

    running = await start_broker(nursery, tmp_path)
    assert running.broker.topics.get("unlucky") is None
    assert running.broker.topics.get("kept") is not None
    assert not list(tmp_path.glob("unlucky-*"))
    await running.close()


def test_a_low_map_count_is_warned_about(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(descriptors, "max_map_count", lambda: 65530)
    assert descriptors.map_count_warning(20_000) is None
    warning = descriptors.map_count_warning(50_000)
    assert "vm.max_map_count is 65530" in warning and "about 32265 of the 50000 partitions" in warning
    monkeypatch.setattr(descriptors, "max_map_count", lambda: None)
    assert descriptors.map_count_warning(50_000) is None
