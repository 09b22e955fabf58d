"""DeleteTopics (key 20), versions 1-6.

Deletes topics by name (v1-5 ``topic_names``; v6 ``topics`` with a name) or by topic id (v6). A
deleted topic's logs are removed from disk at once and its name can be reused straight away.

Errors, per topic, as Kafka gives them:

* ``delete.topic.enable=false``: every topic fails with TOPIC_DELETION_DISABLED (INVALID_REQUEST
  before v3, which did not know that error);
* an unknown name: UNKNOWN_TOPIC_OR_PARTITION; an unknown id: UNKNOWN_TOPIC_ID;
* the same name or id twice, both a name and an id, neither, or a name whose id was also given:
  INVALID_REQUEST.

Internal topics (``__consumer_offsets``, ``__transaction_state``) may be deleted, as in Kafka: only
Kafka's command-line tool refuses to.

Version notes: v5 added error messages; v6 added topic ids (a response names the topic when it is
known, and carries its id).
With an authorizer and without DELETE on the cluster, a topic needs DESCRIBE and DELETE
(TOPIC_AUTHORIZATION_FAILED, said before whether it exists; a topic given by id that the principal may not
describe is answered without its name).
"""
from __future__ import annotations

import uuid
from collections import Counter

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.security.authorizer import AclOperation, AclResourceType
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.messages import DeleteTopicsRequest, DeleteTopicsResponse
from trafka.wire.protocol import ApiKey

TopicResult = DeleteTopicsResponse.DeletableTopicResult

ZERO_UUID = uuid.UUID(int=0)
UNKNOWN_TOPIC_MESSAGE = "This server does not host this topic-partition."
UNKNOWN_TOPIC_ID_MESSAGE = "This server does not host this topic ID."
TOPIC_AUTHORIZATION_FAILED_MESSAGE = "Topic authorization failed."


@handles(ApiKey.DELETE_TOPICS, 1, 6)
async def handle_delete_topics(ctx: RequestContext, request: DeleteTopicsRequest) -> DeleteTopicsResponse:
    if ctx.api_version >= 6:
        wanted = [(topic.name, topic.topic_id) for topic in request.topics]
    else:
        wanted = [(name, ZERO_UUID) for name in request.topic_names]
    if not ctx.broker.config.delete_topic_enable:
        code = ErrorCode.TOPIC_DELETION_DISABLED if ctx.api_version >= 3 else ErrorCode.INVALID_REQUEST
        results = [_result(name, topic_id, code, "Topic deletion is disabled.") for name, topic_id in wanted]
        return DeleteTopicsResponse(throttle_time_ms=0, responses=results)
    return DeleteTopicsResponse(throttle_time_ms=0, responses=await _delete(ctx, wanted))


async def _delete(ctx: RequestContext, wanted: list[tuple[str | None, uuid.UUID]]) -> list[TopicResult]:
    topics = ctx.broker.topics
    name_counts = Counter(name for name, topic_id in wanted if name is not None and topic_id == ZERO_UUID)
    id_counts = Counter(topic_id for name, topic_id in wanted if name is None and topic_id != ZERO_UUID)
    ids_given = set(id_counts)
    results: list[TopicResult] = []
    reported: set[str | uuid.UUID] = set()
    # Topics that pass every check, by id, with the name the result reports.
    to_delete: dict[uuid.UUID, str | None] = {}
    authorizing = ctx.broker.authorizer is not None and not ctx.authorize_cluster(AclOperation.DELETE,
                                                                                  log_if_denied=False)

    def refused(name: str, topic_id: uuid.UUID, *, by_id: bool) -> TopicResult | None:
        """TOPIC_AUTHORIZATION_FAILED unless the principal may describe and delete the topic (the name is not
        disclosed to one that may not describe a topic given by id)."""
        if not authorizing:
            return None
        if not ctx.authorize(AclOperation.DESCRIBE, AclResourceType.TOPIC, name, log_if_denied=False):
            return _result(None if by_id else name, topic_id, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                           TOPIC_AUTHORIZATION_FAILED_MESSAGE)
        if not ctx.authorize(AclOperation.DELETE, AclResourceType.TOPIC, name):
            return _result(name, topic_id, ErrorCode.TOPIC_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED_MESSAGE)
        return None
    for name, topic_id in wanted:
        if name is None and topic_id == ZERO_UUID:
            results.append(
                _result(None, ZERO_UUID, ErrorCode.INVALID_REQUEST, "Neither topic name nor id were specified.")
            )
        elif name is not None and topic_id != ZERO_UUID:
            results.append(
                _result(name, topic_id, ErrorCode.INVALID_REQUEST, "You may not specify both topic name and topic id.")
            )
        elif name is not None:
            if name_counts[name] > 1:
                if name not in reported:
                    reported.add(name)
                    results.append(_result(name, ZERO_UUID, ErrorCode.INVALID_REQUEST, "Duplicate topic name."))
                continue
            refusal = refused(name, ZERO_UUID, by_id=False)
            if refusal is not None:
                results.append(refusal)
                continue
            topic = topics.get(name)
            if topic is None:
                results.append(_result(name, ZERO_UUID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_MESSAGE))
            elif topic.topic_id in ids_given:
                results.append(
                    _result(
                        name,
                        topic.topic_id,
                        ErrorCode.INVALID_REQUEST,
                        "The provided topic name maps to an ID that was already supplied.",
                    )
                )
            else:
                to_delete[topic.topic_id] = name
        else:
            if id_counts[topic_id] > 1:
                if topic_id not in reported:
                    reported.add(topic_id)
                    results.append(_result(None, topic_id, ErrorCode.INVALID_REQUEST, "Duplicate topic id."))
                continue
            topic = topics.by_id(topic_id)
            if topic is None:
                results.append(_result(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_ID_MESSAGE))
            elif name_counts[topic.name] == 1:
                continue  # also named in the request: the result for the name reports the conflict
            elif (refusal := refused(topic.name, topic_id, by_id=True)) is not None:
                results.append(refusal)
            else:
                to_delete[topic_id] = topic.name
    for topic_id, name in to_delete.items():
        try:
            topic = await topics.delete(name)
        except KafkaError as exc:
            results.append(_result(name, topic_id, exc.code, exc.message or None))
        else:
            results.append(_result(topic.name, topic.topic_id, ErrorCode.NONE, None))
    return results


def _result(name: str | None, topic_id: uuid.UUID, code: ErrorCode, message: str | None) -> TopicResult:
    return TopicResult(name=name, topic_id=topic_id, error_code=code, error_message=message)
