"""The ACLs of a single broker: what CreateAcls, DeleteAcls and DescribeAcls change and read, kept in
``acls.json`` in the data directory (written atomically on every change: temporary file, fsync, rename)
and read at start, and the :class:`~trafka.broker.security.authorizer.Authorizer` kept in step with them.

It answers as Kafka's controller does (AclControlManager): each binding of a CreateAcls is validated on
its own (``creation_error``) and a valid one is created, or is already there, with success either way;
each filter of a DeleteAcls is validated on its own (``filter_error``) and deletes every binding it
matches of those in force when the request came, reporting them; a binding two filters match is deleted
once and reported by both. A cluster keeps its ACLs in ZooKeeper instead (``trafka.broker.cluster.acls``),
with the same answers.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import trio
from trafka.broker.security.authorizer import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AclResourceType,
    Authorizer,
    PatternType,
    creation_error,
    filter_error,
)
from trafka.storage.checkpoints import atomic_write
from trafka.wire.errors import ErrorCode

#: The store's file in the data directory.
ACLS_FILE = "acls.json"
_FILE_VERSION = 1


@dataclass(frozen=True)
class CreateResult:
    error: ErrorCode = ErrorCode.NONE
    message: str = ""


@dataclass(frozen=True)
class DeleteResult:
    error: ErrorCode = ErrorCode.NONE
    message: str = ""
    deleted: list[AclBinding] = field(default_factory=list)


def plan_creations(bindings: Sequence[AclBinding], authorizer: Authorizer
                   ) -> tuple[list[CreateResult], list[AclBinding]]:
    """Each binding's result, and the valid ones not yet in force (each once)."""
    results: list[CreateResult] = []
    new: dict[AclBinding, None] = {}
    for binding in bindings:
        error = creation_error(binding)
        if error is not None:
            results.append(CreateResult(*error))
            continue
        if binding not in authorizer:
            new[binding] = None
        results.append(CreateResult())
    return results, list(new)


def plan_deletions(filters: Sequence[AclBindingFilter], authorizer: Authorizer
                   ) -> tuple[list[DeleteResult], list[AclBinding]]:
    """Each filter's result (the bindings it matches), and every binding to delete (each once)."""
    results: list[DeleteResult] = []
    doomed: dict[AclBinding, None] = {}
    for acl_filter in filters:
        error = filter_error(acl_filter)
        if error is not None:
            results.append(DeleteResult(*error))
            continue
        matched = authorizer.bindings(acl_filter)
        doomed.update(dict.fromkeys(matched))
        results.append(DeleteResult(deleted=matched))
    return results, list(doomed)


def binding_to_json(binding: AclBinding) -> dict[str, object]:
    return {"resourceType": binding.resource_type.name, "name": binding.resource_name,
            "patternType": binding.pattern_type.name, "principal": binding.principal, "host": binding.host,
            "operation": binding.operation.name, "permissionType": binding.permission_type.name}


def binding_from_json(entry: dict[str, object]) -> AclBinding:
    return AclBinding(AclResourceType[entry["resourceType"]], str(entry["name"]), PatternType[entry["patternType"]],
                      str(entry["principal"]), str(entry["host"]), AclOperation[entry["operation"]],
                      AclPermissionType[entry["permissionType"]])


class AclStore:
    """The single broker's ACLs, in force in ``authorizer`` and on disk in ``acls.json``."""

    def __init__(self, path: Path, authorizer: Authorizer) -> None:
        self.path = path
        self.authorizer = authorizer
        self._lock = trio.Lock()

    @classmethod
    def load(cls, data_dir: Path, authorizer: Authorizer) -> AclStore:
        """The store of ``data_dir``, its bindings put in force in ``authorizer``."""
        from trafka.broker.config import ConfigError

        path = Path(data_dir) / ACLS_FILE
        if path.exists():
            try:
                document = json.loads(path.read_text())
                if document.get("version") != _FILE_VERSION:
                    raise ValueError(f"version {document.get('version')!r}, not {_FILE_VERSION}")
                bindings = [binding_from_json(entry) for entry in document["acls"]]
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                raise ConfigError(f"{path}: not an ACL file trafka can read ({exc!r})") from None
            authorizer.replace(bindings)
        return cls(path, authorizer)

    def describe(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        return self.authorizer.bindings(acl_filter)

    async def create(self, bindings: Sequence[AclBinding]) -> list[CreateResult]:
        async with self._lock:
            results, new = plan_creations(bindings, self.authorizer)
            if new:
                await self._save([*self.authorizer, *new])
                for binding in new:
                    self.authorizer.add(binding)
            return results

    async def delete(self, filters: Sequence[AclBindingFilter]) -> list[DeleteResult]:
        async with self._lock:
            results, doomed = plan_deletions(filters, self.authorizer)
            if doomed:
                gone = set(doomed)
                await self._save([binding for binding in self.authorizer if binding not in gone])
                for binding in doomed:
                    self.authorizer.remove(binding)
            return results

    async def _save(self, bindings: Iterable[AclBinding]) -> None:
        document = {"version": _FILE_VERSION, "acls": [binding_to_json(b) for b in bindings]}
        data = json.dumps(document, indent=1).encode()
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(atomic_write, self.path, data)


#: ``authorizer.class.name`` values that mean this authorizer: Kafka's KRaft StandardAuthorizer and its
#: ZooKeeper-mode AclAuthorizer of Kafka 3.x.
AUTHORIZER_CLASSES = ("org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                      "kafka.security.authorizer.AclAuthorizer")


def authorizer_from_properties(properties: dict[str, str]) -> Authorizer | None:
    """The authorizer the broker's settings ask for (``authorizer.class.name``, ``super.users``,
    ``allow.everyone.if.no.acl.found``), without bindings; None when the class name is empty. Raises
    ConfigError for another class or a bad setting."""
    from trafka.broker.config import ConfigError
    from trafka.broker.security.authorizer import parse_super_users

    class_name = (properties.get("authorizer.class.name") or "").strip()
    if not class_name:
        return None
    if class_name not in AUTHORIZER_CLASSES:
        raise ConfigError(f"authorizer.class.name={class_name}: trafka's authorizer is Kafka's StandardAuthorizer "
                          f"({' or '.join(AUTHORIZER_CLASSES)}); another class cannot be loaded")
    try:
        super_users = parse_super_users(properties.get("super.users"))
    except ValueError as exc:
        raise ConfigError(f"super.users={properties.get('super.users')!r}: {exc}") from None
    allow = (properties.get("allow.everyone.if.no.acl.found") or "false").strip().lower()
    if allow not in ("true", "false"):
        raise ConfigError(f"allow.everyone.if.no.acl.found={allow!r}: expected true or false")
    return Authorizer(super_users, allow == "true")


def client_host(peer: str) -> str:
    """The address part of a connection's ``ip:port`` peer, as ACLs name hosts: an IPv6 address written as
    Java writes it, every group without leading zeros and none left out (``0:0:0:0:0:0:0:1``)."""
    host, _, _ = peer.rpartition(":")
    host = host.strip("[]") or peer
    if ":" in host:
        import ipaddress

        try:
            groups = ipaddress.IPv6Address(host.partition("%")[0]).exploded.split(":")
        except ValueError:
            return host
        return ":".join(format(int(group, 16), "x") for group in groups)
    return host
