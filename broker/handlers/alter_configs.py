"""AlterConfigs (key 33), versions 0-2.

The legacy way to change configs: each resource's configs in the request *replace* all of its
overrides (a topic config left out goes back to the broker's default). Topic configs are checked
like at creation (unknown name or bad value: INVALID_CONFIG), applied to the topic's logs at once and
kept in the topic catalog; an unknown topic gets UNKNOWN_TOPIC_OR_PARTITION. ``validate_only``
checks without changing anything.

Request-level checks, per resource, as Kafka makes them: a resource named twice (INVALID_REQUEST for
each), a config named twice, a null value, an empty topic name (INVALID_REQUEST) or an illegal one
(INVALID_TOPIC_EXCEPTION). A broker resource must name this node or be empty (the cluster-wide
defaults); its configs replace the dynamic broker configs of that resource, written to disk and in force
at once. The topic defaults (``log.retention.ms``, ``log.segment.bytes``, ``message.max.bytes`` ...) may
change so; the broker's other settings are read at start-up only ("Cannot update these configs
dynamically", INVALID_REQUEST), and a bad value is INVALID_REQUEST too, as Kafka answers for brokers.
Which settings may change, and how their values are checked, is the catalog's (``trafka.storage.config_defs``).
A GROUP resource (a group id, never empty: INVALID_REQUEST) replaces the group's own configs, checked as
Kafka 4.4 checks group configs (an unknown name, a bad value or one outside the range the broker's
``group.*.min/max`` settings allow: INVALID_CONFIG); they are kept across restarts.
Other resource types are INVALID_REQUEST.

Version notes: v2 is the first flexible version; v1 only changed quota behaviour.
With an authorizer, a resource needs ALTER_CONFIGS: on the cluster for brokers (CLUSTER_AUTHORIZATION_FAILED),
on the topic or group otherwise (TOPIC_ or GROUP_AUTHORIZATION_FAILED).
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from trafka.broker.handlers.describe_configs import config_refusal
from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.security.authorizer import AclOperation
from trafka.broker.topics import validate_topic_name
from trafka.storage.config import check_broker_log_property
from trafka.storage.config_defs import BROKER_CONFIG_DEFS, ResourceType, resource_type_name
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.messages import AlterConfigsRequest, AlterConfigsResponse
from trafka.wire.protocol import ApiKey

ResourceResult = AlterConfigsResponse.AlterConfigsResourceResponse

# Resource types Kafka knows that this broker does not serve.
_SUPPORTED_ELSEWHERE = frozenset({ResourceType.BROKER_LOGGER, ResourceType.CLIENT_METRICS})


@handles(ApiKey.ALTER_CONFIGS, 0, 2)
async def handle_alter_configs(ctx: RequestContext, request: AlterConfigsRequest) -> AlterConfigsResponse:
    counts = Counter((resource.resource_type, resource.resource_name) for resource in request.resources)
    responses = []
    for resource in request.resources:
        try:
            if counts[resource.resource_type, resource.resource_name] > 1:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.")
            refusal = config_refusal(ctx, AclOperation.ALTER_CONFIGS, resource.resource_type, resource.resource_name)
            if refusal is not None:
                raise refusal
            check_resource(
                ctx,
                resource.resource_type,
                resource.resource_name,
                [config.name for config in resource.configs],
                null_values=[config.name for config in resource.configs if config.value is None],
            )
            configs = {config.name: config.value for config in resource.configs}
            if resource.resource_type == ResourceType.TOPIC:
                await ctx.broker.topics.alter_configs(resource.resource_name, configs, validate_only=request.validate_only)
            elif resource.resource_type == ResourceType.BROKER:
                check_broker_configs(configs)
                await ctx.broker.change_dynamic_configs(
                    resource.resource_name == "", lambda _: dict(configs), validate_only=request.validate_only
                )
            elif resource.resource_type == ResourceType.GROUP:
                await change_group_configs(ctx, resource.resource_name, lambda _, new=configs: dict(new),
                                           validate_only=request.validate_only)
        except KafkaError as exc:
            responses.append(_result(resource, exc))
        else:
            responses.append(_result(resource))
    return AlterConfigsResponse(throttle_time_ms=0, responses=responses)


async def change_group_configs(ctx: RequestContext, group_id: str, change, *, validate_only: bool) -> None:
    """Replace the configs of group ``group_id`` by ``change(its configs)``, checked as Kafka checks them
    (INVALID_CONFIG), and keep them (unless ``validate_only``)."""
    import trio

    from trafka.broker.groups.group_configs import validate

    store = ctx.broker.group_coordinator().group_configs
    configs = change(store.get(group_id))
    validate(ctx.broker.config.properties, configs)
    if not validate_only:
        await trio.to_thread.run_sync(store.save, group_id, configs)


def check_resource(
    ctx: RequestContext, resource_type: int, resource_name: str, names: Sequence[str], *, null_values: Sequence[str]
) -> None:
    """The checks AlterConfigs and IncrementalAlterConfigs make before changing a resource's configs.

    Raises KafkaError for a config named twice, a null value where one is needed, a resource that is
    neither a topic nor this broker, and a change to a broker config (none can change at run time).
    """
    if len(set(names)) != len(names):
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    if null_values:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {', '.join(null_values)}")
    if resource_type == ResourceType.TOPIC:
        if not resource_name:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed.")
        validate_topic_name(resource_name)
    elif resource_type == ResourceType.BROKER:
        if resource_name:
            try:
                node_id = int(resource_name)
            except ValueError:
                raise KafkaError(
                    ErrorCode.INVALID_REQUEST, f"Node id must be an integer, but it is: {resource_name}"
                ) from None
            if node_id != ctx.broker.node_id:
                raise KafkaError(
                    ErrorCode.INVALID_REQUEST,
                    f"Unexpected broker id, expected {ctx.broker.node_id}, but received {resource_name}",
                )
    elif resource_type == ResourceType.GROUP:
        if not resource_name:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Default group resources are not allowed.")
    elif resource_type in _SUPPORTED_ELSEWHERE:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST,
            f"Config resources of type {resource_type_name(resource_type)} are not supported by this broker",
        )
    else:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown resource type {resource_type}")


def check_broker_configs(values: Mapping[str, str | None]) -> None:
    """The dynamic broker configs a request sets (None: deletes) as Kafka checks them: a setting the catalog
    says is read at start-up only, or a bad value of a topic default, is INVALID_REQUEST; names the broker
    does not know are kept and have no effect."""
    static = sorted(name for name in values if name in BROKER_CONFIG_DEFS and not BROKER_CONFIG_DEFS[name].dynamic)
    if static:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Cannot update these configs dynamically: [{', '.join(static)}]")
    for name, value in values.items():
        if value is not None and name in BROKER_CONFIG_DEFS:  # a dynamic one: a topic default
            try:
                check_broker_log_property(name, value)
            except KafkaError as exc:
                raise KafkaError(ErrorCode.INVALID_REQUEST, exc.message) from None


def _result(resource: AlterConfigsRequest.AlterConfigsResource, error: KafkaError | None = None) -> ResourceResult:
    return ResourceResult(
        error_code=ErrorCode.NONE if error is None else error.code,
        error_message=None if error is None else error.message or None,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
    )
