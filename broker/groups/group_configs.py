"""Group configs: settings a group may have of its own (GROUP config resources, KIP-848 and KIP-932).

DescribeConfigs lists every group config Kafka 4.4 has, whether the group exists or not: its own value
(source GROUP_CONFIG) or the broker's default (DEFAULT_CONFIG, synonym the broker setting that gives it).
IncrementalAlterConfigs and AlterConfigs set them, checked as Kafka checks them (types, bounds, the range
the broker's ``group.*.min``/``max`` settings allow). Share groups read theirs through
``GroupCoordinator.share_group_config``.

A single broker keeps the configs in ``group-configs.json`` in its data directory, written atomically, so
they survive a restart; the brokers of a cluster keep them in ZooKeeper
(:mod:`trafka.broker.cluster.group_configs`), so that all serve the same ones.
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from trafka.storage.checkpoints import atomic_write
from trafka.storage.config_defs import ConfigSource, ConfigType
from trafka.wire.errors import ErrorCode, KafkaError

GROUP_CONFIGS_FILE = "group-configs.json"
FORMAT_VERSION = 1

_T = ConfigType


@dataclass(frozen=True, slots=True)
class GroupConfigDef:
    name: str
    type: ConfigType
    default: str
    #: The broker setting whose value is the default (None: the default is Kafka's own).
    synonym: str | None
    doc: str
    #: The least value of the config itself.
    at_least: int | None = None
    #: The broker settings (and their defaults) bounding the value: (least, greatest).
    bounds: tuple[tuple[str, int], tuple[str, int]] | None = None
    #: Values that may be given, for a STRING config.
    choices: tuple[str, ...] | None = None
    #: A greatest value given by a broker setting (its name and default), checked as "less than or equal to".
    at_most: tuple[str, int] | None = None
    #: Listed by DescribeConfigs only where the broker or the group sets it.
    only_when_set: bool = False


def _bounds(prefix: str, what: str, low: int, high: int) -> tuple[tuple[str, int], tuple[str, int]]:
    return (f"group.{prefix}.min.{what}", low), (f"group.{prefix}.max.{what}", high)


#: Every group config, in the order Kafka 4.4's DescribeConfigs lists them.
GROUP_CONFIG_DEFS: tuple[GroupConfigDef, ...] = (
    GroupConfigDef("share.assignor.offload.enable", _T.BOOLEAN, "true", "group.share.assignor.offload.enable",
                   "Whether the share group's assignments are computed off the coordinator's thread.",
                   only_when_set=True),
    GroupConfigDef("consumer.assignor.offload.enable", _T.BOOLEAN, "true", "group.consumer.assignor.offload.enable",
                   "Whether the consumer group's assignments are computed off the coordinator's thread.",
                   only_when_set=True),
    GroupConfigDef("streams.assignor.offload.enable", _T.BOOLEAN, "true", "group.streams.assignor.offload.enable",
                   "Whether the streams group's assignments are computed off the coordinator's thread.",
                   only_when_set=True),
    GroupConfigDef("consumer.session.timeout.ms", _T.INT, "45000", "group.consumer.session.timeout.ms",
                   "Session timeout of the group's consumer-protocol members.",
                   bounds=_bounds("consumer", "session.timeout.ms", 45_000, 60_000)),
    GroupConfigDef("streams.assignor.name", _T.STRING, "sticky", "group.streams.assignors",
                   "Task assignor of a streams group."),
    GroupConfigDef("consumer.assignment.interval.ms", _T.INT, "1000", "group.consumer.assignment.interval.ms",
                   "Least time between two target assignments of the consumer group.", at_least=0,
                   bounds=_bounds("consumer", "assignment.interval.ms", 0, 15_000)),
    GroupConfigDef("errors.deadletterqueue.copy.record.enable", _T.BOOLEAN, "false", None,
                   "Whether records sent to the share group's dead-letter queue carry the whole record."),
    GroupConfigDef("share.auto.offset.reset", _T.STRING, "latest", None,
                   "Where a share group starts consuming a partition new to it: earliest, latest, or "
                   "by_duration:<ISO-8601 duration> (the first record at least that recent)."),
    GroupConfigDef("streams.rack.aware.assignment.tags", _T.LIST, "", "group.streams.rack.aware.assignment.tags",
                   "Client tags rack-aware assignment of a streams group considers."),
    GroupConfigDef("share.renew.acknowledge.enable", _T.BOOLEAN, "true", None,
                   "Whether share consumers may renew the lock of records they hold."),
    GroupConfigDef("streams.initial.rebalance.delay.ms", _T.INT, "3000", "group.streams.initial.rebalance.delay.ms",
                   "How long a new streams group waits for more members before its first assignment.", at_least=0),
    GroupConfigDef("share.session.timeout.ms", _T.INT, "45000", "group.share.session.timeout.ms",
                   "Session timeout of the share group's members.",
                   bounds=_bounds("share", "session.timeout.ms", 45_000, 60_000)),
    GroupConfigDef("streams.assignment.interval.ms", _T.INT, "1000", "group.streams.assignment.interval.ms",
                   "Least time between two target assignments of the streams group.", at_least=0,
                   bounds=_bounds("streams", "assignment.interval.ms", 0, 15_000)),
    GroupConfigDef("share.heartbeat.interval.ms", _T.INT, "5000", "group.share.heartbeat.interval.ms",
                   "Heartbeat interval of the share group's members.",
                   bounds=_bounds("share", "heartbeat.interval.ms", 5000, 15_000)),
    GroupConfigDef("streams.heartbeat.interval.ms", _T.INT, "5000", "group.streams.heartbeat.interval.ms",
                   "Heartbeat interval of the streams group's members.",
                   bounds=_bounds("streams", "heartbeat.interval.ms", 5000, 15_000)),
    GroupConfigDef("share.delivery.count.limit", _T.INT, "5", "group.share.delivery.count.limit",
                   "Deliveries of a record to the share group's consumers before it is archived.", at_least=2,
                   bounds=_bounds("share", "delivery.count.limit", 2, 10)),
    GroupConfigDef("errors.deadletterqueue.topic.name", _T.STRING, "", None,
                   "The share group's dead-letter queue topic (none when empty)."),
    GroupConfigDef("consumer.heartbeat.interval.ms", _T.INT, "5000", "group.consumer.heartbeat.interval.ms",
                   "Heartbeat interval of the group's consumer-protocol members.",
                   bounds=_bounds("consumer", "heartbeat.interval.ms", 5000, 15_000)),
    GroupConfigDef("share.record.lock.duration.ms", _T.INT, "30000", "group.share.record.lock.duration.ms",
                   "How long records acquired by a share consumer stay locked to it.", at_least=1000,
                   bounds=_bounds("share", "record.lock.duration.ms", 15_000, 60_000)),
    GroupConfigDef("share.assignment.interval.ms", _T.INT, "1000", "group.share.assignment.interval.ms",
                   "Least time between two target assignments of the share group.", at_least=0,
                   bounds=_bounds("share", "assignment.interval.ms", 0, 15_000)),
    GroupConfigDef("share.isolation.level", _T.STRING, "read_uncommitted", None,
                   "Whether share consumers read transactional records before their commit (read_uncommitted) "
                   "or only once committed (read_committed).", choices=("read_committed", "read_uncommitted")),
    GroupConfigDef("streams.session.timeout.ms", _T.INT, "45000", "group.streams.session.timeout.ms",
                   "Session timeout of the streams group's members.",
                   bounds=_bounds("streams", "session.timeout.ms", 45_000, 60_000)),
    GroupConfigDef("share.partition.max.record.locks", _T.INT, "2000", "group.share.partition.max.record.locks",
                   "Most records of a share partition in flight at once for the share group.", at_least=100,
                   bounds=_bounds("share", "partition.max.record.locks", 100, 4000)),
    GroupConfigDef("streams.num.standby.replicas", _T.INT, "0", "group.streams.num.standby.replicas",
                   "Standby replicas of each task of the streams group.", at_least=0,
                   at_most=("group.streams.max.standby.replicas", 2)),
)
GROUP_CONFIGS: dict[str, GroupConfigDef] = {d.name: d for d in GROUP_CONFIG_DEFS}

_BY_DURATION = re.compile(r"^by_duration:P(?:\d+D)?(?:T(?:\d+H)?(?:\d+M)?(?:\d+(?:\.\d+)?S)?)?$", re.IGNORECASE)
_INT_MAX = 2**31 - 1


def _invalid(name: str, raw: str, reason: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_CONFIG, f"Invalid value {raw} for configuration {name}: {reason}")


def _setting(properties: Mapping[str, str], name: str, default: int) -> int:
    try:
        return int(properties.get(name, default))
    except (TypeError, ValueError):
        return default


def validate(properties: Mapping[str, str], configs: Mapping[str, str | None]) -> None:
    """Check a group's configs as Kafka does; raises KafkaError (INVALID_CONFIG) with Kafka's message."""
    for name, raw in configs.items():
        definition = GROUP_CONFIGS.get(name)
        if definition is None:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown group config name: {name}")
        if raw is None:
            continue
        value = raw.strip()
        if definition.type == _T.INT:
            try:
                number = int(value)
            except ValueError:
                raise _invalid(name, raw, "Not a number of type INT") from None
            if not -(2**31) <= number <= _INT_MAX:
                raise _invalid(name, raw, "Not a number of type INT")
            if definition.at_least is not None and number < definition.at_least:
                raise _invalid(name, raw, f"Value must be at least {definition.at_least}")
            if definition.bounds is not None:
                (low_name, low_default), (high_name, high_default) = definition.bounds
                low, high = _setting(properties, low_name, low_default), _setting(properties, high_name, high_default)
                if not low <= number <= high:
                    raise KafkaError(ErrorCode.INVALID_CONFIG,
                                     f"{name} must be in the range {low} to {high} inclusive.")
            if definition.at_most is not None:
                most = _setting(properties, *definition.at_most)
                if number > most:
                    raise KafkaError(ErrorCode.INVALID_CONFIG, f"{name} must be less than or equal to {most}")
        elif definition.type == _T.BOOLEAN:
            if value.lower() not in ("true", "false"):
                raise _invalid(name, raw, "Expected value to be either true or false")
        elif name == "share.auto.offset.reset":
            if value.lower() not in ("earliest", "latest") and not _BY_DURATION.match(value):
                raise _invalid(name, raw, f"Invalid value `{raw}` for configuration {name}. The value must be either "
                                          "'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.")
        elif definition.choices is not None and value not in definition.choices:
            raise _invalid(name, raw, f"String must be one of: {', '.join(definition.choices)}")
        elif name == "streams.assignor.name" and value != "sticky":
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"{name} '{raw}' is not a registered task assignor. "
                                                       "Registered assignors are: [sticky].")


@dataclass(frozen=True, slots=True)
class DescribedConfig:
    name: str
    value: str
    source: ConfigSource
    type: ConfigType
    doc: str
    #: (name, value, source), the one in force first.
    synonyms: list[tuple[str, str, ConfigSource]]


def describe(properties: Mapping[str, str], own: Mapping[str, str]) -> list[DescribedConfig]:
    """Every group config of a group whose own configs are ``own``, with where each value comes from."""
    described = []
    for d in GROUP_CONFIG_DEFS:
        chain: list[tuple[str, str, ConfigSource]] = []
        if d.name in own:
            chain.append((d.name, own[d.name], ConfigSource.GROUP_CONFIG))
        if d.synonym is not None and d.synonym in properties:
            chain.append((d.synonym, str(properties[d.synonym]).strip(), ConfigSource.STATIC_BROKER_CONFIG))
        elif d.only_when_set and not chain:
            continue
        chain.append((d.synonym or d.name, d.default, ConfigSource.DEFAULT_CONFIG))
        _, value, source = chain[0]
        described.append(DescribedConfig(d.name, value, source, d.type, d.doc, chain))
    return described


@dataclass
class GroupConfigStore:
    """The groups' own configs, by group id, and the file they are kept in."""

    path: Path
    configs: dict[str, dict[str, str]] = field(default_factory=dict)
    #: Called with a group id after its configs changed.
    on_change: list[Callable[[str], object]] = field(default_factory=list)

    @classmethod
    def load(cls, data_dir: Path) -> GroupConfigStore:
        path = Path(data_dir) / GROUP_CONFIGS_FILE
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return cls(path)
        except ValueError as exc:
            raise ValueError(f"{path}: unreadable group configs: {exc}") from exc
        if not isinstance(document, dict) or document.get("version") != FORMAT_VERSION:
            raise ValueError(f"{path}: unsupported group configs version {document.get('version')!r}")
        groups = document.get("groups", {})
        return cls(path, {str(g): {str(k): str(v) for k, v in c.items()} for g, c in groups.items() if c})

    def get(self, group_id: str) -> dict[str, str]:
        return dict(self.configs.get(group_id, {}))

    def save(self, group_id: str, configs: Mapping[str, str]) -> None:
        """Replace the configs of ``group_id`` (none: it has no configs of its own), on disk first."""
        updated = {g: dict(c) for g, c in self.configs.items()}
        if configs:
            updated[group_id] = dict(sorted(configs.items()))
        else:
            updated.pop(group_id, None)
        document = {"version": FORMAT_VERSION, "groups": dict(sorted(updated.items()))}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, (json.dumps(document, indent=1) + "\n").encode("utf-8"))
        self.configs.clear()
        self.configs.update(updated)
        for callback in self.on_change:
            callback(group_id)
