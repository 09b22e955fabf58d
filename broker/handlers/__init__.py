"""Request handlers, one module per API.

Every API is declared here with the module that serves it and its versions, which ApiVersions lists
from the start; a handler module is imported when its API is first requested, and its
:func:`handles` registration must match the declaration (see :mod:`broker.handlers.registry`).
"""
from broker.handlers.registry import REGISTRY, RequestContext, handles
from wire.protocol import ApiKey

#: (api key, module under broker.handlers, min version, max version) of every API served.
HANDLER_MODULES = (
    (ApiKey.API_VERSIONS, "api_versions", 0, 4),
    (ApiKey.METADATA, "metadata", 0, 13),
    (ApiKey.FETCH, "fetch", 4, 18),
    (ApiKey.LIST_OFFSETS, "list_offsets", 1, 11),
    (ApiKey.OFFSET_FOR_LEADER_EPOCH, "offset_for_leader_epoch", 2, 4),
    (ApiKey.INIT_PRODUCER_ID, "init_producer_id", 0, 5),
    (ApiKey.CREATE_TOPICS, "create_topics", 2, 7),
    (ApiKey.DELETE_TOPICS, "delete_topics", 1, 6),
    (ApiKey.CREATE_PARTITIONS, "create_partitions", 0, 3),
    (ApiKey.DESCRIBE_CONFIGS, "describe_configs", 1, 4),
    (ApiKey.ALTER_CONFIGS, "alter_configs", 0, 2),
    (ApiKey.INCREMENTAL_ALTER_CONFIGS, "incremental_alter_configs", 0, 1),
    (ApiKey.DESCRIBE_CLUSTER, "describe_cluster", 0, 2),
    (ApiKey.DESCRIBE_TOPIC_PARTITIONS, "describe_topic_partitions", 0, 0),
    (ApiKey.DELETE_RECORDS, "delete_records", 0, 2),
    (ApiKey.FIND_COORDINATOR, "find_coordinator", 0, 6),
    (ApiKey.JOIN_GROUP, "join_group", 0, 9),
    (ApiKey.SYNC_GROUP, "sync_group", 0, 5),
    (ApiKey.HEARTBEAT, "heartbeat", 0, 4),
    (ApiKey.LEAVE_GROUP, "leave_group", 0, 5),
    (ApiKey.OFFSET_COMMIT, "offset_commit", 2, 10),
    (ApiKey.OFFSET_FETCH, "offset_fetch", 1, 10),
    (ApiKey.DESCRIBE_GROUPS, "describe_groups", 0, 6),
    (ApiKey.LIST_GROUPS, "list_groups", 0, 5),
    (ApiKey.DELETE_GROUPS, "delete_groups", 0, 2),
    (ApiKey.OFFSET_DELETE, "offset_delete", 0, 0),
    (ApiKey.CONSUMER_GROUP_HEARTBEAT, "consumer_group_heartbeat", 0, 1),
    (ApiKey.CONSUMER_GROUP_DESCRIBE, "consumer_group_describe", 0, 1),
)
for api_key, module, min_version, max_version in HANDLER_MODULES:
    REGISTRY.declare(api_key, f"broker.handlers.{module}", min_version, max_version)
del api_key, module, min_version, max_version
# Produce v0-2 are advertised (old librdkafka asks for them) and rejected when used, as Kafka does.
REGISTRY.declare(ApiKey.PRODUCE, "broker.handlers.produce", 3, 13, advertised_min_version=0)

__all__ = ["HANDLER_MODULES", "REGISTRY", "RequestContext", "handles"]
