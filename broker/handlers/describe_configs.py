"""DescribeConfigs (key 32), versions 1-4.

Describes topic and broker config resources, as Apache Kafka reports them:

* A topic lists every topic config with the topic's effective value (its own overrides over the
  broker's defaults). The source is DYNAMIC_TOPIC_CONFIG for a topic override; otherwise it comes
  from the broker synonyms (``retention.ms`` -> ``log.retention.ms``, ``log.retention.minutes``,
  ``log.retention.hours``): STATIC_BROKER_CONFIG where ``server.properties`` sets the synonym,
  DEFAULT_CONFIG otherwise. Like Kafka, only the first synonym counts for the source: a broker that
  sets ``log.retention.hours`` reports ``retention.ms`` as DEFAULT_CONFIG with no synonyms. Topic
  configs are never read-only or sensitive. An unknown topic gets UNKNOWN_TOPIC_OR_PARTITION, an
  illegal name INVALID_TOPIC_EXCEPTION.
* A broker resource named by this node's id lists the broker's configs: every setting it knows and
  every property it was given. The topic defaults (``log.*``, ``message.max.bytes`` ...) may be changed
  at run time (AlterConfigs): their source is then DYNAMIC_BROKER_CONFIG (set for this broker) or
  DYNAMIC_DEFAULT_BROKER_CONFIG (set for the cluster); every other config is read-only. Secrets
  (passwords, keys, JAAS configs) are sensitive and reported without a value. An empty name is the
  cluster-wide dynamic defaults, listed as far as they are set; any other name is INVALID_REQUEST.
  A topic's inherited configs take their source from the same layers. The log cleaner's own settings
  (``log.cleaner.enable``, ``.threads``, ``.backoff.ms``, ``.dedupe.buffer.size``, ``.io.buffer.size``,
  ``.io.buffer.load.factor``, ``.io.max.bytes.per.second``) are listed with their built-in defaults
  (DEFAULT_CONFIG) unless ``server.properties`` sets them (STATIC_BROKER_CONFIG); the cleaner reads them
  at start-up, so unlike Kafka's, which takes all but ``log.cleaner.enable`` at run time, they are
  read-only and a dynamic change is refused. DOUBLE values are written as Java writes them (``1.0E-5``).
* A GROUP resource (a group id; the group need not exist) lists every group config Kafka 4.4 has: the
  group's own value (GROUP_CONFIG) or the broker's default; an empty name is INVALID_REQUEST.
* Client-metrics and broker-logger resources are not supported: INVALID_REQUEST.

``configuration_keys`` (null or empty for all) filters the configs by name. Synonyms are listed
when ``include_synonyms`` is set, first the one in effect.

Version notes: v1 added config sources and synonyms; v3 added config types and documentation
(only when ``include_documentation`` is set); v4 is the first flexible version.

What is described comes from the catalog of configuration definitions (``trafka.storage.config_defs``):
each config's type, default, broker synonyms, whether it is read-only, and its documentation. A broker
setting the catalog does not list is reported as given, read-only, of type UNKNOWN. The layers of broker
properties and the sources they give are shared with CreateTopics.
With an authorizer, a resource needs DESCRIBE_CONFIGS: on the cluster for brokers (CLUSTER_AUTHORIZATION_FAILED),
on the topic or group otherwise (TOPIC_ or GROUP_AUTHORIZATION_FAILED); refused resources come after the
others, as Kafka answers them.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from trafka.broker.config import BrokerConfig
from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.security.authorizer import CLUSTER_NAME, AclOperation, AclResourceType
from trafka.broker.topics import validate_topic_name
from trafka.storage.config import LogConfig
from trafka.storage.config_defs import (
    BROKER_CONFIG_DEFS,
    TOPIC_CONFIG_DEFS,
    ConfigDef,
    ConfigSource,
    ConfigType,
    ResourceType,
    format_value,
    normalize,
    resource_type_name,
)
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.messages import DescribeConfigsRequest, DescribeConfigsResponse
from trafka.wire.protocol import ApiKey

if TYPE_CHECKING:
    from trafka.broker.broker import Broker

Result = DescribeConfigsResponse.DescribeConfigsResult
ConfigResult = DescribeConfigsResponse.DescribeConfigsResourceResult
SynonymResult = DescribeConfigsResponse.DescribeConfigsSynonym

#: A config's broker-level synonyms in order of precedence, each with its built-in default (None: none).
Synonyms = tuple[tuple[str, str | None], ...]


def broker_synonyms(definition: ConfigDef) -> Synonyms:
    """A topic config's broker synonyms (``retention.ms``: ``log.retention.ms``, ``log.retention.minutes``,
    ``log.retention.hours``, the last with a built-in default), or a broker setting's own name (a topic
    default lists its topic config's synonyms)."""
    if definition.default_of is not None:
        definition = TOPIC_CONFIG_DEFS[definition.default_of]
    elif not definition.synonyms:
        return ((definition.name, definition.default_string),)
    return tuple((name, BROKER_CONFIG_DEFS[name].default_string) for name in definition.broker_synonyms)


# -- topic configs ---------------------------------------------------------------------------------


def topic_config_values(configs: Mapping[str, str], log_config: LogConfig) -> dict[str, str]:
    """A topic's configs by name: every config of its effective LogConfig, plus the overrides of
    configs that are accepted but have no effect here."""
    values = log_config.to_properties()
    for name, value in configs.items():
        values.setdefault(name, value)
    return values


#: The broker's properties by where they were set, in order of precedence (see ``broker_layers``).
Layers = Sequence[tuple[Mapping[str, str], ConfigSource]]


def broker_layers(broker: Broker) -> Layers:
    """The broker's properties by where they were set, first the ones that win: its own dynamic
    configs, the cluster-wide dynamic defaults, then those it was started with."""
    return (
        (broker.dynamic_configs.broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
        (broker.dynamic_configs.defaults, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        (broker.config.properties, ConfigSource.STATIC_BROKER_CONFIG),
    )


def creation_config_source(name: str, configs: Mapping[str, str], layers: Layers) -> ConfigSource:
    """Where a new topic's config comes from, as CreateTopics (v5+) reports it: the topic's own
    override, else the first layer that sets a broker synonym, else the built-in default."""
    if name in configs:
        return ConfigSource.DYNAMIC_TOPIC_CONFIG
    definition = TOPIC_CONFIG_DEFS.get(name)
    synonyms = definition.broker_synonyms if definition is not None else ()
    for properties, source in layers:
        if any(broker_name in properties for broker_name in synonyms):
            return source
    return ConfigSource.DEFAULT_CONFIG


@dataclass(frozen=True, slots=True)
class Synonym:
    name: str
    value: str | None
    source: ConfigSource


def _broker_synonym_chain(synonyms: Synonyms, layers: Layers, sensitive: bool = False) -> list[Synonym]:
    """The broker-level synonyms of a config in precedence order: those set in each layer (dynamic,
    then ``server.properties``), then those with a built-in default; entries before the first one
    named like the config itself are dropped, as Kafka does."""
    if not synonyms:
        return []
    chain = [
        Synonym(name, None if sensitive else properties[name], source)
        for properties, source in layers
        for name, _ in synonyms
        if name in properties
    ]
    chain += [
        Synonym(name, None if sensitive else default, ConfigSource.DEFAULT_CONFIG)
        for name, default in synonyms
        if default is not None
    ]
    primary = synonyms[0][0]
    while chain and chain[0].name != primary:
        chain.pop(0)
    return chain


def _entry(
    name: str,
    value: str | None,
    synonyms: list[Synonym],
    *,
    read_only: bool,
    sensitive: bool,
    config_type: ConfigType,
    documentation: str | None,
    include_synonyms: bool,
    include_documentation: bool,
) -> ConfigResult:
    if config_type == ConfigType.DOUBLE and value is not None:
        value = normalize(value, config_type)  # Java's form: 1e-05 is 1.0E-5
    return ConfigResult(
        name=name,
        value=None if sensitive else value,
        read_only=read_only,
        config_source=synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG,
        is_sensitive=sensitive,
        synonyms=[SynonymResult(name=s.name, value=s.value, source=s.source) for s in synonyms]
        if include_synonyms
        else [],
        config_type=config_type,
        documentation=documentation if include_documentation else None,
    )


def describe_topic(
    broker: Broker, name: str, *, include_synonyms: bool = False, include_documentation: bool = False
) -> list[ConfigResult]:
    validate_topic_name(name)
    topic = broker.topics.get(name)
    if topic is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    layers = broker_layers(broker)
    results = []
    for config_name, value in sorted(topic_config_values(topic.configs, topic.log_config).items()):
        definition = TOPIC_CONFIG_DEFS.get(config_name)
        synonyms = broker_synonyms(definition) if definition is not None and definition.synonyms else ()
        chain = _broker_synonym_chain(synonyms, layers)
        if config_name in topic.configs:
            chain.insert(0, Synonym(config_name, value, ConfigSource.DYNAMIC_TOPIC_CONFIG))
        results.append(
            _entry(
                config_name,
                value,
                chain,
                read_only=definition is not None and not definition.dynamic,  # (every topic config may change)
                sensitive=False,
                config_type=definition.type if definition is not None else ConfigType.UNKNOWN,
                documentation=definition.doc if definition is not None else None,
                include_synonyms=include_synonyms,
                include_documentation=include_documentation,
            )
        )
    return results


# -- broker configs --------------------------------------------------------------------------------

# Names of secrets: their values are never sent.
_SENSITIVE_NAME = re.compile(r"password|secret|jaas|ssl\.keystore\.key$|certificate|credential", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class _BrokerConfigEntry:
    value: str | None
    synonyms: Synonyms
    definition: ConfigDef | None  # None: a property the catalog does not list


def _where_it_is(config: BrokerConfig) -> dict[str, str]:
    """The settings saying where this broker is and who it is, as it serves (the command line may have
    changed them)."""
    return {
        "node.id": str(config.node_id),
        "broker.id": str(config.node_id),
        "listeners": ",".join(f"{served.name}://{served.host}:{served.port}" for served in config.listeners),
        "advertised.listeners": ",".join(f"{served.name}://{host}:{port}" for served in config.listeners
                                         for host, port in [served.advertised_address]),
        "log.dirs": str(config.data_dir),
    }


def _broker_configs(broker: Broker) -> dict[str, _BrokerConfigEntry]:
    config = broker.config
    properties = broker.dynamic_configs.effective(config.properties)
    serving = _where_it_is(config)
    log_defaults = broker.default_log_config.to_properties()
    entries: dict[str, _BrokerConfigEntry] = {}
    for name, definition in BROKER_CONFIG_DEFS.items():
        synonyms = broker_synonyms(definition)
        if name in serving:
            value = serving[name]
        elif definition.field is not None:
            value = format_value(getattr(config, definition.field), definition.type)
        elif definition.default_of is not None and len(synonyms) == 1:
            value = log_defaults[definition.default_of]  # as the broker's default log config has it
        elif definition.default_of is not None:
            # A time setting in one of several units: as set (log.retention.ms is null when only .hours is).
            value = properties.get(name, dict(synonyms)[name])
        else:
            value = normalize(properties[name], definition.type) if name in properties else definition.default_string
        entries[name] = _BrokerConfigEntry(value, synonyms, definition)
    for name, value in properties.items():
        if name not in entries:
            entries[name] = _BrokerConfigEntry(value, ((name, None),), None)
    return entries


def _broker_source_chain(name: str, entry: _BrokerConfigEntry, layers: Layers, sensitive: bool) -> list[Synonym]:
    # A time setting lists the other units as synonyms, starting from the one described.
    names = [n for n, _ in entry.synonyms]
    synonyms = entry.synonyms[names.index(name):] if name in names else ((name, None),)
    chain = _broker_synonym_chain(synonyms, layers, sensitive)
    set_somewhere = any(name in properties for properties, _ in layers)
    if not set_somewhere and entry.value is not None and entry.value != synonyms[0][1]:
        # Set on the command line rather than in server.properties: still the broker's static config.
        chain.insert(0, Synonym(name, None if sensitive else entry.value, ConfigSource.STATIC_BROKER_CONFIG))
    return chain


def _is_sensitive(name: str, definition: ConfigDef | None) -> bool:
    return (definition is not None and definition.type == ConfigType.PASSWORD) or bool(_SENSITIVE_NAME.search(name))


def describe_broker(
    broker: Broker, name: str, *, include_synonyms: bool = False, include_documentation: bool = False
) -> list[ConfigResult]:
    if name == "":
        return _describe_dynamic_defaults(broker, include_synonyms, include_documentation)
    try:
        node_id = int(name)
    except ValueError:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}") from None
    if node_id != broker.node_id:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST,
            f"Unexpected broker id, expected {broker.node_id} or empty string, but received {name}",
        )
    layers = broker_layers(broker)
    results = []
    for config_name, entry in sorted(_broker_configs(broker).items()):
        definition = entry.definition
        sensitive = _is_sensitive(config_name, definition)
        chain = _broker_source_chain(config_name, entry, layers, sensitive)
        results.append(
            _entry(
                config_name,
                entry.value,
                chain,
                read_only=definition is None or not definition.dynamic,
                sensitive=sensitive,
                config_type=ConfigType.PASSWORD if sensitive else definition.type if definition else ConfigType.UNKNOWN,
                documentation=definition.doc if definition is not None else None,
                include_synonyms=include_synonyms,
                include_documentation=include_documentation,
            )
        )
    return results


def _describe_dynamic_defaults(
    broker: Broker, include_synonyms: bool, include_documentation: bool
) -> list[ConfigResult]:
    """The cluster-wide dynamic defaults (the broker resource named ``""``): only those that are set."""
    results = []
    for config_name, value in sorted(broker.dynamic_configs.defaults.items()):
        definition = BROKER_CONFIG_DEFS.get(config_name)
        sensitive = bool(_SENSITIVE_NAME.search(config_name))
        results.append(
            _entry(
                config_name,
                value,
                [Synonym(config_name, None if sensitive else value, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)],
                read_only=False,
                sensitive=sensitive,
                config_type=definition.type if definition is not None else ConfigType.UNKNOWN,
                documentation=definition.doc if definition is not None else None,
                include_synonyms=include_synonyms,
                include_documentation=include_documentation,
            )
        )
    return results


# -- the handler -----------------------------------------------------------------------------------

@handles(ApiKey.DESCRIBE_CONFIGS, 1, 4)
async def handle_describe_configs(ctx: RequestContext, request: DescribeConfigsRequest) -> DescribeConfigsResponse:
    results, refused = [], []
    for resource in request.resources:
        refusal = config_refusal(ctx, AclOperation.DESCRIBE_CONFIGS, resource.resource_type, resource.resource_name)
        if refusal is not None:
            refused.append(Result(error_code=refusal.code, error_message=refusal.message,
                                  resource_type=resource.resource_type, resource_name=resource.resource_name,
                                  configs=[]))
            continue
        try:
            configs = _describe(ctx.broker, resource, request.include_synonyms, request.include_documentation)
        except KafkaError as exc:
            results.append(
                Result(
                    error_code=exc.code,
                    error_message=exc.message,  # an unknown topic: the empty string, as Kafka sends
                    resource_type=resource.resource_type,
                    resource_name=resource.resource_name,
                    configs=[],
                )
            )
            continue
        if resource.configuration_keys:
            wanted = set(resource.configuration_keys)
            configs = [config for config in configs if config.name in wanted]
        results.append(
            Result(
                error_code=ErrorCode.NONE,
                error_message="",  # as Kafka answers, not null
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                configs=configs,
            )
        )
    return DescribeConfigsResponse(results=results + refused)


#: Who guards a config resource of each type, and the code of a refusal.
_CONFIG_RESOURCE_GUARDS = {
    ResourceType.BROKER: (AclResourceType.CLUSTER, ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    ResourceType.BROKER_LOGGER: (AclResourceType.CLUSTER, ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    ResourceType.CLIENT_METRICS: (AclResourceType.CLUSTER, ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    ResourceType.TOPIC: (AclResourceType.TOPIC, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    ResourceType.GROUP: (AclResourceType.GROUP, ErrorCode.GROUP_AUTHORIZATION_FAILED),
}
_REFUSAL_MESSAGES = {
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "Group authorization failed.",
}


def config_refusal(ctx: RequestContext, operation: AclOperation, resource_type: int, name: str) -> KafkaError | None:
    """The refusal of ``operation`` (DESCRIBE_CONFIGS or ALTER_CONFIGS) on a config resource, as Kafka's config
    APIs answer it: brokers' (and loggers', client metrics') configs are the cluster's, topics' and groups' their
    own. None when allowed, or for a resource type the handler refuses itself."""
    if ctx.broker.authorizer is None or resource_type not in _CONFIG_RESOURCE_GUARDS:
        return None
    guard, code = _CONFIG_RESOURCE_GUARDS[ResourceType(resource_type)]
    if ctx.authorize(operation, guard, CLUSTER_NAME if guard == AclResourceType.CLUSTER else name):
        return None
    if operation == AclOperation.ALTER_CONFIGS and guard == AclResourceType.CLUSTER:
        return KafkaError(code)  # Kafka's broker answers this refusal without a message
    return KafkaError(code, _REFUSAL_MESSAGES[code])


def describe_group(broker: Broker, name: str, *, include_synonyms: bool, include_documentation: bool
                   ) -> list[ConfigResult]:
    """Every group config of group ``name`` (which need not exist): its own value, or the broker's default."""
    from trafka.broker.groups import group_configs

    if not name:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Group name must not be empty")
    properties = broker.config.properties
    own = broker.group_coordinator().group_configs.get(name)
    return [
        _entry(d.name, d.value, [Synonym(n, v, source) for n, v, source in d.synonyms], read_only=False,
               sensitive=False, config_type=d.type, documentation=d.doc, include_synonyms=include_synonyms,
               include_documentation=include_documentation)
        for d in group_configs.describe(properties, own)
    ]


def _describe(
    broker: Broker,
    resource: DescribeConfigsRequest.DescribeConfigsResource,
    include_synonyms: bool,
    include_documentation: bool,
) -> list[ConfigResult]:
    options = {"include_synonyms": include_synonyms, "include_documentation": include_documentation}
    if resource.resource_type == ResourceType.TOPIC:
        return describe_topic(broker, resource.resource_name, **options)
    if resource.resource_type == ResourceType.BROKER:
        return describe_broker(broker, resource.resource_name or "", **options)
    if resource.resource_type == ResourceType.GROUP:
        return describe_group(broker, resource.resource_name, **options)
    raise KafkaError(
        ErrorCode.INVALID_REQUEST,
        f"Unsupported resource type {resource_type_name(resource.resource_type)} "
        f"for resource {resource.resource_name}",
    )
