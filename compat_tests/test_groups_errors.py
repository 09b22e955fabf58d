"""Bad group requests against a real broker process, sent as raw Kafka requests: each gets Kafka's
error code, and a real consumer group on the same broker keeps working throughout."""
from __future__ import annotations

import struct
import time
import uuid

import pytest

from compat_tests.test_groups_consumers import Member, owned_once, wait_for
from compat_tests.wire_client import WireClient
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import DescribeGroupsRequest, HeartbeatRequest, JoinGroupRequest, OffsetCommitRequest, SyncGroupRequest

SUBSCRIPTION = struct.pack(">hi", 0, 0) + struct.pack(">i", -1)


def _join(client: WireClient, group: str, member_id: str = "", session_timeout_ms: int = 6000):
    return client.request(JoinGroupRequest(
        group_id=group, session_timeout_ms=session_timeout_ms, rebalance_timeout_ms=10000, member_id=member_id,
        protocol_type="consumer", protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range",
                                                                                       metadata=SUBSCRIPTION)]), 9)


@pytest.fixture
def raw(broker):
    with WireClient(broker.bootstrap, client_id="raw-tests", timeout=20) as client:
        yield client


def test_bad_group_requests_get_kafkas_errors_while_a_real_group_keeps_working(broker, topic, raw):
    name = topic(partitions=6)
    group = f"group-{uuid.uuid4().hex[:8]}"
    members = [Member("confluent-kafka", broker.bootstrap, group, name).start() for _ in range(2)]
    try:
        wait_for(lambda: owned_once(members), members, "a stable real group")
        assert _join(raw, "").error_code == ErrorCode.INVALID_GROUP_ID
        assert _join(raw, "g" * 40_000).error_code == ErrorCode.INVALID_GROUP_ID
        assert _join(raw, group, session_timeout_ms=10).error_code == ErrorCode.INVALID_SESSION_TIMEOUT
        assert _join(raw, group, member_id="not-a-member").error_code == ErrorCode.UNKNOWN_MEMBER_ID
        heartbeat = raw.request(HeartbeatRequest(group_id=group, generation_id=1, member_id="nobody"), 4)
        assert heartbeat.error_code == ErrorCode.UNKNOWN_MEMBER_ID
        sync = raw.request(SyncGroupRequest(group_id=group, generation_id=99, member_id="nobody", assignments=[]), 5)
        assert sync.error_code == ErrorCode.UNKNOWN_MEMBER_ID
        commit = raw.request(OffsetCommitRequest(
            group_id=group, generation_id_or_member_epoch=-1, member_id="",
            topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=name, partitions=[
                OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0, committed_offset=5)])]), 9)
        assert commit.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_MEMBER_ID  # not a member, group not empty
        mismatched = raw.request(JoinGroupRequest(
            group_id=group, session_timeout_ms=6000, rebalance_timeout_ms=10000, member_id="",
            protocol_type="connect", protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="x", metadata=b"")]), 5)
        assert mismatched.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        # The real members saw none of this.
        assert owned_once(members) and all(len(m.assignments) <= 2 for m in members)
    finally:
        for m in members:
            m.stop()


def test_wrong_generation_and_heartbeats_after_expiry(broker, raw, topic):
    group = f"group-{uuid.uuid4().hex[:8]}"
    committed_topic = topic(partitions=1)
    first = _join(raw, group)
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
    joined = _join(raw, group, member_id=first.member_id)
    assert joined.error_code == 0
    synced = raw.request(SyncGroupRequest(group_id=group, generation_id=joined.generation_id,
                                          member_id=joined.member_id, assignments=[]), 5)
    assert synced.error_code == 0
    silent_since = time.monotonic()  # the last thing that keeps a session alive
    stale = raw.request(HeartbeatRequest(group_id=group, generation_id=joined.generation_id + 5,
                                         member_id=joined.member_id), 4)
    assert stale.error_code == ErrorCode.ILLEGAL_GENERATION
    commit = raw.request(OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=joined.generation_id - 1, member_id=joined.member_id,
        topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=committed_topic, partitions=[
            OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0, committed_offset=1)])]), 9)
    assert commit.topics[0].partitions[0].error_code == ErrorCode.ILLEGAL_GENERATION

    def members() -> int:  # DescribeGroups looks without heartbeating
        return len(raw.request(DescribeGroupsRequest(groups=[group]), 5).groups[0].members)

    time.sleep(max(0.0, silent_since + 4.0 - time.monotonic()))
    assert members() == 1  # 4 s into the 6 s session.timeout.ms: still a member
    while members() and time.monotonic() - silent_since < 12:
        time.sleep(0.05)
    assert 6.0 <= time.monotonic() - silent_since < 8.0  # gone when the session timeout ran out
    response = raw.request(HeartbeatRequest(group_id=group, generation_id=joined.generation_id,
                                            member_id=joined.member_id), 4)
    assert response.error_code == ErrorCode.UNKNOWN_MEMBER_ID
