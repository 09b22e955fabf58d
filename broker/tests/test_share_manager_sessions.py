"""Share sessions: opening, continuing, closing, their epochs, the limit, the connections they were used on."""
from __future__ import annotations

import pytest

from trafka.broker.share.sessions import MAX_EPOCH, ShareSessionCache, next_epoch
from trafka.wire.errors import ErrorCode, KafkaError


def test_epochs_follow_one_another():
    cache = ShareSessionCache(10)
    session, replaced = cache.open("g", "m", connection_id=1)
    assert replaced is None and session.epoch == 1
    assert cache.use("g", "m", 1) is session and session.epoch == 2
    assert cache.use("g", "m", 2).epoch == 3
    assert next_epoch(MAX_EPOCH) == 1


@pytest.mark.parametrize("group,member,epoch,code", [
    ("g", "m", 5, ErrorCode.INVALID_SHARE_SESSION_EPOCH),
    ("g", "other", 1, ErrorCode.SHARE_SESSION_NOT_FOUND),
    ("h", "m", 1, ErrorCode.SHARE_SESSION_NOT_FOUND),
])
def test_a_wrong_epoch_or_session(group, member, epoch, code):
    cache = ShareSessionCache(10)
    cache.open("g", "m")
    with pytest.raises(KafkaError) as refused:
        cache.use(group, member, epoch)
    assert refused.value.code == code
    assert cache.get("g", "m").epoch == 1  # unchanged


def test_opening_again_replaces_and_closing_ends():
    cache = ShareSessionCache(10)
    first, _ = cache.open("g", "m")
    first.add([("t", 0)])
    second, replaced = cache.open("g", "m")
    assert replaced is first and second.partitions == {}
    assert cache.close("g", "m") is second
    with pytest.raises(KafkaError) as refused:
        cache.close("g", "m")
    assert refused.value.code == ErrorCode.SHARE_SESSION_NOT_FOUND


def test_the_limit_counts_sessions_not_reopenings():
    cache = ShareSessionCache(1)
    cache.open("g", "m")
    cache.open("g", "m")  # the member's own session replaced: still one
    with pytest.raises(KafkaError) as refused:
        cache.open("g", "other")
    assert refused.value.code == ErrorCode.SHARE_SESSION_LIMIT_REACHED
    assert len(cache) == 1


def test_partitions_added_and_forgotten_and_sessions_by_connection():
    cache = ShareSessionCache(10)
    session, _ = cache.open("g", "m", connection_id=7)
    session.add([("t", 0), ("t", 1), ("t", 0)])
    session.forget([("t", 0), ("u", 3)])
    assert list(session.partitions) == [("t", 1)]
    cache.open("g", "n", connection_id=8)
    assert [s.member_id for s in cache.on_connection(7)] == ["m"]
