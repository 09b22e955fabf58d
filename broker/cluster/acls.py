"""The ACLs of a cluster, kept in ZooKeeper where Kafka's ZooKeeper-mode authorizer (AclAuthorizer) keeps
them, in its format, so that Kafka's tools and brokers and trafka's read the same ACLs:

``/kafka-acl/<ResourceType>/<name>``                      the LITERAL ACLs of a resource
``/kafka-acl-extended/prefixed/<ResourceType>/<name>``    the PREFIXED ACLs of a name
``/kafka-acl-changes/acl_changes_<seq>``                  a change to LITERAL ACLs: ``TOPIC:orders``
``/kafka-acl-extended-changes/acl_changes_<seq>``         a change to PREFIXED ACLs: ``{"version":1,
                                                         "resourceType":"TOPIC","name":"app-","patternType":"PREFIXED"}``

A resource's node holds ``{"acls":[{"principal":"User:alice","permissionType":"Allow","host":"*",
"operation":"Read"}],"version":1}`` (Kafka's camel-case names, ``<ResourceType>`` too: ``Topic``,
``TransactionalId``); a resource left without ACLs has its node deleted. A change is a version-checked
write of the resource's node (read again and retried when another broker changed it meanwhile), then a
sequential change node naming the resource.

Every broker reads all the ACLs when it starts (:meth:`ClusterAcls.run`) and then follows the change nodes
(a ZooKeeper watch): for each new one it reads the named resource again, so an ACL created on one broker is
enforced by all of them a moment later. Change nodes older than 15 minutes are deleted, as Kafka does. After
a lost ZooKeeper session every ACL is read again. The answers to CreateAcls, DeleteAcls and DescribeAcls
are the single node's (``trafka.broker.security.acls``).
"""
from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Sequence

import trio
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
)
from trafka.broker.cluster.zookeeper import ZooKeeperCluster
from trafka.broker.security.acls import (
    CreateResult,
    DeleteResult,
    plan_creations,
    plan_deletions,
)
from trafka.broker.security.authorizer import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AclResourceType,
    Authorizer,
    PatternType,
    kafka_name,
)
from trafka.wire.errors import ErrorCode

log = logging.getLogger(__name__)

LITERAL_ACLS = "/kafka-acl"
PREFIXED_ACLS = "/kafka-acl-extended/prefixed"
LITERAL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
#: How old a change node gets before a broker deletes it (Kafka's 15 minutes).
CHANGE_EXPIRATION_MS = 15 * 60 * 1000
_RESOURCE_TYPES = [rt for rt in AclResourceType if rt not in (AclResourceType.UNKNOWN, AclResourceType.ANY)]
_BY_NAME = {**{kafka_name(v): v for v in _RESOURCE_TYPES}, **{v.name: v for v in _RESOURCE_TYPES}}
_OPERATIONS = {**{kafka_name(v): v for v in AclOperation}, **{v.name: v for v in AclOperation}}
_PERMISSIONS = {**{kafka_name(v): v for v in AclPermissionType}, **{v.name: v for v in AclPermissionType}}

#: A resource pattern: (type, name, LITERAL or PREFIXED).
Pattern = tuple[AclResourceType, str, PatternType]


def resource_path(pattern: Pattern) -> str:
    resource_type, name, pattern_type = pattern
    root = LITERAL_ACLS if pattern_type == PatternType.LITERAL else PREFIXED_ACLS
    return f"{root}/{kafka_name(resource_type)}/{name}"


def encode_acls(bindings: Iterable[AclBinding]) -> bytes:
    """A resource node's data, as Kafka writes it."""
    acls = [{"principal": b.principal, "permissionType": kafka_name(b.permission_type), "host": b.host,
             "operation": kafka_name(b.operation)} for b in bindings]
    return json.dumps({"acls": acls, "version": 1}, separators=(",", ":")).encode()


def decode_acls(pattern: Pattern, data: bytes | None) -> list[AclBinding]:
    """The bindings a resource node holds (none for an empty node); ValueError for data Kafka would refuse."""
    if not data:
        return []
    document = json.loads(data)
    if document.get("version") != 1:
        raise ValueError(f"ACLs of version {document.get('version')!r}, not 1")
    resource_type, name, pattern_type = pattern
    return [AclBinding(resource_type, name, pattern_type, entry["principal"], entry["host"],
                       _OPERATIONS[entry["operation"]], _PERMISSIONS[entry["permissionType"]])
            for entry in document["acls"]]


def encode_change(pattern: Pattern) -> tuple[str, bytes]:
    """The change node (its parent path and data) that names a changed resource pattern."""
    resource_type, name, pattern_type = pattern
    if pattern_type == PatternType.LITERAL:
        return LITERAL_CHANGES, f"{resource_type.name}:{name}".encode()
    return EXTENDED_CHANGES, json.dumps({"version": 1, "resourceType": resource_type.name, "name": name,
                                         "patternType": pattern_type.name}, separators=(",", ":")).encode()


def decode_change(parent: str, data: bytes) -> Pattern:
    if parent == LITERAL_CHANGES:
        kind, colon, name = data.decode().partition(":")
        if not colon:
            raise ValueError(f"expected ResourceType:ResourceName, got {data!r}")
        return _resource_type(kind), name, PatternType.LITERAL
    event = json.loads(data)
    return _resource_type(event["resourceType"]), event["name"], PatternType[event["patternType"].upper()]


def _resource_type(text: str) -> AclResourceType:
    try:
        return _BY_NAME.get(text) or _BY_NAME[text.upper()]
    except KeyError:
        raise ValueError(f"unknown resource type {text!r}") from None


def _sequence(child: str) -> int:
    return int(child[len(CHANGE_PREFIX):]) if child.startswith(CHANGE_PREFIX) else -1


class ClusterAcls:
    """The cluster's ACLs: in force in ``authorizer``, kept in ZooKeeper, followed while :meth:`run` runs."""

    def __init__(self, cluster: ZooKeeperCluster, authorizer: Authorizer) -> None:
        self.cluster = cluster
        self.authorizer = authorizer
        self._client: KazooClient | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._wakeup = trio.Event()
        self._reload = False
        self._lock = trio.Lock()
        #: The last change node applied, per change path.
        self._applied: dict[str, int] = {LITERAL_CHANGES: -1, EXTENDED_CHANGES: -1}

    # -- following ZooKeeper -------------------------------------------------------------------------------

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Read every ACL, then follow the change nodes until cancelled (started once read)."""
        self._token = trio.lowlevel.current_trio_token()
        client = self._client = KazooClient(hosts=self.cluster.connect,
                                            timeout=self.cluster.session_timeout_ms / 1000)
        client.add_listener(self._on_state)
        try:
            await trio.to_thread.run_sync(self._start, client)
            await self._load_all()
            for parent in (LITERAL_CHANGES, EXTENDED_CHANGES):
                client.ChildrenWatch(parent, self._on_children)
            task_status.started()
            while True:
                await self._wakeup.wait()
                self._wakeup = trio.Event()
                try:
                    async with self._lock:
                        if self._reload:
                            self._reload = False
                            await self._load_all()
                        await self._apply_changes()
                except Exception:
                    log.exception("broker %d: following the ACLs failed; reading them all again in 1 s",
                                  self.cluster.node_id)
                    self._reload = True
                    await trio.sleep(1.0)
                    self._wake()
        finally:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(_close, client)

    def _start(self, client: KazooClient) -> None:
        client.start(timeout=self.cluster.connection_timeout_ms / 1000)
        for root in (LITERAL_ACLS, PREFIXED_ACLS):
            for resource_type in _RESOURCE_TYPES:
                client.ensure_path(f"{root}/{kafka_name(resource_type)}")
        for parent in (LITERAL_CHANGES, EXTENDED_CHANGES):
            client.ensure_path(parent)

    def _wake(self) -> None:
        self._wakeup.set()

    def _on_children(self, children: list[str]) -> None:  # a kazoo thread
        if self._token is not None:
            try:
                self._token.run_sync_soon(self._wake)
            except trio.RunFinishedError:
                return False  # the broker is gone: stop watching
        return None

    def _on_state(self, state: str) -> None:  # a kazoo thread
        if state == KazooState.LOST:
            self._reload = True
        elif state == KazooState.CONNECTED and self._reload and self._token is not None:
            try:
                self._token.run_sync_soon(self._wake)
            except trio.RunFinishedError:
                pass

    async def _load_all(self) -> None:
        bindings, applied = await trio.to_thread.run_sync(self._read_all, self._client)
        self.authorizer.replace(bindings)
        self._applied = applied
        log.info("broker %d: %d ACLs in force", self.cluster.node_id, len(bindings))

    def _read_all(self, client: KazooClient) -> tuple[list[AclBinding], dict[str, int]]:
        # The change nodes first: a change made while the ACLs are read is applied again after.
        applied = {parent: max(map(_sequence, client.get_children(parent)), default=-1)
                   for parent in (LITERAL_CHANGES, EXTENDED_CHANGES)}
        bindings: list[AclBinding] = []
        for root, pattern_type in ((LITERAL_ACLS, PatternType.LITERAL), (PREFIXED_ACLS, PatternType.PREFIXED)):
            for resource_type in _RESOURCE_TYPES:
                try:
                    names = client.get_children(f"{root}/{kafka_name(resource_type)}")
                except NoNodeError:
                    continue
                for name in names:
                    pattern = (resource_type, name, pattern_type)
                    bindings += self._read_resource(client, pattern)[0]
        return bindings, applied

    def _read_resource(self, client: KazooClient, pattern: Pattern) -> tuple[list[AclBinding], int | None]:
        """The resource's bindings and its node's version (None: no node)."""
        try:
            data, stat = client.get(resource_path(pattern))
        except NoNodeError:
            return [], None
        try:
            return decode_acls(pattern, data), stat.version
        except (ValueError, KeyError, TypeError) as exc:
            log.error("broker %d: the ACLs of %s cannot be read (%s); none of them are in force",
                      self.cluster.node_id, resource_path(pattern), exc)
            return [], stat.version

    async def _apply_changes(self) -> None:
        changed = await trio.to_thread.run_sync(self._read_changes, self._client)
        for pattern, bindings in changed:
            self.authorizer.replace_pattern(*pattern, bindings)

    def _read_changes(self, client: KazooClient) -> list[tuple[Pattern, list[AclBinding]]]:
        """The resources named by change nodes not applied yet, each read again; expired change nodes go."""
        patterns: dict[Pattern, None] = {}
        now_ms = time.time() * 1000
        for parent in (LITERAL_CHANGES, EXTENDED_CHANGES):
            for child in sorted(client.get_children(parent), key=_sequence):
                sequence = _sequence(child)
                path = f"{parent}/{child}"
                if sequence > self._applied[parent]:
                    try:
                        data, stat = client.get(path)
                    except NoNodeError:
                        continue
                    try:
                        patterns[decode_change(parent, data)] = None
                    except (ValueError, KeyError, TypeError) as exc:
                        log.error("broker %d: ACL change %s cannot be read: %s", self.cluster.node_id, path, exc)
                    self._applied[parent] = sequence
                    if now_ms - stat.ctime > CHANGE_EXPIRATION_MS:
                        _delete_quietly(client, path)
                elif sequence >= 0:
                    try:
                        stat = client.exists(path)
                    except NoNodeError:
                        stat = None
                    if stat is not None and now_ms - stat.ctime > CHANGE_EXPIRATION_MS:
                        _delete_quietly(client, path)
        return [(pattern, self._read_resource(client, pattern)[0]) for pattern in patterns]

    # -- the APIs ------------------------------------------------------------------------------------------

    def describe(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        return self.authorizer.bindings(acl_filter)

    async def create(self, bindings: Sequence[AclBinding]) -> list[CreateResult]:
        """As the single node's, except that a resource name no znode can have (``a/b``) is refused with
        INVALID_REQUEST, as Kafka's ZooKeeper mode refuses it."""
        async with self._lock:
            results, _ = plan_creations(bindings, self.authorizer)
            # Every valid binding is written: this broker's view may be a moment behind ZooKeeper's.
            valid = []
            for index, binding in enumerate(bindings):
                if results[index].error:
                    continue
                if not znode_name(binding.resource_name):
                    results[index] = CreateResult(ErrorCode.INVALID_REQUEST, "Failed to create ACL")
                    continue
                valid.append(binding)
            failed = await self._change(_by_pattern(valid), add=True)
            return [CreateResult(ErrorCode.UNKNOWN_SERVER_ERROR, failed[_pattern_of(binding)])
                    if not result.error and _pattern_of(binding) in failed else result
                    for binding, result in zip(bindings, results, strict=True)]

    async def delete(self, filters: Sequence[AclBindingFilter]) -> list[DeleteResult]:
        async with self._lock:
            results, doomed = plan_deletions(filters, self.authorizer)
            failed = await self._change(_by_pattern(doomed), add=False)
            if failed:
                message = next(iter(failed.values()))
                return [DeleteResult(ErrorCode.UNKNOWN_SERVER_ERROR, message)
                        if any(_pattern_of(b) in failed for b in result.deleted) else result for result in results]
            return results

    async def _change(self, changes: dict[Pattern, list[AclBinding]], *, add: bool) -> dict[Pattern, str]:
        """Write the changes; the resource patterns whose write failed, with why."""
        if not changes:
            return {}
        written, failed = await trio.to_thread.run_sync(_write, self._client, changes, add)
        for pattern, bindings in written.items():
            self.authorizer.replace_pattern(*pattern, bindings)
        return failed


def znode_name(name: str) -> bool:
    """Whether ``name`` can be one znode's name (ZooKeeper refuses ``/``, ``.``, ``..`` and some characters)."""
    if name in (".", "..") or "/" in name:
        return False
    return not any(c == "\0" or "\u0001" <= c <= "\u001f" or "\u007f" <= c <= "\u009f"
                   or "\ud800" <= c <= "\uf8ff" or "\ufff0" <= c <= "\uffff" for c in name)


def _pattern_of(binding: AclBinding) -> Pattern:
    return binding.resource_type, binding.resource_name, binding.pattern_type


def _by_pattern(bindings: Iterable[AclBinding]) -> dict[Pattern, list[AclBinding]]:
    grouped: dict[Pattern, list[AclBinding]] = {}
    for binding in bindings:
        grouped.setdefault((binding.resource_type, binding.resource_name, binding.pattern_type), []).append(binding)
    return grouped


#: How often a write that another broker's write overtook is tried again.
WRITE_ATTEMPTS = 20


def _write(client: KazooClient, changes: dict[Pattern, list[AclBinding]], add: bool
           ) -> tuple[dict[Pattern, list[AclBinding]], dict[Pattern, str]]:
    """Add (or remove) the bindings of each resource pattern in its node, version-checked and tried again
    when another broker wrote it meanwhile, then a change node for each resource changed. Returns each
    resource's bindings as written, and the resources whose write failed, with why."""
    written: dict[Pattern, list[AclBinding]] = {}
    failed: dict[Pattern, str] = {}
    for pattern, bindings in changes.items():
        try:
            result = _write_resource(client, pattern, bindings, add)
        except Exception as exc:  # noqa: BLE001 (ZooKeeper's or the node's: that resource fails alone)
            log.error("writing the ACLs of %s failed: %r", resource_path(pattern), exc)
            failed[pattern] = f"Failed to write the ACLs of {resource_path(pattern)} to ZooKeeper: {exc!r}"
        else:
            written[pattern] = result
    return written, failed


def _write_resource(client: KazooClient, pattern: Pattern, bindings: list[AclBinding], add: bool
                    ) -> list[AclBinding]:
    path = resource_path(pattern)
    for _ in range(WRITE_ATTEMPTS):
        try:
            data, stat = client.get(path)
            current, version = decode_acls(pattern, data), stat.version
        except NoNodeError:
            current, version = [], None
        if add:
            new = list(dict.fromkeys([*current, *bindings]))
        else:
            gone = set(bindings)
            new = [b for b in current if b not in gone]
        if new == current:
            return current
        try:
            if version is None:
                client.create(path, encode_acls(new))
            elif new:
                client.set(path, encode_acls(new), version=version)
            else:
                client.delete(path, version=version)
        except NodeExistsError:
            continue  # another broker created it: read it again
        except (BadVersionError, NoNodeError, NotEmptyError):
            if version is None:
                raise  # no parent: the resource type's node is gone
            continue  # another broker changed or deleted it
        parent, change = encode_change(pattern)
        client.create(f"{parent}/{CHANGE_PREFIX}", change, sequence=True, makepath=True)
        return new
    raise RuntimeError(f"{WRITE_ATTEMPTS} writes overtaken by other brokers' in a row")


def _delete_quietly(client: KazooClient, path: str) -> None:
    try:
        client.delete(path)
    except NoNodeError:
        pass


def _close(client: KazooClient) -> None:
    try:
        client.stop()
    finally:
        client.close()
