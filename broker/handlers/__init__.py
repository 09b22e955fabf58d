"""Request handlers, one module per API. Importing this package registers all of them."""
from broker.handlers.registry import REGISTRY, CloseConnection, RequestContext, handles

from broker.handlers import (  # noqa: E402,F401  (imported for their registrations)
    api_versions,
    metadata,
    produce,
    fetch,
    list_offsets,
    offset_for_leader_epoch,
    init_producer_id,
    create_topics,
    delete_topics,
    create_partitions,
    describe_configs,
    list_config_resources,
    alter_configs,
    incremental_alter_configs,
    describe_cluster,
    describe_topic_partitions,
    delete_records,
    find_coordinator,
    join_group,
    sync_group,
    heartbeat,
    leave_group,
    offset_commit,
    offset_fetch,
    describe_groups,
    list_groups,
    delete_groups,
    offset_delete,
    consumer_group_heartbeat,
    consumer_group_describe,
)

__all__ = ["REGISTRY", "CloseConnection", "RequestContext", "handles"]
