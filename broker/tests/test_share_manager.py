"""ShareFetch and ShareAcknowledge against an in-process broker over TCP: acquisition by several members, share
sessions and their epochs, acknowledgements persisted through the share coordinator, lock expiry on the timer,
long polling woken by appends and by releases, a session closed releasing its records, and the errors."""
from __future__ import annotations

import uuid

import pytest
import trio

from prometheus_client import generate_latest

from trafka.broker.tests.conftest import KafkaClient, RunningBroker, start_broker
from trafka.broker.tests.test_produce_fetch import create_topic, produce
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import ShareAcknowledgeRequest, ShareFetchRequest
from trafka.wire.records import SimpleRecord, build_batch, iter_batches

VERSION = 1
ACCEPT, RELEASE, REJECT = 1, 2, 3
LOCK_MS = 1000


@pytest.fixture
async def running(broker_factory) -> RunningBroker:
    return await broker_factory({"group.share.record.lock.duration.ms": str(LOCK_MS),
                                 "group.share.delivery.count.limit": "3"})


async def setup_topic(running: RunningBroker, client: KafkaClient, name: str, batches: list[int]) -> uuid.UUID:
    await create_topic(client, name)
    for count in batches:
        batch = build_batch([SimpleRecord(key=None, value=b"v%d" % i) for i in range(count)])
        partition = await produce(client, name, batch)
        assert partition.error_code == ErrorCode.NONE
    topic_id = running.broker.topics.get(name).topic_id
    # as the group coordinator does for the partitions it assigns
    await running.broker.share_persister().initialize("g", topic_id, 0, 0, 0)
    return topic_id


def fetch_request(member: str, epoch: int, topic_id: uuid.UUID | None, *, acks=(), max_wait_ms: int = 0,
                  max_records: int = 500, group: str = "g", forget: bool = False) -> ShareFetchRequest:
    topics = []
    if topic_id is not None and not forget:
        topics = [ShareFetchRequest.FetchTopic(topic_id=topic_id, partitions=[ShareFetchRequest.FetchPartition(
            partition_index=0, acknowledgement_batches=[ShareFetchRequest.AcknowledgementBatch(
                first_offset=f, last_offset=last, acknowledge_types=list(t)) for f, last, t in acks])])]
    forgotten = [ShareFetchRequest.ForgottenTopic(topic_id=topic_id, partitions=[0])] if forget else []
    return ShareFetchRequest(group_id=group, member_id=member, share_session_epoch=epoch, max_wait_ms=max_wait_ms,
                             min_bytes=1, max_bytes=1 << 20, max_records=max_records, batch_size=max_records,
                             topics=topics, forgotten_topics_data=forgotten)


def ack_request(member: str, epoch: int, topic_id: uuid.UUID, acks, group: str = "g") -> ShareAcknowledgeRequest:
    return ShareAcknowledgeRequest(group_id=group, member_id=member, share_session_epoch=epoch, topics=[
        ShareAcknowledgeRequest.AcknowledgeTopic(topic_id=topic_id, partitions=[
            ShareAcknowledgeRequest.AcknowledgePartition(partition_index=0, acknowledgement_batches=[
                ShareAcknowledgeRequest.AcknowledgementBatch(first_offset=f, last_offset=last,
                                                             acknowledge_types=list(t)) for f, last, t in acks])])])


def acquired(response) -> list[tuple[int, int, int]]:
    assert response.error_code == ErrorCode.NONE, response
    return [(r.first_offset, r.last_offset, r.delivery_count)
            for t in response.responses for p in t.partitions for r in p.acquired_records]


def offsets_sent(response) -> list[int]:
    data = b"".join(bytes(p.records or b"") for t in response.responses for p in t.partitions)
    return [r.offset for batch in iter_batches(data) for r in batch.records()]


async def test_members_share_the_records_and_acknowledge_them(running):
    client = await running.client()
    topic_id = await setup_topic(running, client, "t", [3, 2])
    first = await client.request(fetch_request("m1", 0, topic_id, max_records=1), VERSION)
    assert acquired(first) == [(0, 2, 1)]  # a whole log batch, though one record was asked for
    assert offsets_sent(first) == [0, 1, 2]
    assert first.acquisition_lock_timeout_ms == LOCK_MS
    second = await client.request(fetch_request("m2", 0, topic_id), VERSION)
    assert acquired(second) == [(3, 4, 1)]
    assert offsets_sent(second) == [3, 4]
    nothing = await client.request(fetch_request("m2", 1, topic_id), VERSION)
    assert acquired(nothing) == []
    # m2 releases, m1 accepts (piggy-backed on its next fetch, which then gets what m2 released)
    released = await client.request(ack_request("m2", 2, topic_id, [(3, 4, [RELEASE])]), VERSION)
    assert released.responses[0].partitions[0].error_code == ErrorCode.NONE
    again = await client.request(fetch_request("m1", 1, topic_id, acks=[(0, 2, [ACCEPT])]), VERSION)
    assert again.responses[0].partitions[0].acknowledge_error_code == ErrorCode.NONE
    assert acquired(again) == [(3, 4, 2)]
    sp = (await running.broker.share_manager().entry("g", running.broker.topics.get("t").partitions[0]))
    assert sp.share_partition.start_offset == 3
    state = await running.broker.share_persister().read("g", topic_id, 0, 0)
    assert state.start_offset == 3


async def test_acknowledgement_errors(running):
    client = await running.client()
    topic_id = await setup_topic(running, client, "t", [5])
    assert acquired(await client.request(fetch_request("m1", 0, topic_id), VERSION)) == [(0, 4, 1)]
    await client.request(fetch_request("m2", 0, topic_id), VERSION)
    # another member's records
    other = await client.request(ack_request("m2", 1, topic_id, [(0, 4, [ACCEPT])]), VERSION)
    assert other.responses[0].partitions[0].error_code == ErrorCode.INVALID_RECORD_STATE
    # overlapping batches: the second acknowledgement of offset 2 fails them all
    bad = await client.request(ack_request("m1", 1, topic_id, [(0, 2, [ACCEPT]), (2, 4, [ACCEPT])]), VERSION)
    assert bad.responses[0].partitions[0].error_code == ErrorCode.INVALID_RECORD_STATE
    past = await client.request(ack_request("m1", 2, topic_id, [(3, 7, [ACCEPT])]), VERSION)
    assert past.responses[0].partitions[0].error_code == ErrorCode.INVALID_REQUEST
    ok = await client.request(ack_request("m1", 3, topic_id, [(0, 3, [REJECT])]), VERSION)
    assert ok.responses[0].partitions[0].error_code == ErrorCode.NONE
    twice = await client.request(ack_request("m1", 4, topic_id, [(4, 4, [ACCEPT]), (4, 4, [ACCEPT])]), VERSION)
    assert twice.responses[0].partitions[0].error_code == ErrorCode.INVALID_RECORD_STATE
    again = await client.request(ack_request("m1", 5, topic_id, [(0, 4, [ACCEPT])]), VERSION)  # 0-3 done with
    assert again.responses[0].partitions[0].error_code == ErrorCode.NONE


async def test_share_session_epochs(running):
    client = await running.client()
    topic_id = await setup_topic(running, client, "t", [1])
    no_session = await client.request(fetch_request("m", 1, topic_id), VERSION)
    assert no_session.error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
    assert (await client.request(fetch_request("m", 0, topic_id), VERSION)).error_code == ErrorCode.NONE
    wrong = await client.request(fetch_request("m", 5, topic_id), VERSION)
    assert wrong.error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    assert (await client.request(fetch_request("m", 1, topic_id), VERSION)).error_code == ErrorCode.NONE
    opening_ack = await client.request(ack_request("m", 0, topic_id, [(0, 0, [ACCEPT])]), VERSION)
    assert opening_ack.error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    acks_on_open = await client.request(fetch_request("m", 0, topic_id, acks=[(0, 0, [ACCEPT])]), VERSION)
    assert acks_on_open.error_code == ErrorCode.INVALID_REQUEST
    closed = await client.request(fetch_request("m", -1, None), VERSION)
    assert closed.error_code == ErrorCode.NONE
    gone = await client.request(fetch_request("m", -1, None), VERSION)
    assert gone.error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
    unknown = await client.request(fetch_request("m", 0, uuid.uuid4()), VERSION)
    assert unknown.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID
    missing = await client.request(fetch_request("", 0, topic_id), VERSION)
    assert missing.error_code == ErrorCode.INVALID_REQUEST


async def test_session_limit(broker_factory):
    running = await broker_factory({"group.share.max.share.sessions": "1"})
    client = await running.client()
    topic_id = await setup_topic(running, client, "t", [1])
    assert (await client.request(fetch_request("m1", 0, topic_id), VERSION)).error_code == ErrorCode.NONE
    full = await client.request(fetch_request("m2", 0, topic_id), VERSION)
    assert full.error_code == ErrorCode.SHARE_SESSION_LIMIT_REACHED


async def test_expired_locks_go_to_another_member_up_to_the_delivery_limit(running):
    client = await running.client()
    topic_id = await setup_topic(running, client, "t", [2])
    assert acquired(await client.request(fetch_request("m1", 0, topic_id), VERSION)) == [(0, 1, 1)]
    # m2 long-polls: the expiry of m1's locks wakes it
    with trio.fail_after(LOCK_MS / 1000 + 3):
        got = await client.request(fetch_request("m2", 0, topic_id, max_wait_ms=10_000), VERSION)
    assert acquired(got) == [(0, 1, 2)]
    with trio.fail_after(LOCK_MS / 1000 + 3):
        got = await client.request(fetch_request("m1", 1, topic_id, max_wait_ms=10_000), VERSION)
    assert acquired(got) == [(0, 0, 3)]  # its last delivery: alone
    await trio.sleep(LOCK_MS / 1000 + 0.3)  # the third delivery's lock expires too: archived (limit 3)
    entry = await running.broker.share_manager().entry("g", running.broker.topics.get("t").partitions[0])
    assert entry.share_partition.start_offset == 1
    assert running.broker.share_manager().lock_expiries == 5


async def test_long_poll_woken_by_an_append(running):
    client = await running.client()
    producer = await running.client()
    topic_id = await setup_topic(running, client, "t", [])
    async with trio.open_nursery() as nursery:
        results = []

        async def poll():
            results.append(await client.request(fetch_request("m", 0, topic_id, max_wait_ms=10_000), VERSION))

        nursery.start_soon(poll)
        await trio.sleep(0.3)
        assert not results
        with trio.fail_after(5):
            await produce(producer, "t", build_batch([SimpleRecord(key=None, value=b"x")]))
            while not results:
                await trio.sleep(0.01)
    assert acquired(results[0]) == [(0, 0, 1)]


async def test_closing_the_session_releases_the_members_records(running):
    client = await running.client()
    topic_id = await setup_topic(running, client, "t", [3])
    assert acquired(await client.request(fetch_request("m1", 0, topic_id), VERSION)) == [(0, 2, 1)]
    close = await client.request(ack_request("m1", -1, topic_id, [(0, 0, [ACCEPT])]), VERSION)
    assert close.error_code == ErrorCode.NONE and close.responses[0].partitions[0].error_code == ErrorCode.NONE
    assert acquired(await client.request(fetch_request("m2", 0, topic_id), VERSION)) == [(1, 2, 2)]


async def test_restart_keeps_the_progress(nursery, tmp_path):
    running = await start_broker(nursery, tmp_path / "b", {"metrics.port": "0"})
    client = await running.client()
    topic_id = await setup_topic(running, client, "t", [2, 2, 2])
    assert acquired(await client.request(fetch_request("m", 0, topic_id, max_records=1), VERSION)) == [(0, 1, 1)]
    ack = await client.request(ack_request("m", 1, topic_id, [(0, 1, [ACCEPT])]), VERSION)
    assert ack.responses[0].partitions[0].error_code == ErrorCode.NONE
    assert acquired(await client.request(fetch_request("m", 2, topic_id, max_records=1), VERSION)) == [(2, 3, 1)]
    ack = await client.request(ack_request("m", 3, topic_id, [(2, 3, [RELEASE])]), VERSION)
    scraped = generate_latest(running.broker.metrics.registry).decode()
    assert 'trafka_share_in_flight_records{group="g",partition="0",topic="t"} 2.0' in scraped
    assert "trafka_share_sessions 1.0" in scraped
    await running.close()
    running = await start_broker(nursery, tmp_path / "b")
    client = await running.client()
    # the accepted records stay done with; the released ones come back with their delivery count
    got = await client.request(fetch_request("m2", 0, running.broker.topics.get("t").topic_id), VERSION)
    assert acquired(got) == [(2, 3, 2), (4, 5, 1)]


async def test_a_closed_connection_ends_its_sessions_and_releases_their_records(running):
    first = await running.client()
    topic_id = await setup_topic(running, first, "t", [3])
    assert acquired(await first.request(fetch_request("m1", 0, topic_id), VERSION)) == [(0, 2, 1)]
    await first.aclose()
    second = await running.client()
    started = trio.current_time()
    got = await second.request(fetch_request("m2", 0, topic_id, max_wait_ms=5000), VERSION)
    assert acquired(got) == [(0, 2, 2)]
    assert trio.current_time() - started < LOCK_MS / 1000 * 0.8  # at once, not when the locks expire
    gone = await second.request(fetch_request("m1", 1, topic_id), VERSION)
    assert gone.error_code == ErrorCode.SHARE_SESSION_NOT_FOUND


async def test_read_committed_groups_skip_aborted_transactions_and_wait_for_open_ones(running):
    client = await running.client()
    topic_id = await setup_topic(running, client, "t", [])
    running.broker.share_manager()._group_configs = lambda group: {"share.isolation.level": "read_committed"}
    partition = running.broker.topics.get("t").partitions[0]

    def transactional(producer_id: int, count: int) -> None:
        partition.append(bytearray(build_batch([SimpleRecord(key=None, value=b"t%d" % i) for i in range(count)],
                                               producer_id=producer_id, producer_epoch=0, base_sequence=0,
                                               is_transactional=True)))

    transactional(7, 3)  # 0-2, aborted by 3
    partition.append_marker(7, 0, 0, committed=False)
    transactional(8, 2)  # 4-5, committed by 6
    partition.append_marker(8, 0, 0, committed=True)
    await produce(client, "t", build_batch([SimpleRecord(key=None, value=b"plain")]))  # 7
    transactional(9, 2)  # 8-9, open
    got = await client.request(fetch_request("m", 0, topic_id), VERSION)
    assert acquired(got) == [(3, 7, 1)]  # the aborted records archived, the open transaction's not yet readable
    ack = await client.request(ack_request("m", 1, topic_id, [(3, 7, [ACCEPT])]), VERSION)
    assert ack.responses[0].partitions[0].error_code == ErrorCode.NONE
    entry = await running.broker.share_manager().entry("g", partition)
    assert entry.share_partition.start_offset == 8
    async with trio.open_nursery() as nursery:
        results = []

        async def poll():
            results.append(await client.request(fetch_request("m", 2, topic_id, max_wait_ms=10_000), VERSION))

        nursery.start_soon(poll)
        await trio.sleep(0.3)
        assert not results  # the open transaction holds it back
        partition.append_marker(9, 0, 0, committed=True)
    assert acquired(results[0]) == [(8, 10, 1)]


async def test_a_new_leader_epoch_loads_the_share_partition_again(running):
    client = await running.client()
    topic_id = await setup_topic(running, client, "t", [2, 2])
    assert acquired(await client.request(fetch_request("m", 0, topic_id, max_records=1), VERSION)) == [(0, 1, 1)]
    ack = await client.request(ack_request("m", 1, topic_id, [(0, 1, [ACCEPT])]), VERSION)
    assert ack.responses[0].partitions[0].error_code == ErrorCode.NONE
    assert acquired(await client.request(fetch_request("m", 2, topic_id, max_records=1), VERSION)) == [(2, 3, 1)]
    partition = running.broker.topics.get("t").partitions[0]
    partition.leader_epoch += 1  # led again after another broker led it: what was acquired here is gone
    got = await client.request(fetch_request("m", 3, topic_id), VERSION)
    assert acquired(got) == [(2, 3, 1)]  # from the persisted state: 0-1 done with, 2-3 never acknowledged


async def test_a_partition_led_elsewhere_is_not_leader_or_follower_with_its_leader(running):
    client = await running.client()
    topic_id = await setup_topic(running, client, "t", [1])
    partition = running.broker.topics.get("t").partitions[0]
    partition.leader_id, partition.leader_epoch = 7, 3  # (as a cluster's broker sees a partition another leads)
    got = await client.request(fetch_request("m", 0, topic_id), VERSION)
    data = got.responses[0].partitions[0]
    assert data.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (data.current_leader.leader_id, data.current_leader.leader_epoch) == (7, 3)
    acked = await client.request(ack_request("m", 1, topic_id, [(0, 0, [ACCEPT])]), VERSION)
    data = acked.responses[0].partitions[0]
    assert data.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (data.current_leader.leader_id, data.current_leader.leader_epoch) == (7, 3)
    assert acked.node_endpoints == []  # broker 7 is not among the live brokers


async def test_an_emptied_group_is_loaded_again_after_its_state_changed(running):
    from trafka.broker.tests.test_share_group import heartbeat

    client = await running.client()
    topic_id = await setup_topic(running, client, "t", [5, 5])

    async def join(member: str) -> int:
        epoch = 0
        with trio.fail_after(10):
            while True:
                answer = await heartbeat(client, "g", member, epoch, ["t"] if epoch == 0 else None)
                assert answer.error_code in (0, 14, 15, 16), answer
                if answer.error_code == 0:
                    epoch = answer.member_epoch
                    if answer.assignment is not None and answer.assignment.topic_partitions:
                        return epoch
                await trio.sleep(0.05)

    running.broker.share_manager()._group_configs = lambda group: {"share.auto.offset.reset": "earliest"}
    epoch = await join("m1")  # (which initializes the share state without a start offset)
    assert acquired(await client.request(fetch_request("m1", 0, topic_id), VERSION)) == [(0, 9, 1)]
    ack = await client.request(ack_request("m1", 1, topic_id, [(0, 4, [ACCEPT])]), VERSION)
    assert ack.responses[0].partitions[0].error_code == ErrorCode.NONE
    assert (await heartbeat(client, "g", "m1", -1)).error_code == ErrorCode.NONE  # the group is empty now
    with trio.fail_after(5):
        while running.broker.share_manager().share_partitions():
            await trio.sleep(0.01)
    # its state written anew while it is empty (as AlterShareGroupOffsets does), then a member comes back
    persister = running.broker.share_persister()
    state = await persister.read_summary("g", topic_id, 0, 0)
    await persister.initialize("g", topic_id, 0, state.state_epoch + 1, 8)
    await join("m2")
    assert acquired(await client.request(fetch_request("m2", 0, topic_id), VERSION)) == [(8, 9, 1)]
    assert epoch > 0


async def test_records_deleted_from_the_log_are_archived(running):
    client = await running.client()
    topic_id = await setup_topic(running, client, "t", [2, 2, 2])
    assert acquired(await client.request(fetch_request("m", 0, topic_id, max_records=1), VERSION)) == [(0, 1, 1)]
    ack = await client.request(ack_request("m", 1, topic_id, [(0, 1, [RELEASE])]), VERSION)
    assert ack.responses[0].partitions[0].error_code == ErrorCode.NONE
    partition = running.broker.topics.get("t").partitions[0]
    partition.log.delete_records_before(4)  # as DeleteRecords or retention moves the log start offset
    nothing = await client.request(fetch_request("m", 2, topic_id, max_wait_ms=5000), VERSION)
    assert acquired(nothing) == []  # answered at once, as Kafka does: the next fetch reads from the log start
    got = await client.request(fetch_request("m", 3, topic_id), VERSION)
    assert acquired(got) == [(4, 5, 1)]
    ack = await client.request(ack_request("m", 4, topic_id, [(4, 5, [ACCEPT])]), VERSION)
    assert ack.responses[0].partitions[0].error_code == ErrorCode.NONE
    entry = await running.broker.share_manager().entry("g", partition)
    assert entry.share_partition.start_offset == 6  # past the archived records below the log start too
    state = await running.broker.share_persister().read("g", topic_id, 0, 0)
    assert state.start_offset == 6
