"""Client quotas as Apache Kafka keeps and enforces them: the quota configs of entities, their validation and
description (AlterClientQuotas, DescribeClientQuotas), and the measurement of clients against them.

Entities are ``user``, ``client-id`` (alone or together) and ``ip``; a name of None is the entity's default
(``<default>``). Each user / client-id entity may set ``producer_byte_rate`` and ``consumer_byte_rate`` (whole
bytes per second), ``request_percentage`` (of one request handler thread) and ``controller_mutation_rate``
(partitions created or deleted per second); an ip entity sets ``connection_creation_rate`` (connections per
second). The functions :func:`describe_quotas` and :func:`plan_alterations` are Kafka's (KRaft controller's)
answers and validation, messages included, as pure functions over the configs.

A client (the principal's name and the request's client id) is held to the first of these that sets the
quota type, as Kafka's DefaultQuotaCallback looks them up:

1. ``/config/users/<user>/clients/<client-id>``     5. ``/config/users/<default>/clients/<default>``
2. ``/config/users/<user>/clients/<default>``       6. ``/config/users/<default>``
3. ``/config/users/<user>``                         7. ``/config/clients/<client-id>``
4. ``/config/users/<default>/clients/<client-id>``  8. ``/config/clients/<default>``

Clients that fall to the same entity at levels 3, 6 (one user, any client id) or 7, 8 (one client id, any
user) share one measurement, as they share Kafka's sensor; the others are measured per user and client id.

Measurement is Kafka's ``Rate`` over a ``SampledStat``: ``quota.window.num`` samples (11) of
``quota.window.size.seconds`` (1 s) each; the rate is their sum over the time they span, counted as at least
``quota.window.num - 1`` whole windows. A client over its quota after a recording is throttled for
``(rate - quota) / quota * window`` milliseconds (Kafka's QuotaUtils.throttleTime); request time quotas
are throttled for at most one window. The controller mutation quota (KIP-599) is Kafka's TokenBucket instead:
``controller.quota.window.num`` windows' worth of partitions ahead at most, refilled at the quota's rate; a
client below zero is refused (strict versions) or throttled (older ones). The clock is injectable
(milliseconds).

:class:`ClientQuotas` is a broker's: the configs, a manager per quota type, and what the request path calls
(:meth:`ClientQuotas.after_request`, the Fetch handler's :meth:`ClientQuotas.fetch_throttle`,
:meth:`ClientQuotas.with_mutation_quota`); it does nothing while no quota is set (``active``).
:class:`ClientQuotaStore` keeps a single node's configs in its data directory (``client-quotas.json``).
"""
from __future__ import annotations

import ipaddress
import json
import math
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from trafka.wire.errors import ErrorCode

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

#: The quota keys of user / client-id entities and their types (as Kafka's QuotaConfig declares them).
CLIENT_QUOTA_KEYS: Mapping[str, str] = {
    PRODUCER_BYTE_RATE: "LONG", CONSUMER_BYTE_RATE: "LONG", REQUEST_PERCENTAGE: "DOUBLE",
    CONTROLLER_MUTATION_RATE: "DOUBLE",
}
#: The quota keys of ip entities.
IP_QUOTA_KEYS: Mapping[str, str] = {CONNECTION_CREATION_RATE: "INT"}

MATCH_EXACT = 0
MATCH_DEFAULT = 1
MATCH_SPECIFIED = 2

DEFAULT_WINDOW_NUM = 11
DEFAULT_WINDOW_SIZE_SECONDS = 1

#: An entity: its (type, name) pairs sorted by type; a name of None is the type's default.
Entity = tuple[tuple[str, "str | None"], ...]
Configs = Mapping[Entity, Mapping[str, float]]


def entity(**names: str | None) -> Entity:
    """``entity(user="alice", client_id=None)``: the entity of those types (``client_id`` is client-id)."""
    return make_entity((key.replace("_", "-"), name) for key, name in names.items())


def make_entity(pairs: Iterable[tuple[str, str | None]]) -> Entity:
    return tuple(sorted(dict(pairs).items()))


def describe_entity(e: Entity) -> str:
    """Kafka's ClientQuotaEntity(entries={...}) text of an entity (its types in Java's hash order)."""
    inner = ", ".join(f"{t}={'null' if n is None else n}" for t, n in _java_order(dict(e)))
    return f"ClientQuotaEntity(entries={{{inner}}})"


def _java_hash(text: str) -> int:
    h = 0
    for ch in text:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h


def _java_order(mapping: Mapping[str, object], capacity: int = 16) -> list[tuple[str, object]]:
    """The iteration order of a java.util.HashMap of these string keys (no resize: few keys)."""
    size = 1
    while size < capacity:
        size *= 2

    def bucket(key: str) -> int:
        h = _java_hash(key)
        return (h ^ (h >> 16)) & (size - 1)
    return sorted(mapping.items(), key=lambda item: bucket(item[0]))  # sorted() is stable: insertion order within


class QuotaRequestError(Exception):
    """A DescribeClientQuotas request Kafka refuses as a whole."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# -- DescribeClientQuotas ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Component:
    entity_type: str
    match_type: int
    match: str | None


def describe_quotas(configs: Configs, components: Sequence[Component], strict: bool) -> list[tuple[Entity, dict]]:
    """The entities that match a DescribeClientQuotas filter, with their quotas (sorted by entity).
    QuotaRequestError as Kafka refuses the filter (INVALID_REQUEST, UNSUPPORTED_VERSION for an unknown type)."""
    exact: dict[str, str | None] = {}
    specified: set[str] = set()
    for c in components:
        if not c.entity_type:
            raise QuotaRequestError(ErrorCode.INVALID_REQUEST, "Invalid empty entity type.")
        if c.entity_type in exact or c.entity_type in specified:
            raise QuotaRequestError(ErrorCode.INVALID_REQUEST,
                                    f"Entity type {c.entity_type} cannot appear more than once in the filter.")
        if c.entity_type not in ENTITY_TYPES:
            raise QuotaRequestError(ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {c.entity_type}")
        if c.match_type == MATCH_EXACT:
            if c.match is None:
                raise QuotaRequestError(ErrorCode.INVALID_REQUEST,
                                        "Request specified MATCH_TYPE_EXACT, but set match string to null.")
            exact[c.entity_type] = c.match
        elif c.match_type == MATCH_DEFAULT:
            if c.match is not None:
                raise QuotaRequestError(ErrorCode.INVALID_REQUEST,
                                        "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
            exact[c.entity_type] = None
        elif c.match_type == MATCH_SPECIFIED:
            if c.match is not None:
                raise QuotaRequestError(ErrorCode.INVALID_REQUEST,
                                        "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
            specified.add(c.entity_type)
        else:
            raise QuotaRequestError(ErrorCode.INVALID_REQUEST, f"Unknown match type {c.match_type}")
    named = set(exact) | specified
    if IP in named and (USER in named or CLIENT_ID in named):
        raise QuotaRequestError(ErrorCode.INVALID_REQUEST, "Invalid entity filter component combination. IP filter "
                                "component should not be used with user or clientId filter component.")
    found = []
    for e, values in configs.items():
        types = dict(e)
        if strict and len(types) != len(exact) + len(specified):
            continue
        if any(t not in types or types[t] != name for t, name in exact.items()):
            continue
        if any(t not in types for t in specified):
            continue
        found.append((e, dict(values)))
    return sorted(found, key=lambda item: [(t, n is None, n or "") for t, n in item[0]])


# -- AlterClientQuotas ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Alteration:
    """One entry of an AlterClientQuotas request: the entity's (type, name) pairs as sent, and its operations
    (key, value, remove)."""
    pairs: tuple[tuple[str, str | None], ...]
    ops: tuple[tuple[str, float, bool], ...]


@dataclass(frozen=True)
class AlterResult:
    #: The entity as answered: its (type, name) pairs.
    pairs: tuple[tuple[str, str | None], ...]
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None


def valid_ip_entity(name: str | None) -> bool:
    """Kafka accepts an IP address or a host name it can resolve (InetAddress.getByName); may block on DNS."""
    if name is None:
        return True
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        pass
    try:
        socket.getaddrinfo(name, None)
        return True
    except (OSError, UnicodeError):
        return False


def _check_value(key_types: Mapping[str, str], key: str, value: float) -> str | None:
    kind = key_types.get(key)
    if kind is None:
        return f"Invalid configuration key {key}"
    if value <= 0.0:
        return f"Quota {key} must be greater than 0"
    if kind == "DOUBLE":
        return None
    if kind == "INT" and value > 2**31 - 1:
        return f"Proposed value for {key} is too large for an INT."
    if kind == "LONG" and value > 2.0**63:
        return f"Proposed value for {key} is too large for a LONG."
    if abs(math.fmod(value, 1.0)) > 1e-6:
        return f"{key} cannot be a fractional value."
    return None


def _check_entity(types: Mapping[str, str | None], is_valid_ip: Callable[[str | None], bool]
                  ) -> tuple[Mapping[str, str] | None, str | None]:
    """The quota keys the entity may set, or Kafka's message saying why it cannot be altered."""
    if not types:
        return None, "Invalid empty client quota entity"
    for entity_type, name in _java_order(types, len(types)):
        if entity_type not in ENTITY_TYPES:
            return None, f"Unhandled client quota entity type: {entity_type}"
        if name is not None and not name:
            return None, f"Empty {entity_type} not supported"
    if IP in types:
        if USER in types or CLIENT_ID in types:
            # (Kafka's message, without its missing space)
            return None, "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"
        if not is_valid_ip(types[IP]):
            return None, f"{types[IP]} is not a valid IP or resolvable host."
        return IP_QUOTA_KEYS, None
    return CLIENT_QUOTA_KEYS, None


#: The order of an entity's types in Kafka's answer.
_ANSWER_ORDER = {CLIENT_ID: 0, USER: 1, IP: 2}


def plan_alterations(configs: Configs, alterations: Sequence[Alteration],
                     is_valid_ip: Callable[[str | None], bool] = valid_ip_entity,
                     ) -> tuple[list[AlterResult], dict[Entity, dict[str, float]]]:
    """Kafka's controller's handling of one AlterClientQuotas request (a pure function but for ``is_valid_ip``).

    Per entry: the entity's names by type (a type named twice: the last name); a key altered twice fails the
    entity, and so does an entity altered twice (``Ignoring duplicate entity …``: the first alteration stands);
    then the entity's types and names, and each set key and value, are checked with Kafka's messages. Returns
    one result per entity, in the order first seen, and the configs after the accepted alterations.
    """
    results: dict[Entity, AlterResult] = {}
    after = {e: dict(values) for e, values in configs.items()}
    for alteration in alterations:
        types = dict(alteration.pairs)
        e = make_entity(types.items())
        pairs = tuple(sorted(types.items(), key=lambda pair: _ANSWER_ORDER.get(pair[0], 3)))  # as Kafka answers
        keys: dict[str, float | None] = {}
        duplicate = False
        for key, value, remove in alteration.ops:
            if key in keys:
                duplicate = True
            else:
                keys[key] = None if remove else value
        if duplicate or e in results:
            message = f"Ignoring duplicate entity {describe_entity(e)}"
            results[e] = AlterResult(pairs, ErrorCode.INVALID_REQUEST, message)
            continue
        key_types, message = _check_entity(types, is_valid_ip)
        if message is None:
            current = after.get(e, {})
            changed = dict(current)
            for key, value in _java_order(keys, len(keys)):
                if value is None:
                    changed.pop(key, None)
                    continue
                message = _check_value(key_types, key, value)
                if message is not None:
                    break
                changed[key] = float(value)
            if message is None:
                if changed:
                    after[e] = changed
                else:
                    after.pop(e, None)
        results[e] = AlterResult(pairs) if message is None else AlterResult(pairs, ErrorCode.INVALID_REQUEST, message)
    return list(results.values()), after


# -- measurement ------------------------------------------------------------------------------------------------

def java_round(value: float) -> int:
    return math.floor(value + 0.5)


class Rate:
    """Kafka's Rate over a WindowedSum: ``samples`` samples of ``window_ms`` each, per second. Samples are
    ``[start_ms, last_ms, value]``."""

    __slots__ = ("current", "num", "samples", "window_ms")

    def __init__(self, num: int = DEFAULT_WINDOW_NUM, window_ms: int = DEFAULT_WINDOW_SIZE_SECONDS * 1000) -> None:
        self.samples: list[list[float]] = []
        self.current = 0
        self.num = num
        self.window_ms = window_ms

    def record(self, value: float, now_ms: int) -> None:
        sample = self._current(now_ms)
        if now_ms - sample[0] >= self.window_ms:
            self.current = (self.current + 1) % (self.num + 1)  # one extra sample: the one overlapping the window
            if self.current >= len(self.samples):
                sample = [now_ms, now_ms, 0.0]
                self.samples.append(sample)
            else:
                sample = self.samples[self.current]
                sample[0] = sample[1] = now_ms
                sample[2] = 0.0
        sample[2] += value
        sample[1] = now_ms

    def _current(self, now_ms: int) -> list[float]:
        if not self.samples:
            self.samples.append([now_ms, now_ms, 0.0])
        return self.samples[self.current]

    def _purge(self, now_ms: int) -> None:
        expire = self.num * self.window_ms
        for sample in self.samples:
            if now_ms - sample[1] >= expire:
                sample[0] = sample[1] = now_ms
                sample[2] = 0.0

    def window_size(self, now_ms: int) -> int:
        """The time the rate is measured over, in ms: at least ``num - 1`` whole windows."""
        self._purge(now_ms)
        if not self.samples:
            self.samples.append([now_ms, now_ms, 0.0])
        elapsed = now_ms - min(sample[0] for sample in self.samples)
        full = elapsed // self.window_ms
        if full < self.num - 1:
            elapsed += (self.num - 1 - full) * self.window_ms
        return max(int(elapsed), 1)

    def measure(self, now_ms: int) -> float:
        self._purge(now_ms)
        total = sum(sample[2] for sample in self.samples)
        return total / (self.window_size(now_ms) / 1000)


def throttle_time_ms(rate: Rate, bound: float, now_ms: int) -> int:
    """Kafka's QuotaUtils.throttleTime: how long to hold a client back so that its rate falls to ``bound``
    (0 when within it)."""
    value = rate.measure(now_ms)
    if value <= bound:
        return 0
    return java_round((value - bound) / bound * rate.window_size(now_ms))


class TokenBucket:
    """Kafka's TokenBucket: up to ``quota * samples * window`` tokens, refilled at ``quota`` per second, each
    recording taking its value; below zero the client is over its quota (KIP-599)."""

    __slots__ = ("last_ms", "tokens")

    def __init__(self, burst: float, now_ms: int) -> None:
        self.tokens = burst
        self.last_ms = now_ms

    def measure(self, quota: float, burst: float, now_ms: int) -> float:
        self.tokens = min(burst, self.tokens + quota * (now_ms - self.last_ms) / 1000)
        self.last_ms = now_ms
        return self.tokens

    def record(self, value: float, quota: float, burst: float, now_ms: int) -> None:
        self.measure(quota, burst, now_ms)
        self.tokens = min(burst, self.tokens - value)


def monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


#: Measurements kept before those of idle clients are dropped.
MAX_IDLE_SENSORS = 10_000

#: The measurement a client falls to: (user, client-id) as Kafka's sensor tags ("" where shared).
Tags = tuple[str, str]

_LEVELS = (
    # (user entity, client-id entity) by precedence; "u" / "c": the client's own name, None: <default>,
    # absent (False): not part of the entity. Then the tags: which of (user, client-id) the sensor keeps.
    (("u", "c"), (True, True)), (("u", None), (True, True)), (("u", False), (True, False)),
    ((None, "c"), (True, True)), ((None, None), (True, True)), ((None, False), (True, False)),
    ((False, "c"), (False, True)), ((False, None), (False, True)),
)


def _entity_at(level: tuple, user: str, client_id: str) -> Entity:
    u, c = level
    pairs = []
    if c is not False:
        pairs.append((CLIENT_ID, client_id if c == "c" else None))
    if u is not False:
        pairs.append((USER, user if u == "u" else None))
    return tuple(pairs)


def resolve_quota(limits: Mapping[Entity, float], user: str, client_id: str) -> tuple[Tags, float] | None:
    """The sensor tags and the quota of a client by Kafka's precedence, or None when no entity sets one."""
    for level, (keep_user, keep_client) in _LEVELS:
        limit = limits.get(_entity_at(level, user, client_id))
        if limit is not None:
            return (user if keep_user else "", client_id if keep_client else ""), limit
    return None


class ClientQuotaManager:
    """One quota type's measurement of clients (Kafka's ClientQuotaManager): ``record`` returns how long to
    throttle. Does nothing (``enabled`` False) while no entity sets this quota type."""

    def __init__(self, quota_type: str, *, window_num: int = DEFAULT_WINDOW_NUM,
                 window_size_seconds: int = DEFAULT_WINDOW_SIZE_SECONDS, clock: Callable[[], int] | None = None,
                 max_throttle_ms: int | None = None) -> None:
        self.quota_type = quota_type
        self.window_num = window_num
        self.window_size_seconds = window_size_seconds
        self.clock = clock or monotonic_ms
        self.max_throttle_ms = max_throttle_ms
        self.enabled = False
        self._limits: dict[Entity, float] = {}
        self._resolved: dict[tuple[str, str], tuple[Tags, float] | None] = {}
        self._sensors: dict[Tags, Rate] = {}
        self._buckets: dict[Tags, TokenBucket] = {}

    def configure(self, limits: Mapping[Entity, float]) -> None:
        """The quota of each entity that sets this type (the measurements made so far are kept)."""
        self._limits = dict(limits)
        self._resolved = {}
        self.enabled = bool(self._limits)

    def quota(self, user: str, client_id: str) -> tuple[Tags, float] | None:
        key = (user, client_id)
        try:
            return self._resolved[key]
        except KeyError:
            found = self._resolved[key] = resolve_quota(self._limits, user, client_id)
            return found

    def _sensor(self, tags: Tags) -> Rate:
        sensor = self._sensors.get(tags)
        if sensor is None:
            if len(self._sensors) >= MAX_IDLE_SENSORS:
                self._forget_idle()
            sensor = self._sensors[tags] = Rate(self.window_num, self.window_size_seconds * 1000)
        return sensor

    def _forget_idle(self) -> None:
        """Drop the measurements of clients idle for all their windows (they measure nothing any more: a new one
        is the same), as Kafka expires inactive sensors; and the look-ups of clients no longer seen."""
        now = self.clock()
        expire = self.window_num * self.window_size_seconds * 1000
        self._sensors = {tags: rate for tags, rate in self._sensors.items()
                         if any(now - sample[1] < expire for sample in rate.samples)}
        self._resolved = {}

    def record(self, user: str, client_id: str, value: float, now_ms: int | None = None) -> int:
        """Record ``value`` for the client; the throttle time in ms when that puts it over its quota."""
        if not self.enabled:
            return 0
        found = self.quota(user, client_id)
        if found is None:
            return 0
        tags, limit = found
        now = self.clock() if now_ms is None else now_ms
        sensor = self._sensor(tags)
        sensor.record(value, now)
        throttle = throttle_time_ms(sensor, limit, now)
        if self.max_throttle_ms is not None:
            throttle = min(throttle, self.max_throttle_ms)
        return throttle

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int | None = None) -> None:
        """Take back a recording (a Fetch answered empty because it was throttled)."""
        found = self.quota(user, client_id) if self.enabled else None
        if found is not None:
            self._sensor(found[0]).record(-value, self.clock() if now_ms is None else now_ms)

    def max_value_in_window(self, user: str, client_id: str) -> float | None:
        """The most a client may take in one quota window (Kafka caps a Fetch's size by it); None: no quota."""
        found = self.quota(user, client_id) if self.enabled else None
        if found is None:
            return None
        return found[1] * (self.window_num - 1) * self.window_size_seconds

    def mutate(self, user: str, client_id: str, permits: float, *, strict: bool, now_ms: int | None = None) -> int:
        """Kafka's controller mutation quota (KIP-599) for ``permits`` partitions created or deleted: strict, a
        client already over its quota is refused (the throttle time returned, nothing recorded) and otherwise
        recorded; permissive, always recorded, the throttle time returned when that takes it over. 0: allowed
        and not throttled."""
        found = self.quota(user, client_id) if self.enabled else None
        if found is None:
            return 0
        tags, quota = found
        now = self.clock() if now_ms is None else now_ms
        burst = quota * self.window_num * self.window_size_seconds
        bucket = self._buckets.get(tags)
        if bucket is None:
            bucket = self._buckets[tags] = TokenBucket(burst, now)
        if strict:
            tokens = bucket.measure(quota, burst, now)
            if tokens < 0:
                return java_round(-tokens / quota * 1000)
            bucket.record(permits, quota, burst, now)
            return 0
        bucket.record(permits, quota, burst, now)
        tokens = bucket.measure(quota, burst, now)
        return java_round(-tokens / quota * 1000) if tokens < 0 else 0

    def tags(self, user: str, client_id: str) -> Tags | None:
        found = self.quota(user, client_id) if self.enabled else None
        return None if found is None else found[0]


_PRODUCE = 0
_FETCH = 1
#: Requests Kafka does not hold to request_percentage: the SASL exchange (handled before KafkaApis) and the
#: cluster's own (transaction markers; replica fetches are told by their replica id).
_REQUEST_QUOTA_EXEMPT = frozenset({17, 36, 27, 4, 5, 6, 7, 56})
_NANOS_TO_PERCENTAGE_SECONDS = 100.0 / 1e9

#: From which version each API's client backs off by itself when told a throttle time (KIP-219): the broker
#: then answers at once and mutes the connection; older clients get their answer only after the throttle
#: time (Kafka's AbstractResponse.shouldClientThrottle).
CLIENT_THROTTLES_FROM: Mapping[int, int] = {
    0: 6, 1: 8, 2: 3, 3: 6, 8: 4, 9: 4, 10: 2, 11: 3, 12: 2, 13: 2, 14: 2, 15: 2, 16: 2, 18: 2, 19: 3, 20: 2,
    21: 1, 22: 1, 24: 1, 25: 1, 26: 1, 28: 1, 29: 1, 30: 1, 31: 1, 32: 2, 33: 1, 34: 1, 35: 1, 37: 1, 38: 1,
    39: 1, 40: 1, 41: 1, 42: 1, 43: 0, 44: 0, 45: 0, 46: 0, 47: 0, 50: 0, 51: 0, 75: 0,
}


#: The APIs under the controller mutation quota: their request's list of topics and their response's list of results.
_MUTATIONS: Mapping[int, tuple[str, str]] = {19: ("topics", "topics"), 20: ("topics", "responses"),
                                             37: ("topics", "results")}
MUTATION_APIS = frozenset(_MUTATIONS)
#: From which version Kafka refuses a topic over the controller mutation quota (THROTTLING_QUOTA_EXCEEDED).
_STRICT_SINCE: Mapping[int, int] = {19: 6, 20: 5, 37: 3}


def _throttled_result(api_key: int, item: object, response: object) -> object:
    """The result of a topic left out for the controller mutation quota, of the response's own result type."""
    from trafka.wire.messages import CreatePartitionsResponse, CreateTopicsResponse, DeleteTopicsResponse

    code, message = ErrorCode.THROTTLING_QUOTA_EXCEEDED, None  # (Kafka says no more)
    if api_key == 19:
        return CreateTopicsResponse.CreatableTopicResult(name=item.name, error_code=code, error_message=message)
    if api_key == 20:
        if isinstance(item, str):
            return DeleteTopicsResponse.DeletableTopicResult(name=item, error_code=code, error_message=message)
        return DeleteTopicsResponse.DeletableTopicResult(name=item.name, topic_id=item.topic_id, error_code=code,
                                                         error_message=message)
    return CreatePartitionsResponse.CreatePartitionsTopicResult(name=item.name, error_code=code, error_message=message)


def client_throttles(api_key: int, version: int) -> bool:
    """Whether a client of this API and version backs off by itself for the throttle time it is told."""
    since = CLIENT_THROTTLES_FROM.get(api_key)
    return since is not None and version >= since


def _is_replica_fetch(request: object, version: int) -> bool:
    if version >= 15:
        state = getattr(request, "replica_state", None)
        return state is not None and state.replica_id >= 0
    return getattr(request, "replica_id", -1) >= 0


def user_of(principal: str | None) -> str:
    """The user name quotas know a principal by (``User:alice`` -> ``alice``; none: ``ANONYMOUS``)."""
    if not principal:
        return "ANONYMOUS"
    return principal.partition(":")[2] or principal


class ClientQuotas:
    """A broker's client quotas: the configs of every entity, and a manager per quota type. ``active`` is True
    while any client quota (other than connection creation rates) is set: the request path tests only it."""

    def __init__(self, *, window_num: int = DEFAULT_WINDOW_NUM, window_size_seconds: int = DEFAULT_WINDOW_SIZE_SECONDS,
                 clock: Callable[[], int] | None = None) -> None:
        options = {"window_num": window_num, "window_size_seconds": window_size_seconds, "clock": clock}
        self.produce = ClientQuotaManager("Produce", **options)
        self.fetch = ClientQuotaManager("Fetch", **options)
        self.request = ClientQuotaManager("Request", max_throttle_ms=window_size_seconds * 1000, **options)
        self.controller_mutation = ClientQuotaManager("ControllerMutation", **options)
        self.configs: dict[Entity, dict[str, float]] = {}
        #: connection_creation_rate by ip (None: the default of every ip).
        self.ip_connection_rates: dict[str | None, float] = {}
        self.active = False
        #: Called with (quota type, tags, throttle ms) for each throttled request (the broker's metrics).
        self.on_throttle: Callable[[str, Tags, int], None] | None = None
        #: Called after each change of the configs (connection quotas follow the ip rates).
        self.listeners: list[Callable[[ClientQuotas], None]] = []

    @classmethod
    def from_properties(cls, properties: Mapping[str, str], clock: Callable[[], int] | None = None) -> ClientQuotas:
        """The broker's quotas with its ``quota.window.num`` and ``quota.window.size.seconds`` (each at least 1)."""
        from trafka.broker.config import broker_setting

        quotas = cls(window_num=broker_setting(properties, "quota.window.num"),
                     window_size_seconds=broker_setting(properties, "quota.window.size.seconds"),
                     clock=clock)
        # The controller mutation quota has windows of its own, as on Kafka.
        quotas.controller_mutation.window_num = broker_setting(properties, "controller.quota.window.num")
        quotas.controller_mutation.window_size_seconds = broker_setting(properties,
                                                                        "controller.quota.window.size.seconds")
        return quotas

    def update(self, configs: Configs) -> None:
        """Make ``configs`` the quota configs (every entity's, as they are now)."""
        self.configs = {e: dict(values) for e, values in configs.items() if values}
        by_key: dict[str, dict[Entity, float]] = {key: {} for key in CLIENT_QUOTA_KEYS}
        ip_rates: dict[str | None, float] = {}
        for e, values in self.configs.items():
            for key, value in values.items():
                if key in by_key and IP not in dict(e):
                    by_key[key][e] = value
                elif key == CONNECTION_CREATION_RATE and len(e) == 1 and e[0][0] == IP:
                    ip_rates[e[0][1]] = value
        self.produce.configure(by_key[PRODUCER_BYTE_RATE])
        self.fetch.configure(by_key[CONSUMER_BYTE_RATE])
        self.request.configure(by_key[REQUEST_PERCENTAGE])
        self.controller_mutation.configure(by_key[CONTROLLER_MUTATION_RATE])
        self.ip_connection_rates = ip_rates
        self.active = any(m.enabled for m in (self.produce, self.fetch, self.request, self.controller_mutation))
        for listener in list(self.listeners):
            listener(self)

    def after_request(self, api_key: int, version: int, principal: str, client_id: str | None, request: object,
                      response: object, request_size: int, handling_ns: int) -> int:
        """Record a handled request against the client's quotas, as Kafka's KafkaApis does: a Produce's size
        (Kafka's request.sizeInBytes) against ``producer_byte_rate``, the time it took against
        ``request_percentage`` (every API but the SASL exchange, transaction markers, replica fetches and
        Produce with acks=0; a consumer's Fetch throttled so is answered empty). Fetch's bytes are recorded by the
        Fetch handler (:meth:`fetch_throttle`). Sets the response's ``throttle_time_ms`` and returns how long the
        connection is to be muted (ms)."""
        user = user_of(principal)
        client = client_id or ""
        throttle = 0
        if api_key == _PRODUCE:
            if self.produce.enabled:
                throttle = self.produce.record(user, client, request_size)
                self.throttled(self.produce, user, client, throttle)
            exempt = getattr(request, "acks", 1) == 0
        else:
            exempt = api_key in _REQUEST_QUOTA_EXEMPT or (api_key == _FETCH and _is_replica_fetch(request, version))
        if self.request.enabled and not exempt:
            request_throttle = self.request.record(user, client, handling_ns * _NANOS_TO_PERCENTAGE_SECONDS)
            self.throttled(self.request, user, client, request_throttle)
            throttle = max(throttle, request_throttle)
            if request_throttle and api_key == _FETCH and getattr(response, "responses", None):
                # Kafka answers a throttled consumer's Fetch empty, its bytes taken back from its quota.
                if self.fetch.enabled:
                    self.fetch.unrecord(user, client, sum(p.records.size for t in response.responses
                                                          for p in t.partitions if p.records))
                response.responses = []
        if response is not None:
            existing = getattr(response, "throttle_time_ms", None)
            if existing is not None:
                throttle = max(throttle, existing)
                if throttle:
                    response.throttle_time_ms = throttle
        return throttle

    async def with_mutation_quota(self, api_key: int, version: int, principal: str | None, client_id: str | None,
                                  request, handle, partitions_of) -> tuple[object, int]:
        """Run ``handle(request)`` for a CreateTopics, DeleteTopics or CreatePartitions under the client's
        ``controller_mutation_rate``, as Kafka's controller applies it to each topic's partitions in turn: from
        the versions that can say so (CreateTopics v6, DeleteTopics v5, CreatePartitions v3), a topic asked for
        while the client is over its quota is answered THROTTLING_QUOTA_EXCEEDED and left out; earlier versions
        are all served and the client throttled. ``partitions_of(api_key, item)`` says how many partitions a
        topic of the request creates or deletes. Returns the response and the throttle time (ms)."""
        user, client = user_of(principal), client_id or ""
        field, result_field = _MUTATIONS[api_key]
        if api_key == 20 and version < 6:
            field = "topic_names"  # (names alone before v6)
        items = list(getattr(request, field))
        strict = version >= _STRICT_SINCE[api_key]
        manager = self.controller_mutation
        throttled: dict[int, int] = {}
        charged: dict[int, int] = {}
        if strict:
            for index, item in enumerate(items):
                permits = partitions_of(api_key, item)
                throttle = manager.mutate(user, client, permits, strict=True)
                if throttle:
                    throttled[index] = throttle
                else:
                    charged[index] = permits
            setattr(request, field, [item for index, item in enumerate(items) if index not in throttled])
        else:
            charged = {index: partitions_of(api_key, item) for index, item in enumerate(items)}
        response = await handle(request)
        results = list(getattr(response, result_field))
        kept = [index for index in range(len(items)) if index not in throttled]
        refund = 0
        for index, result in zip(kept, results):
            if result.error_code != ErrorCode.NONE:  # Kafka counts only what it creates or deletes
                refund += charged.get(index, 0)
                charged.pop(index, None)
        throttle_ms = 0
        if strict:
            if refund:
                manager.mutate(user, client, -refund, strict=False)
            merged = iter(results)
            out = []
            for index, item in enumerate(items):
                if index in throttled:
                    out.append(_throttled_result(api_key, item, response))
                else:
                    out.append(next(merged))
            out.extend(merged)
            setattr(response, result_field, out)
            throttle_ms = max(throttled.values(), default=0)
        else:
            throttle_ms = manager.mutate(user, client, sum(charged.values()), strict=False) if charged else 0
        if throttle_ms:
            self.throttled(manager, user, client, throttle_ms)
            response.throttle_time_ms = max(response.throttle_time_ms, throttle_ms)
        return response, throttle_ms

    def fetch_throttle(self, principal: str | None, client_id: str | None, response_size: int) -> int:
        """Record a consumer's Fetch response of ``response_size`` bytes; when that puts it over its
        ``consumer_byte_rate``, the recording is taken back and the throttle time returned (the response is
        then sent empty, as Kafka sends it)."""
        user, client = user_of(principal), client_id or ""
        throttle = self.fetch.record(user, client, response_size)
        if throttle:
            self.fetch.unrecord(user, client, response_size)
            self.throttled(self.fetch, user, client, throttle)
        return throttle

    def fetch_max_bytes(self, principal: str | None, client_id: str | None, max_bytes: int) -> int:
        """``max_bytes``, or less: the most one Fetch may return to this consumer is its quota over
        ``quota.window.num - 1`` windows (as Kafka caps a Fetch)."""
        most = self.fetch.max_value_in_window(user_of(principal), client_id or "")
        return max_bytes if most is None else int(min(most, max_bytes))

    def throttled(self, manager: ClientQuotaManager, user: str, client_id: str, throttle_ms: int) -> None:
        if throttle_ms > 0 and self.on_throttle is not None:
            tags = manager.tags(user, client_id)
            if tags is not None:
                self.on_throttle(manager.quota_type, tags, throttle_ms)


# -- a single node's store --------------------------------------------------------------------------------------

QUOTAS_FILE = "client-quotas.json"
_FILE_VERSION = 1


def encode_configs(configs: Configs) -> bytes:
    entities = [{"entity": dict(e), "quotas": dict(sorted(values.items()))}
                for e, values in sorted(configs.items(), key=lambda item: json.dumps(item[0]))]
    return json.dumps({"version": _FILE_VERSION, "entities": entities}, indent=1).encode("utf-8") + b"\n"


def decode_configs(data: bytes) -> dict[Entity, dict[str, float]]:
    node = json.loads(data)
    if not isinstance(node, dict) or node.get("version") != _FILE_VERSION or not isinstance(node.get("entities"), list):
        raise ValueError(f'expected {{"version": {_FILE_VERSION}, "entities": [...]}}')
    configs: dict[Entity, dict[str, float]] = {}
    for item in node["entities"]:
        e = make_entity(item["entity"].items())
        configs[e] = {str(k): float(v) for k, v in item["quotas"].items()}
    return configs


class ClientQuotaStore:
    """A single node's quota configs, one JSON file in the data directory written atomically on every change
    (temporary file, fsync, rename, fsync of the directory); ``path`` None keeps them in memory only."""

    def __init__(self, path: Path | None, configs: Configs | None = None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self.configs: dict[Entity, dict[str, float]] = {e: dict(v) for e, v in (configs or {}).items()}

    @classmethod
    def load(cls, data_dir: Path) -> ClientQuotaStore:
        path = Path(data_dir) / QUOTAS_FILE
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return cls(path)
        try:
            return cls(path, decode_configs(raw))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"{path}: not a client quota store: {exc}") from None

    def alter(self, alterations: Sequence[Alteration], validate_only: bool = False,
              is_valid_ip: Callable[[str | None], bool] = valid_ip_entity) -> tuple[list[AlterResult], bool]:
        """Validate and apply one AlterClientQuotas request (blocking: file writes, DNS); the results, and
        whether the configs changed."""
        with self._lock:
            results, after = plan_alterations(self.configs, alterations, is_valid_ip)
            if validate_only or after == self.configs:
                return results, False
            if self.path is not None:
                _write_atomically(self.path, encode_configs(after))
            self.configs = after
            return results, True


def _write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data``: a temporary file, fsynced, renamed over the old one, the directory fsynced."""
    import os

    from trafka.storage.checkpoints import fsync_path

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_path(path.parent)
