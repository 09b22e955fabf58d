"""The client quotas of a cluster, kept in ZooKeeper where Kafka (ZooKeeper mode) keeps them:

``/config/users/<user>``                    a user's quotas (beside its SCRAM credentials, which stay)
``/config/users/<user>/clients/<client>``   a user's quotas for one client id
``/config/clients/<client>``                a client id's quotas
``/config/ips/<ip>``                        an ip's connection creation rate

with ``<default>`` for an entity type's default, user names and client ids sanitized (URL-encoded as Kafka's
Sanitizer does), each node ``{"version":1,"config":{"producer_byte_rate":"1048576",...}}``, and every change
announced by a ``/config/changes/config_change_<seq>`` node naming its ``entity_path`` (``users/alice``,
``users/alice/clients/app``, ``clients/app``, ``ips/10.0.0.1``). Every broker watches the announcements and
reads the quotas again when one comes: a quota altered on one broker is enforced by all of them at once.
Announcements older than 15 minutes are deleted then, as Kafka's brokers delete them.
"""
from __future__ import annotations

import json
import logging
import time

import trio
from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError

from trafka.broker.cluster import CoordinationError
from trafka.broker.cluster.zookeeper import CONFIG_CHANGES, ZooKeeperCluster
from trafka.broker.security.credentials import desanitize, sanitize
from trafka.broker.security.quotas import (
    CLIENT_ID,
    CLIENT_QUOTA_KEYS,
    IP,
    IP_QUOTA_KEYS,
    USER,
    Alteration,
    AlterResult,
    ClientQuotas,
    Entity,
    plan_alterations,
    valid_ip_entity,
)

log = logging.getLogger(__name__)

DEFAULT = "<default>"
_QUOTA_KEYS = {**CLIENT_QUOTA_KEYS, **IP_QUOTA_KEYS}
#: How often the quotas are read again even without an announcement (a missed watch costs at most this).
REREAD_INTERVAL_S = 30.0
#: Announcements older than this are deleted when the quotas are read (Kafka's changeExpirationMs, 15 minutes).
ANNOUNCEMENT_EXPIRY_MS = 15 * 60 * 1000


def _name(name: str | None, sanitized: bool = True) -> str:
    if name is None:
        return DEFAULT
    return sanitize(name) if sanitized else name


def _unname(node: str, sanitized: bool = True) -> str | None:
    if node == DEFAULT:
        return None
    return desanitize(node) if sanitized else node


def entity_path(e: Entity) -> str:
    """The entity's path under ``/config`` (``users/alice/clients/app``)."""
    types = dict(e)
    if IP in types:
        return f"ips/{_name(types[IP], sanitized=False)}"
    if USER in types and CLIENT_ID in types:
        return f"users/{_name(types[USER])}/clients/{_name(types[CLIENT_ID])}"
    if USER in types:
        return f"users/{_name(types[USER])}"
    return f"clients/{_name(types[CLIENT_ID])}"


def format_value(key: str, value: float) -> str:
    """A quota as Kafka writes it into ZooKeeper: whole numbers for LONG and INT quotas, Java's double text
    for the others."""
    if _QUOTA_KEYS.get(key) in ("LONG", "INT"):
        return str(int(value))
    if value == int(value) and abs(value) < 1e7:
        return f"{value:.1f}"
    text = repr(float(value))
    if "e" in text:
        mantissa, exponent = text.split("e")
        if "." not in mantissa:
            mantissa += ".0"
        text = f"{mantissa}E{int(exponent)}"
    return text


def _quotas_of(data: bytes, keys) -> dict[str, float]:
    try:
        node = json.loads(data)
        config = node.get("config", {}) if isinstance(node, dict) else {}
    except (UnicodeDecodeError, json.JSONDecodeError):
        return {}
    quotas = {}
    for key, value in config.items():
        if key in keys:
            try:
                quotas[key] = float(value)
            except (TypeError, ValueError):
                log.error("ignoring the quota %s=%r: not a number", key, value)
    return quotas


def read_quotas(client: KazooClient) -> dict[Entity, dict[str, float]]:
    """Every entity's quotas in ZooKeeper (blocking: from a worker thread)."""
    configs: dict[Entity, dict[str, float]] = {}

    def children(path: str) -> list[str]:
        try:
            return client.get_children(path)
        except NoNodeError:
            return []

    def read(path: str, e: Entity, keys) -> None:
        try:
            data, _ = client.get(path)
        except NoNodeError:
            return
        quotas = _quotas_of(data, keys)
        if quotas:
            configs[e] = quotas

    for user_node in children("/config/users"):
        user = _unname(user_node)
        read(f"/config/users/{user_node}", ((USER, user),), CLIENT_QUOTA_KEYS)
        for client_node in children(f"/config/users/{user_node}/clients"):
            read(f"/config/users/{user_node}/clients/{client_node}", ((CLIENT_ID, _unname(client_node)), (USER, user)),
                 CLIENT_QUOTA_KEYS)
    for client_node in children("/config/clients"):
        read(f"/config/clients/{client_node}", ((CLIENT_ID, _unname(client_node)),), CLIENT_QUOTA_KEYS)
    for ip_node in children("/config/ips"):
        read(f"/config/ips/{ip_node}", ((IP, _unname(ip_node, sanitized=False)),), IP_QUOTA_KEYS)
    return configs


def purge_announcements(client: KazooClient, now_ms: int, expiry_ms: int = ANNOUNCEMENT_EXPIRY_MS) -> int:
    """Delete the ``/config/changes`` announcements older than ``expiry_ms``, as Kafka's brokers purge them (every
    broker may: one already gone is skipped). Returns how many were deleted (blocking: from a worker thread)."""
    deleted = 0
    try:
        children = client.get_children(CONFIG_CHANGES)
    except NoNodeError:
        return 0
    for child in children:
        path = f"{CONFIG_CHANGES}/{child}"
        try:
            stat = client.exists(path)
            if stat is not None and now_ms - stat.ctime > expiry_ms:
                client.delete(path)
                deleted += 1
        except NoNodeError:
            continue
    return deleted


def write_quotas(client: KazooClient, changes: dict[Entity, dict[str, float]]) -> None:
    """Replace the quotas of each entity in ``changes`` (an empty mapping removes them), keeping the node's other
    settings (a user's SCRAM credentials), and announce each change (blocking: from a worker thread)."""
    for e, quotas in changes.items():
        path = f"/config/{entity_path(e)}"
        while True:
            try:
                data, stat = client.get(path)
            except NoNodeError:
                config = {key: format_value(key, value) for key, value in sorted(quotas.items())}
                try:
                    client.create(path, json.dumps({"version": 1, "config": config}, separators=(",", ":")).encode(),
                                  makepath=True)
                except NodeExistsError:
                    continue
                break
            try:
                node = json.loads(data) if data else {}
            except (UnicodeDecodeError, json.JSONDecodeError):
                node = {}
            config = {key: value for key, value in (node.get("config") or {}).items() if key not in _QUOTA_KEYS}
            config.update({key: format_value(key, value) for key, value in sorted(quotas.items())})
            try:
                client.set(path, json.dumps({"version": 1, "config": config}, separators=(",", ":")).encode(),
                           version=stat.version)
            except BadVersionError:
                continue
            break
        notification = json.dumps({"version": 2, "entity_path": entity_path(e)}, separators=(",", ":")).encode()
        client.create(f"{CONFIG_CHANGES}/config_change_", notification, sequence=True, makepath=True)


class ClusterQuotas:
    """This broker's part in the cluster's quotas: ``run`` follows ZooKeeper's into ``quotas``; ``alter``
    validates an AlterClientQuotas request and writes its changes."""

    def __init__(self, cluster: ZooKeeperCluster, quotas: ClientQuotas) -> None:
        self.cluster = cluster
        self.quotas = quotas
        self._lock = trio.Lock()
        self._wakeup = trio.Event()

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Read the quotas, then read them again at every announcement, until cancelled."""
        token = trio.lowlevel.current_trio_token()

        def announced(_children) -> None:  # in kazoo's thread
            try:
                token.run_sync_soon(self._wakeup.set)
            except trio.RunFinishedError:
                return False  # (stops kazoo's watch)
            return None

        def watch() -> None:
            client = self.cluster.client
            client.ensure_path(CONFIG_CHANGES)
            client.ChildrenWatch(CONFIG_CHANGES, announced)

        await trio.to_thread.run_sync(watch)
        await self._read()
        task_status.started()
        while True:
            with trio.move_on_after(REREAD_INTERVAL_S):
                await self._wakeup.wait()
            self._wakeup = trio.Event()
            try:
                await self._read()
            except (CoordinationError, KazooException) as exc:
                # ZooKeeper out of reach: the next announcement, or the interval, reads them again
                log.warning("broker %d: reading the client quotas from ZooKeeper failed: %r", self.cluster.node_id, exc)
                await trio.sleep(1)

    async def _read(self) -> None:
        async with self._lock:
            client = self.cluster.client
            configs = await trio.to_thread.run_sync(read_quotas, client)
            if configs != self.quotas.configs:
                self.quotas.update(configs)
            await trio.to_thread.run_sync(purge_announcements, client, int(time.time() * 1000))

    async def alter(self, alterations: list[Alteration], validate_only: bool) -> list[AlterResult]:
        async with self._lock:
            current = self.quotas.configs
            results, after = await trio.to_thread.run_sync(plan_alterations, current, alterations, valid_ip_entity)
            if validate_only:
                return results
            changes = {e: after.get(e, {}) for e in set(current) | set(after) if current.get(e) != after.get(e)}
            if changes:
                await trio.to_thread.run_sync(write_quotas, self.cluster.client, changes)
                self.quotas.update(after)
            return results
