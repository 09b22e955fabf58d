"""What the group protocols may use of the group coordinator that hosts them: its public surface.

The classic protocol (:mod:`trafka.broker.groups.classic_protocol`) and the consumer protocol
(:mod:`trafka.broker.groups.consumer_protocol`) run the membership state machines of their groups; the
coordinator (:mod:`trafka.broker.groups.coordinator`) owns the groups, their offsets and the writes to
``__consumer_offsets``. The protocols reach it only through :class:`GroupHost`, and each other only
through the few calls a group that changes protocol needs (:class:`ClassicSide`, :class:`ConsumerSide`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from trafka.broker.config import BrokerConfig
    from trafka.broker.groups.classic import ClassicGroup, JoinRequest, JoinResult, SyncResult
    from trafka.broker.groups.consumer import ConsumerGroup
    from trafka.broker.groups.timers import Timers
    from trafka.broker.topics import TopicLookup
    from trafka.storage.log import AppendInfo
    from trafka.wire.errors import ErrorCode

    Group = ClassicGroup | ConsumerGroup


class ClassicSide(Protocol):
    """What the consumer protocol asks of the classic one (a group downgraded or converted)."""

    def on_loaded(self, group: ClassicGroup) -> None: ...

    def on_removed(self, group: ClassicGroup, error: ErrorCode = ...) -> None: ...

    def rebalance(self, group: ClassicGroup, reason: str) -> None: ...


class ConsumerSide(Protocol):
    """What the classic protocol asks of the consumer one: its requests from classic members of a
    consumer group (KIP-848's upgrade path)."""

    def classic_join(self, group: ConsumerGroup, request: JoinRequest) -> JoinResult: ...

    def classic_sync(self, group: ConsumerGroup, *, member_id: str, instance_id: str | None, generation_id: int,
                     protocol_type: str | None, protocol_name: str | None) -> SyncResult: ...

    def classic_heartbeat(self, group: ConsumerGroup, *, member_id: str, instance_id: str | None,
                          generation_id: int) -> ErrorCode: ...

    def classic_leave(self, group: ConsumerGroup, members: list[tuple[str, str | None, str | None]]
                      ) -> tuple[ErrorCode, list[tuple[str, str | None, ErrorCode]]]: ...


class GroupHost(Protocol):
    """The group coordinator as the protocols see it."""

    config: BrokerConfig
    #: The broker's topics: subscriptions are matched against them.
    topics: TopicLookup
    timers: Timers
    #: Every group coordinated here, by id.
    groups: dict[str, Group]
    group_max_size: int
    initial_rebalance_delay_ms: int
    classic: ClassicSide
    consumer: ConsumerSide

    @property
    def stopping(self) -> bool: ...

    def now_ms(self) -> int: ...

    def group_error(self, group_id: str) -> ErrorCode: ...

    def check_group(self, group_id: str) -> None: ...

    def check_group_id(self, group_id: str) -> None: ...

    def is_serving(self, group_id: str) -> bool: ...

    def create_classic_group(self, group_id: str) -> ClassicGroup: ...

    def append(self, group_id: str, records: list[tuple[bytes, bytes | None]]) -> AppendInfo | None: ...

    def store_group(self, group: ClassicGroup) -> None: ...

    def group_metadata_record(self, group: ClassicGroup) -> tuple[bytes, bytes]: ...

    def drop_group_metadata(self, group: Group) -> None: ...

    def remove_group(self, group: Group, error: ErrorCode = ...) -> None: ...
