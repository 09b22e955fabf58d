"""IncrementalAlterConfigs (key 44), versions 0-1.

Changes some configs of a resource and leaves the others alone. Each config comes with an operation:

* SET (0) sets the topic override; DELETE (1) removes it, so the broker's default applies again;
* APPEND (2) and SUBTRACT (3) add values to or remove them from a list config (``cleanup.policy``,
  the replication throttle lists), starting from the topic's override or else the config's built-in
  default, as Kafka does; on any other config they are INVALID_CONFIG.

A BROKER resource (this node's id, or ``""`` for the cluster-wide defaults) changes the dynamic broker
configs the same way (see broker.handlers.alter_configs for which may change), and a GROUP resource the
group's own configs (checked as Kafka checks group configs, kept across restarts).

The resulting configs are checked as a whole (unknown config or bad value: INVALID_CONFIG), applied to
the topic's logs at once and kept in the topic catalog; an unknown topic gets
UNKNOWN_TOPIC_OR_PARTITION. ``validate_only`` checks without changing anything.

The request-level checks are AlterConfigs' (see broker.handlers.alter_configs), except that DELETE
needs no value. An unknown operation is INVALID_REQUEST.

Version notes: v1 is the first flexible version.
With an authorizer, a resource needs ALTER_CONFIGS: on the cluster for brokers (CLUSTER_AUTHORIZATION_FAILED),
on the topic or group otherwise (TOPIC_ or GROUP_AUTHORIZATION_FAILED).
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from enum import IntEnum

from trafka.broker.handlers.alter_configs import change_group_configs, check_broker_configs, check_resource
from trafka.broker.handlers.describe_configs import config_refusal
from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.security.authorizer import AclOperation
from trafka.storage.config import LogConfig
from trafka.storage.config_defs import TOPIC_CONFIG_DEFS, ConfigType, ResourceType
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.messages import IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse
from trafka.wire.protocol import ApiKey

ResourceResult = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse
AlterableConfig = IncrementalAlterConfigsRequest.AlterableConfig


class OpType(IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@handles(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1)
async def handle_incremental_alter_configs(
    ctx: RequestContext, request: IncrementalAlterConfigsRequest
) -> IncrementalAlterConfigsResponse:
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
                null_values=[
                    config.name
                    for config in resource.configs
                    if config.value is None and config.config_operation != OpType.DELETE
                ],
            )
            if resource.resource_type == ResourceType.TOPIC:
                topics = ctx.broker.topics
                topic = topics.get(resource.resource_name)
                configs = apply_operations(topic.configs if topic is not None else {}, resource.configs)
                await topics.alter_configs(resource.resource_name, configs, validate_only=request.validate_only)
            elif resource.resource_type == ResourceType.BROKER:
                lists = broker_lists(ctx.broker.default_log_config)

                def change(layer: dict[str, str], operations=resource.configs) -> dict[str, str]:
                    changed = apply_operations(layer, operations, lists)
                    check_broker_configs({name: changed.get(name) for name in {o.name for o in operations}})
                    return changed

                await ctx.broker.change_dynamic_configs(
                    resource.resource_name == "", change, validate_only=request.validate_only
                )
            elif resource.resource_type == ResourceType.GROUP:
                await change_group_configs(
                    ctx, resource.resource_name,
                    lambda current, operations=resource.configs: apply_operations(current, operations, GROUP_LISTS),
                    validate_only=request.validate_only,
                )
        except KafkaError as exc:
            responses.append(_result(resource, exc))
        else:
            responses.append(_result(resource))
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=responses)


#: A topic's list configs, and what APPEND and SUBTRACT start from when the topic does not set them.
TOPIC_LISTS = {name: definition.default_string or "" for name, definition in TOPIC_CONFIG_DEFS.items()
               if definition.type == ConfigType.LIST}


#: The list configs of groups, and what APPEND and SUBTRACT start from when the group does not set them.
GROUP_LISTS = {"streams.rack.aware.assignment.tags": ""}


def broker_lists(default_log_config: LogConfig) -> dict[str, str]:
    """The broker's list settings (``log.cleanup.policy``), and what APPEND and SUBTRACT start from when
    unset: the broker's default in force."""
    return {
        broker_name: getattr(default_log_config, definition.field)
        for definition in TOPIC_CONFIG_DEFS.values()
        if definition.type == ConfigType.LIST and definition.field is not None
        for broker_name in definition.broker_synonyms
    }


def apply_operations(
    current: Mapping[str, str], operations: Iterable[AlterableConfig], lists: Mapping[str, str] = TOPIC_LISTS
) -> dict[str, str]:
    """A resource's configs after the operations, in order; the values themselves are checked later.
    ``lists`` names the list configs, with the value APPEND and SUBTRACT start from when unset."""
    configs = dict(current)
    for operation in operations:
        name = operation.name
        try:
            op = OpType(operation.config_operation)
        except ValueError:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST, f"Unknown operations type {operation.config_operation}"
            ) from None
        if op == OpType.SET:
            configs[name] = operation.value
        elif op == OpType.DELETE:
            configs.pop(name, None)
        else:
            if name not in lists:
                raise KafkaError(
                    ErrorCode.INVALID_CONFIG, f"Can't {op.name} to key {name} because its type is not LIST."
                )
            base = configs[name] if name in configs else lists[name]
            items = [item for item in base.split(",") if item]
            for item in operation.value.split(","):
                if op == OpType.APPEND and item not in items:
                    items.append(item)
                elif op == OpType.SUBTRACT and item in items:
                    items.remove(item)
            configs[name] = ",".join(items)
    return configs


def _result(
    resource: IncrementalAlterConfigsRequest.AlterConfigsResource, error: KafkaError | None = None
) -> ResourceResult:
    return ResourceResult(
        error_code=ErrorCode.NONE if error is None else error.code,
        error_message=None if error is None else error.message or None,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
    )
