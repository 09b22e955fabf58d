"""Share sessions: the partitions a share consumer fetches from one broker, and the epoch of its requests.

A share session belongs to one member of one share group on one broker. ShareFetch with epoch 0 opens it (a
session the member had is replaced), naming its partitions; the next request carries epoch 1, then 2, and so
on, and adds partitions (its topics) or removes them (its forgotten topics). Epoch -1 closes it. An epoch other
than the one expected is INVALID_SHARE_SESSION_EPOCH; a session the broker does not have,
SHARE_SESSION_NOT_FOUND; a new session beyond ``group.share.max.share.sessions``, SHARE_SESSION_LIMIT_REACHED.
Pure (no trio).
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from trafka.wire.errors import ErrorCode, KafkaError

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_EPOCH = 2**31 - 1

TopicPartition = tuple[uuid.UUID, int]


@dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    #: The epoch the next request must carry.
    epoch: int = 1
    #: The partitions fetched, in the order they were added.
    partitions: dict[TopicPartition, None] = field(default_factory=dict)
    #: The connection the session was last used on.
    connection_id: int | None = None

    def add(self, partitions) -> None:
        for key in partitions:
            self.partitions.setdefault(key, None)

    def forget(self, partitions) -> None:
        for key in partitions:
            self.partitions.pop(key, None)


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= MAX_EPOCH else epoch + 1


class ShareSessionCache:
    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self._sessions: dict[tuple[str, str], ShareSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def open(self, group_id: str, member_id: str, connection_id: int | None = None) -> tuple[ShareSession,
                                                                                           ShareSession | None]:
        """A new session (epoch 0), and the one it replaces, if any."""
        key = (group_id, member_id)
        replaced = self._sessions.pop(key, None)
        if len(self._sessions) >= self.max_sessions:
            if replaced is not None:
                self._sessions[key] = replaced
            raise KafkaError(ErrorCode.SHARE_SESSION_LIMIT_REACHED,
                             f"the broker has {len(self._sessions)} share sessions, its most")
        session = self._sessions[key] = ShareSession(group_id, member_id, connection_id=connection_id)
        return session, replaced

    def use(self, group_id: str, member_id: str, epoch: int) -> ShareSession:
        """The session a request of ``epoch`` (neither initial nor final) continues; its epoch moves on."""
        session = self._sessions.get((group_id, member_id))
        if session is None:
            raise KafkaError(ErrorCode.SHARE_SESSION_NOT_FOUND,
                             f"no share session of member {member_id} of group {group_id}")
        if session.epoch != epoch:
            raise KafkaError(ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                             f"share session epoch {epoch}, expected {session.epoch}")
        session.epoch = next_epoch(session.epoch)
        return session

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.get((group_id, member_id))

    def close(self, group_id: str, member_id: str) -> ShareSession:
        session = self._sessions.pop((group_id, member_id), None)
        if session is None:
            raise KafkaError(ErrorCode.SHARE_SESSION_NOT_FOUND,
                             f"no share session of member {member_id} of group {group_id}")
        return session

    def remove(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.pop((group_id, member_id), None)

    def on_connection(self, connection_id: int) -> list[ShareSession]:
        return [s for s in self._sessions.values() if s.connection_id == connection_id]
