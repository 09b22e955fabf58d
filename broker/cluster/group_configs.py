"""Group configs of a cluster, kept in ZooKeeper so that every broker serves the same ones.

``/config/groups/<group>`` (the group id sanitized as Kafka sanitizes entity names) holds
``{"version":1,"config":{"share.record.lock.duration.ms":"20000",...}}``; a group without configs of its own
has no node. A broker that changes them writes the node, then a sequential node under
``/trafka/group_config_changes``; every broker watches that path and reads the configs again when a change
is announced (and every :data:`REREAD_INTERVAL_S` anyway). A config altered through one broker is described
by all, and the share partitions of every broker use it.
"""
from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping

import trio
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError, NotEmptyError

from trafka.broker.cluster import CoordinationError
from trafka.broker.security.credentials import desanitize, sanitize
from trafka.wire.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

GROUPS_PATH = "/config/groups"
CHANGES_PATH = "/trafka/group_config_changes"
#: Announcements kept; older ones are removed by the broker that writes a new one.
KEPT_CHANGES = 100
REREAD_INTERVAL_S = 30.0


def read_group_configs(client: KazooClient) -> dict[str, dict[str, str]]:
    """Every group's configs in ZooKeeper (blocking: from a worker thread)."""
    try:
        nodes = client.get_children(GROUPS_PATH)
    except NoNodeError:
        return {}
    configs: dict[str, dict[str, str]] = {}
    for node in nodes:
        try:
            data, _ = client.get(f"{GROUPS_PATH}/{node}")
            config = json.loads(data).get("config") or {}
        except (NoNodeError, UnicodeDecodeError, json.JSONDecodeError, AttributeError):
            continue
        if config:
            configs[desanitize(node)] = {str(k): str(v) for k, v in config.items()}
    return configs


def write_group_configs(client: KazooClient, group_id: str, configs: Mapping[str, str]) -> None:
    """Replace the configs of ``group_id`` (none: remove its node) and announce the change (blocking)."""
    path = f"{GROUPS_PATH}/{sanitize(group_id)}"
    if configs:
        data = json.dumps({"version": 1, "config": dict(sorted(configs.items()))}, separators=(",", ":")).encode()
        if client.exists(path):
            client.set(path, data)
        else:
            client.create(path, data, makepath=True)
    else:
        try:
            client.delete(path)
        except NoNodeError:
            pass
    client.create(f"{CHANGES_PATH}/change_", json.dumps({"group": group_id}).encode(), sequence=True, makepath=True)
    changes = sorted(client.get_children(CHANGES_PATH))
    for old in changes[:-KEPT_CHANGES]:
        try:
            client.delete(f"{CHANGES_PATH}/{old}")
        except (NoNodeError, NotEmptyError):
            pass


class ClusterGroupConfigs:
    """The groups' own configs as ZooKeeper has them, followed by ``run``; the same surface as
    :class:`trafka.broker.groups.group_configs.GroupConfigStore` (``configs``, ``get``, ``save``)."""

    def __init__(self, client: Callable[[], KazooClient], node_id: int) -> None:
        #: The cluster's ZooKeeper client (a new one after a session expired).
        self._client = client
        self.node_id = node_id
        #: By group id; changed in place, so that holders of the mapping see every change.
        self.configs: dict[str, dict[str, str]] = {}
        self._wakeup = trio.Event()
        self._token: trio.lowlevel.TrioToken | None = None

    def get(self, group_id: str) -> dict[str, str]:
        return dict(self.configs.get(group_id, {}))

    def save(self, group_id: str, configs: Mapping[str, str]) -> None:
        """Write the configs of ``group_id`` to ZooKeeper (blocking: from a worker thread), then keep them."""
        try:
            write_group_configs(self._client(), group_id, configs)
        except (KazooException, CoordinationError) as exc:
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                             f"writing the configs of group {group_id} to ZooKeeper failed: {exc!r}") from exc
        if configs:
            self.configs[group_id] = dict(configs)
        else:
            self.configs.pop(group_id, None)

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Read the configs, then again at every announcement, until cancelled."""
        token = trio.lowlevel.current_trio_token()

        def announced(_children) -> bool | None:  # in kazoo's thread
            try:
                token.run_sync_soon(self._wakeup.set)
            except trio.RunFinishedError:
                return False  # (stops kazoo's watch)
            return None

        def watch() -> None:
            client = self._client()
            client.ensure_path(CHANGES_PATH)
            client.ChildrenWatch(CHANGES_PATH, announced)

        try:
            await trio.to_thread.run_sync(watch)
            await self._read()
        except (CoordinationError, KazooException) as exc:
            log.warning("broker %d: reading the group configs from ZooKeeper failed: %r", self.node_id, exc)
        task_status.started()
        while True:
            with trio.move_on_after(REREAD_INTERVAL_S):
                await self._wakeup.wait()
            self._wakeup = trio.Event()
            try:
                await self._read()
            except (CoordinationError, KazooException) as exc:
                log.warning("broker %d: reading the group configs from ZooKeeper failed: %r", self.node_id, exc)
                await trio.sleep(1)

    async def _read(self) -> None:
        configs = await trio.to_thread.run_sync(lambda: read_group_configs(self._client()))
        if configs != self.configs:
            self.configs.clear()
            self.configs.update(configs)
