"""DeleteShareGroupOffsets (key 92), version 0.

Forgets where an empty share group (KIP-932) is in topics: the share state of each of the group's partitions of
the topics named is deleted (DeleteShareGroupState through the share persister) and the topics leave the group's
initialized ones; a member subscribing to them again starts afresh (share.auto.offset.reset).

Errors, for the whole request: an empty group id is INVALID_GROUP_ID; a group that does not exist GROUP_ID_NOT_FOUND
("Group g not found."), as is a classic or consumer group; a group with members NON_EMPTY_GROUP ("The group is not
empty."); NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS and COORDINATOR_NOT_AVAILABLE as for every group API. A topic
that does not exist is UNKNOWN_TOPIC_OR_PARTITION. With an authorizer the principal needs DELETE on the group
(GROUP_AUTHORIZATION_FAILED) and READ on each topic (TOPIC_AUTHORIZATION_FAILED).
"""
from __future__ import annotations

import uuid
from typing import Any

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.security.authorizer import AclOperation, AclResourceType
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.messages import DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsResponse
from trafka.wire.primitives import ZERO_UUID
from trafka.wire.protocol import ApiKey

TopicResult = DeleteShareGroupOffsetsResponse.DeleteShareGroupOffsetsResponseTopic
UNKNOWN_TOPIC = "This server does not host this topic-partition."


class ShareGroupMetadata:
    """The share state bookkeeping of one share group in the group coordinator (which partitions are initialized),
    as the share group offsets APIs change it."""

    def __init__(self, coordinator: Any, group_id: str, group: Any, create: bool) -> None:
        self.coordinator = coordinator
        self.group_id = group_id
        self.group = group
        self.create = create

    @property
    def state_epoch(self) -> int:
        """The state epoch share state is initialized with: the group's epoch (1 for a group being created)."""
        return max(self.group.group_epoch, 1) if self.group is not None else 1

    def _record(self, initializing: dict, initialized: dict, deleting: dict) -> None:
        from trafka.broker.groups import share

        protocol = self.coordinator.share
        created = None
        if self.group is None:
            created = share.ShareGroup(self.group_id)
            created.group_epoch = 1
        protocol._write(self.group_id, [share._state_metadata_record(self.group_id, initializing, initialized,
                                                                      deleting)], created=created)

    def record_initialized(self, altered: dict[tuple[uuid.UUID, str], set[int]]) -> None:
        """Record the partitions altered as initialized (creating the group when it does not exist)."""
        import dataclasses

        from trafka.broker.groups.share import TopicState

        group = self.group
        initializing = dict(group.initializing) if group is not None else {}
        initialized = dict(group.initialized) if group is not None else {}
        deleting = dict(group.deleting) if group is not None else {}
        now = self.coordinator.now_ms()
        for (topic_id, name), partitions in altered.items():
            before = initialized.get(topic_id)
            initialized[topic_id] = TopicState(name, (before.partitions if before else frozenset()) | partitions,
                                               before.create_timestamp if before else now)
            pending = initializing.get(topic_id)
            if pending is not None:
                rest = pending.partitions - partitions
                if rest:
                    initializing[topic_id] = dataclasses.replace(pending, partitions=rest)
                else:
                    del initializing[topic_id]
        self._record(initializing, initialized, deleting)

    def record_deleted(self, topic_ids: set[uuid.UUID]) -> None:
        group = self.group
        self._record({k: v for k, v in group.initializing.items() if k not in topic_ids},
                     {k: v for k, v in group.initialized.items() if k not in topic_ids},
                     {k: v for k, v in group.deleting.items() if k not in topic_ids})


def share_group_metadata(coordinator: Any, group_id: str, *, create: bool) -> ShareGroupMetadata:
    """The share group ``group_id`` (GroupCoordinator.share_group) for the offsets APIs; raises GROUP_ID_NOT_FOUND for
    a group of another type, or for a missing one unless ``create``."""
    group = coordinator.share_group(group_id)
    if group is None and group_id in coordinator.groups:
        raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
    if group is None and not create:
        raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
    return ShareGroupMetadata(coordinator, group_id, group, create)


@handles(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, 0)
async def handle_delete_share_group_offsets(
        ctx: RequestContext, request: DeleteShareGroupOffsetsRequest) -> DeleteShareGroupOffsetsResponse:
    group_id = request.group_id
    if not ctx.authorize(AclOperation.DELETE, AclResourceType.GROUP, group_id):
        return DeleteShareGroupOffsetsResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                                               error_message="Group authorization failed.")
    coordinator = ctx.broker.group_coordinator()
    try:
        if not group_id:
            raise KafkaError(ErrorCode.INVALID_GROUP_ID, "The group id is invalid.")
        coordinator.check_group(group_id)
        metadata = share_group_metadata(coordinator, group_id, create=False)
        if metadata.group.members:
            raise KafkaError(ErrorCode.NON_EMPTY_GROUP, "The group is not empty.")
    except KafkaError as exc:
        return DeleteShareGroupOffsetsResponse(error_code=exc.code, error_message=exc.message or None)
    group = metadata.group
    known, unknown = [], []
    deleted: set[uuid.UUID] = set()
    for wanted in request.topics:
        name = wanted.topic_name
        topic = ctx.broker.topics.get(name)
        if not ctx.authorize(AclOperation.READ, AclResourceType.TOPIC, name):
            known.append(TopicResult(topic_name=name, topic_id=ZERO_UUID,
                                     error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                     error_message="Topic authorization failed."))
            continue
        if topic is None:
            unknown.append(TopicResult(topic_name=name, topic_id=ZERO_UUID,
                                       error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, error_message=UNKNOWN_TOPIC))
            continue
        partitions = set()
        for topics in (group.initialized, group.initializing):
            if topic.topic_id in topics:
                partitions |= set(topics[topic.topic_id].partitions)
        try:
            for index in sorted(partitions):
                await ctx.broker.share_persister().delete(group_id, topic.topic_id, index)
        except KafkaError as exc:
            known.append(TopicResult(topic_name=name, topic_id=topic.topic_id, error_code=exc.code,
                                     error_message=exc.message or None))
            continue
        deleted.add(topic.topic_id)
        known.append(TopicResult(topic_name=name, topic_id=topic.topic_id))
    if deleted:
        try:
            metadata.record_deleted(deleted)
        except KafkaError as exc:
            return DeleteShareGroupOffsetsResponse(error_code=exc.code, error_message=exc.message or None)
    return DeleteShareGroupOffsetsResponse(responses=known + unknown)
