"""Fault rules: what a test asks the broker to do to some requests and connections, which a real broker cannot be
made to do, and the faults of a network between a client and its broker.

A rule selects requests by API (name or key), client id, group, topic and partition, and connections by the
listener they came in on and the client's host (``client_host``, its IP address); each selector is optional. It
acts on the next ``count`` of them (every one without a count), for ``duration_ms`` (until removed without one).

What the broker does with a request:

* ``error``: answer with an error code instead of handling the request. A Produce or Fetch answers the
  selected partitions with it (a faulted Produce appends nothing there) and the others normally; other
  APIs answer with their top-level error code (an API without one cannot be faulted so).
* ``delay``: hold the request ``delay_ms`` before handling it.
* ``drop``: close the connection without answering.
* ``observe``: only count.

What the network does to the connection a request came on (Toxiproxy's toxics, inside the broker):

* ``latency``: hold the response ``latency_ms``, plus up to ``jitter_ms`` more at random, before sending it (a
  connection's responses keep their order, so requests sent together wait in turn);
* ``bandwidth``: send the response at ``bytes_per_s``;
* ``truncate``: send the first ``fraction`` of the response's bytes (half by default), then reset the connection;
* ``half_open``: never answer, and read the connection's requests no more, while it stays open (a peer that
  went away without closing, or a link that stopped carrying packets): the client's request timeout is what
  ends it;
* ``refuse``: close new connections as they are accepted, before the client says anything (so these select
  by ``listener`` and ``client_host`` only; to refuse one client by its id, drop its ApiVersions requests);
* ``cut``: reset the connections open when the rule is added (those of its listener, client host and client
  id, the client id being that of their last request); its hits are the connections cut.

Every rule counts its ``hits``. Rules are kept in memory and served over the control endpoint
(broker.control) to tests in any language.
"""
from __future__ import annotations

import enum
import itertools
import random
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

import trio

from trafka.wire.errors import ErrorCode
from trafka.wire.messages import RESPONSES
from trafka.wire.protocol import ApiKey

#: APIs whose error answers are made per partition (the others answer with a top-level error code).
PARTITION_APIS = frozenset({ApiKey.PRODUCE, ApiKey.FETCH})


class Action(enum.Enum):
    ERROR = "error"
    DELAY = "delay"
    DROP = "drop"
    OBSERVE = "observe"
    LATENCY = "latency"
    BANDWIDTH = "bandwidth"
    TRUNCATE = "truncate"
    HALF_OPEN = "half_open"
    REFUSE = "refuse"
    CUT = "cut"


#: Actions on connections rather than requests: they select by listener and client host only (``cut`` by the
#: client id of a connection's last request too).
CONNECTION_ACTIONS = frozenset({Action.REFUSE, Action.CUT})


class Connection(Protocol):
    """What a ``cut`` rule needs of an open connection (broker.connection.ServedConnection)."""

    listener_name: str
    client_host: str
    client_id: str | None

    def reset(self) -> None: ...


class RuleError(ValueError):
    """A rule that cannot be made (the message says why)."""


@dataclass
class FaultRule:
    id: int
    action: Action
    apis: frozenset[int] | None = None
    client_id: str | None = None
    group: str | None = None
    topic: str | None = None
    partition: int | None = None
    listener: str | None = None
    client_host: str | None = None
    error_code: int = ErrorCode.NONE
    delay_ms: int = 0
    latency_ms: int = 0
    jitter_ms: int = 0
    bytes_per_s: int = 0
    fraction: float = 0.5
    remaining: int | None = None  # None: every matching request, until removed
    duration_ms: int | None = None
    #: When the rule stops acting (trio's clock), with a duration.
    ends: float | None = None
    hits: int = 0
    _hit: trio.Event = field(default_factory=trio.Event, repr=False)

    def to_json(self) -> dict[str, object]:
        action = self.action
        return {
            "id": self.id, "action": action.value,
            "api": sorted(ApiKey(key).name for key in self.apis) if self.apis else None,
            "client_id": self.client_id, "group": self.group, "topic": self.topic, "partition": self.partition,
            "listener": self.listener, "client_host": self.client_host,
            "error": ErrorCode(self.error_code).name if action is Action.ERROR else None,
            "delay_ms": self.delay_ms if action is Action.DELAY else None,
            "latency_ms": self.latency_ms if action is Action.LATENCY else None,
            "jitter_ms": self.jitter_ms if action is Action.LATENCY else None,
            "bytes_per_s": self.bytes_per_s if action is Action.BANDWIDTH else None,
            "fraction": self.fraction if action is Action.TRUNCATE else None,
            "duration_ms": self.duration_ms, "remaining": self.remaining, "hits": self.hits,
        }

    def response_delay_s(self) -> float:
        """How long a ``latency`` rule holds this response."""
        return (self.latency_ms + random.uniform(0, self.jitter_ms)) / 1000

    def _selects_connection(self, listener: str | None, client_host: str | None) -> bool:
        return self.listener in (None, listener) and self.client_host in (None, client_host)


class FaultRules:
    """The broker's rules, in the order they were added (the first that matches acts)."""

    def __init__(self) -> None:
        self._rules: dict[int, FaultRule] = {}
        #: Rules whose count is used up: they act no more, and stay to be asked about until removed.
        self._spent: dict[int, FaultRule] = {}
        self._ids = itertools.count(1)
        #: The connections open now (the server's), for ``cut`` rules.
        self.open_connections: Callable[[], Iterable[Connection]] = tuple

    def __bool__(self) -> bool:
        return bool(self._rules)

    def add(self, spec: Mapping[str, object]) -> FaultRule:
        """A rule from its JSON form: ``{"action": "error", "api": "produce", "error": "NOT_LEADER_OR_FOLLOWER",
        "topic": "orders", "partition": 0, "count": 2}``; raises RuleError. A ``cut`` rule acts as it is added."""
        unknown = set(spec) - {"action", "api", "client_id", "group", "topic", "partition", "listener", "client_host",
                               "error", "delay_ms", "latency_ms", "jitter_ms", "bytes_per_s", "fraction", "count",
                               "duration_ms"}
        if unknown:
            raise RuleError(f"unknown rule fields: {', '.join(sorted(unknown))}")
        try:
            action = Action(str(spec.get("action", "")).lower())
        except ValueError:
            raise RuleError(f"action {spec.get('action')!r}: one of {', '.join(a.value for a in Action)}") from None
        rule = FaultRule(next(self._ids), action, apis=_apis(spec.get("api")),
                         client_id=_optional_str(spec, "client_id"), group=_optional_str(spec, "group"),
                         topic=_optional_str(spec, "topic"), partition=_optional_int(spec, "partition"),
                         listener=_optional_str(spec, "listener"), client_host=_optional_str(spec, "client_host"),
                         remaining=_optional_int(spec, "count"), duration_ms=_optional_int(spec, "duration_ms"))
        if rule.remaining is not None and rule.remaining < 1:
            raise RuleError("count: at least 1 (leave it out for every matching request)")
        if rule.duration_ms is not None:
            if rule.duration_ms < 1:
                raise RuleError("duration_ms: at least 1 (leave it out for a rule that acts until removed)")
            rule.ends = trio.current_time() + rule.duration_ms / 1000
        if rule.listener is not None:
            rule.listener = rule.listener.upper()  # (listener names are case-insensitive, kept upper-case)
        if action in CONNECTION_ACTIONS:
            selectors = ["api", "group", "topic", "partition"] + (["client_id"] if action is Action.REFUSE else [])
            given = [name for name in selectors if spec.get(name) is not None]
            if given:
                raise RuleError(f"{action.value} selects connections by listener and client_host"
                                f"{' and client_id' if action is Action.CUT else ''}, not by {', '.join(given)}"
                                + (" (a new connection has no client id yet: to refuse one client, drop its "
                                   "ApiVersions requests)" if "client_id" in given else ""))
        if action is Action.ERROR:
            rule.error_code = _error_code(spec.get("error"))
            for api in rule.apis or ():
                if api not in PARTITION_APIS and not _has_top_level_error(api):
                    raise RuleError(f"{ApiKey(api).name} has no error code of its own to answer with: use delay, "
                                    "drop or observe")
            if rule.apis is None or not rule.apis <= PARTITION_APIS:
                if rule.topic is not None or rule.partition is not None:
                    raise RuleError("errors by topic or partition are answered for produce and fetch only")
        elif action is Action.DELAY:
            delay = _optional_int(spec, "delay_ms")
            if delay is None or delay < 0:
                raise RuleError("delay_ms: how long to hold each request, in ms")
            rule.delay_ms = delay
        elif action is Action.LATENCY:
            latency, jitter = _optional_int(spec, "latency_ms"), _optional_int(spec, "jitter_ms") or 0
            if latency is None or latency < 0 or jitter < 0:
                raise RuleError("latency_ms: how long to hold each response, in ms (jitter_ms: up to how much more)")
            rule.latency_ms, rule.jitter_ms = latency, jitter
        elif action is Action.BANDWIDTH:
            rate = _optional_int(spec, "bytes_per_s")
            if rate is None or rate < 1:
                raise RuleError("bytes_per_s: the rate responses are sent at, at least 1")
            rule.bytes_per_s = rate
        elif action is Action.TRUNCATE:
            fraction = _optional_float(spec, "fraction")
            if fraction is not None:
                if not 0 <= fraction < 1:
                    raise RuleError("fraction: the share of a response's bytes sent before the reset, from 0 to "
                                    "below 1")
                rule.fraction = fraction
        self._rules[rule.id] = rule
        if action is Action.CUT:
            self._cut(rule)
        return rule

    def _cut(self, rule: FaultRule) -> None:
        for connection in list(self.open_connections()):
            if rule.id not in self._rules:
                break  # its count is spent
            if rule._selects_connection(connection.listener_name, connection.client_host) \
                    and rule.client_id in (None, connection.client_id):
                self._hit(rule)
                connection.reset()
        if rule.id in self._rules:  # it acted once, as it was added
            self._spent[rule.id] = self._rules.pop(rule.id)

    def refuses(self, listener: str, client_host: str) -> FaultRule | None:
        """The ``refuse`` rule that closes this new connection, counted; None when none does."""
        for rule in self._acting():
            if rule.action is Action.REFUSE and rule._selects_connection(listener, client_host):
                self._hit(rule)
                return rule
        return None

    def remove(self, rule_id: int) -> bool:
        return (self._rules.pop(rule_id, None) or self._spent.pop(rule_id, None)) is not None

    def clear(self) -> None:
        self._rules.clear()
        self._spent.clear()

    def __iter__(self):
        return iter(sorted([*self._rules.values(), *self._spent.values()], key=lambda rule: rule.id))

    def get(self, rule_id: int) -> FaultRule | None:
        return self._rules.get(rule_id) or self._spent.get(rule_id)

    def match(self, api: int, client_id: str | None, request: object,
              topic_name: Callable[[uuid.UUID], str | None] = lambda topic_id: None, *,
              listener: str | None = None, client_host: str | None = None) -> FaultRule | None:
        """The rule that acts on this request (from ``client_host`` on ``listener``), counted; None when none
        does. Errors of Produce and Fetch are left to ``partition_error``, which the handlers ask per partition.
        ``topic_name`` names the topics a request gives by id only."""
        for rule in self._acting():
            if rule.action in CONNECTION_ACTIONS or (rule.action is Action.ERROR and api in PARTITION_APIS):
                continue
            if _selects(rule, api, client_id) and rule._selects_connection(listener, client_host) \
                    and _mentions(rule, request, topic_name):
                self._hit(rule)
                return rule
        return None

    def partition_error(self, api: int, client_id: str | None, topic: str, partition: int, *,
                        listener: str | None = None, client_host: str | None = None) -> int | None:
        """The error code a rule answers this partition of a Produce or Fetch with, counted; None when none."""
        for rule in self._acting():
            if (rule.action is Action.ERROR and _selects(rule, api, client_id)
                    and rule._selects_connection(listener, client_host)
                    and rule.topic in (None, topic) and rule.partition in (None, partition)):
                self._hit(rule)
                return rule.error_code
        return None

    def _acting(self) -> Iterable[FaultRule]:
        """The rules that act, those whose duration has passed set aside first."""
        if any(rule.ends is not None for rule in self._rules.values()):
            now = trio.current_time()
            for rule in [r for r in self._rules.values() if r.ends is not None and r.ends <= now]:
                self._spent[rule.id] = self._rules.pop(rule.id)
        return list(self._rules.values())

    async def wait_for_hits(self, rule_id: int, hits: int) -> FaultRule:
        """Until rule ``rule_id`` has been hit ``hits`` times (KeyError when there is no such rule)."""
        while True:
            rule = self.get(rule_id)
            if rule is None:
                raise KeyError(rule_id)
            if rule.hits >= hits:
                return rule
            await rule._hit.wait()

    def _hit(self, rule: FaultRule) -> None:
        rule.hits += 1
        rule._hit.set()
        rule._hit = trio.Event()
        if rule.remaining is not None:
            rule.remaining -= 1
            if rule.remaining == 0:
                self._spent[rule.id] = self._rules.pop(rule.id)


def _selects(rule: FaultRule, api: int, client_id: str | None) -> bool:
    return (rule.apis is None or api in rule.apis) and rule.client_id in (None, client_id)


def _mentions(rule: FaultRule, request: object, topic_name: Callable[[uuid.UUID], str | None]) -> bool:
    """Whether the request names the rule's group, topic and partition (those it sets)."""
    if rule.group is not None and rule.group not in _groups(request):
        return False
    if rule.topic is None and rule.partition is None:
        return True
    return any(rule.topic in (None, topic) and rule.partition in (None, partition)
               for topic, partition in _partitions(request, topic_name))


def _groups(request: object) -> set[str]:
    groups = set()
    for name in ("group_id", "key"):
        value = getattr(request, name, None)
        if isinstance(value, str):
            groups.add(value)
    for name in ("groups", "group_ids", "coordinator_keys"):
        values = getattr(request, name, None) or ()
        groups.update(v if isinstance(v, str) else getattr(v, "group_id", "") for v in values)
    return groups


def _partitions(request: object, topic_name: Callable[[uuid.UUID], str | None]
                ) -> Iterable[tuple[str | None, int | None]]:
    """(topic, partition) pairs a request names, partition None where it names a topic only."""
    for list_name in ("topics", "topic_data", "resources"):
        for topic in getattr(request, list_name, None) or ():
            name = getattr(topic, "name", None) or getattr(topic, "topic", None) or getattr(topic, "resource_name", None)
            if not name and isinstance(getattr(topic, "topic_id", None), uuid.UUID):
                name = topic_name(topic.topic_id)
            parts = getattr(topic, "partitions", None) or getattr(topic, "partition_data", None) or ()
            yielded = False
            for part in parts:
                index = part if isinstance(part, int) else next(
                    (getattr(part, attr) for attr in ("partition_index", "partition", "index") if hasattr(part, attr)),
                    None)
                yielded = True
                yield name, index
            if not yielded:
                yield name, None


def top_level_error_response(api: int, version: int, error_code: int):
    """The response of ``api`` carrying nothing but ``error_code`` at its top level, and a null error
    message where it has one (an error rule's answer, or a failed request's); None when that version of
    the response has no such field."""
    response = RESPONSES[ApiKey(api)]()
    fields = {f.name: f for f in response.FIELDS}
    field_ = fields.get("error_code")
    if field_ is None or version not in field_.versions:
        return None
    response.error_code = error_code
    message = fields.get("error_message")
    if message is not None and version in message.nullable_versions:
        response.error_message = None
    return response


def _has_top_level_error(api: int) -> bool:
    response = RESPONSES.get(ApiKey(api))
    return response is not None and any(f.name == "error_code" for f in response.FIELDS)


def _apis(value: object) -> frozenset[int] | None:
    if value is None:
        return None
    items = value if isinstance(value, list) else [value]
    keys = set()
    for item in items:
        if isinstance(item, int) or (isinstance(item, str) and item.isdigit()):
            key = int(item)
            if key not in set(ApiKey):
                raise RuleError(f"api key {key}: not one this broker serves")
            keys.add(key)
            continue
        name = str(item).upper().replace("-", "_")
        if name.replace("_", "") in _API_NAMES:
            keys.add(_API_NAMES[name.replace("_", "")])
        else:
            raise RuleError(f"api {item!r}: an API name (produce, fetch, metadata ...) or key")
    return frozenset(keys)


_API_NAMES = {key.name.replace("_", ""): int(key) for key in ApiKey}


def _error_code(value: object) -> int:
    if isinstance(value, int):
        code = value
    elif isinstance(value, str) and value.lstrip("-").isdigit():
        code = int(value)
    elif isinstance(value, str) and value.upper() in ErrorCode.__members__:
        return int(ErrorCode[value.upper()])
    else:
        raise RuleError(f"error {value!r}: a Kafka error name (NOT_LEADER_OR_FOLLOWER ...) or code")
    try:
        return int(ErrorCode(code))
    except ValueError:
        raise RuleError(f"error {code}: not a Kafka error code") from None


def _optional_str(spec: Mapping[str, object], name: str) -> str | None:
    value = spec.get(name)
    return None if value is None else str(value)


def _optional_float(spec: Mapping[str, object], name: str) -> float | None:
    return _optional_number(spec, name, float)


def _optional_int(spec: Mapping[str, object], name: str) -> int | None:
    return _optional_number(spec, name, int)


def _optional_number(spec: Mapping[str, object], name: str, kind):
    value = spec.get(name)
    if value is None:
        return None
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise RuleError(f"{name} {value!r}: a number") from None
