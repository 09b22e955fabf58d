"""ListConfigResources (key 74), versions 0-1.

The resources whose configs DescribeConfigs describes, by type (v1, KIP-1142): every topic, internal
ones included (TOPIC, 2), and this broker by its node id (BROKER, 4). An empty list of types asks for
every type, and groups with configs of their own (GROUP, 32). Broker loggers (8) and client metrics
subscriptions (16) are types Kafka lists too; trafka keeps no such configs, so none is listed. A type that is no
config resource type makes the whole answer UNSUPPORTED_VERSION, as in Kafka.

Version notes: v0 was ListClientMetricsResources and lists client metrics subscriptions only: none.
With an authorizer, DESCRIBE_CONFIGS on the cluster is needed (CLUSTER_AUTHORIZATION_FAILED).
"""
from __future__ import annotations

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.security.authorizer import AclOperation
from trafka.storage.config_defs import ResourceType
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import ListConfigResourcesRequest, ListConfigResourcesResponse
from trafka.wire.protocol import ApiKey

Listed = ListConfigResourcesResponse.ConfigResource

LISTABLE_TYPES = frozenset({
    ResourceType.TOPIC, ResourceType.BROKER, ResourceType.BROKER_LOGGER, ResourceType.CLIENT_METRICS,
    ResourceType.GROUP,
})


@handles(ApiKey.LIST_CONFIG_RESOURCES, 0, 1)
async def handle_list_config_resources(
    ctx: RequestContext, request: ListConfigResourcesRequest
) -> ListConfigResourcesResponse:
    if not ctx.authorize_cluster(AclOperation.DESCRIBE_CONFIGS):
        return ListConfigResourcesResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, config_resources=[])
    if ctx.api_version == 0:
        return ListConfigResourcesResponse(error_code=ErrorCode.NONE, config_resources=[])
    wanted = set(request.resource_types) or LISTABLE_TYPES
    if not wanted <= LISTABLE_TYPES:
        return ListConfigResourcesResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, config_resources=[])
    listed = []
    if ResourceType.TOPIC in wanted:
        listed += [Listed(resource_name=topic.name, resource_type=ResourceType.TOPIC) for topic in ctx.broker.topics]
    if ResourceType.BROKER in wanted:
        listed.append(Listed(resource_name=str(ctx.broker.node_id), resource_type=ResourceType.BROKER))
    if ResourceType.GROUP in wanted:
        listed += [Listed(resource_name=group_id, resource_type=ResourceType.GROUP)
                   for group_id in sorted(ctx.broker.group_coordinator().group_configs.configs)]
    return ListConfigResourcesResponse(error_code=ErrorCode.NONE, config_resources=listed)
