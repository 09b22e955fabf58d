"""Kafka's ACL model and its authorizer, as pure functions and one in-memory index (no I/O, no trio).

- The enums of the protocol, with Kafka's wire codes: :class:`AclOperation`, :class:`AclResourceType`,
  :class:`PatternType`, :class:`AclPermissionType`;
- :class:`AclBinding` (a resource pattern and an access control entry) and :class:`AclBindingFilter`
  (None for a name, principal or host that matches any; ANY for an enum that matches any; the MATCH
  pattern type for "every binding that would apply to this resource": its literal name, the ``*``
  wildcard and every prefix of it), with Kafka's validation of a binding to create
  (:func:`creation_error`) and of a filter (:func:`filter_error`);
- :class:`Authorizer`, Kafka's StandardAuthorizer: super users may do everything; otherwise the bindings
  that apply to a resource are its LITERAL ones, the LITERAL ``*`` wildcard's and the PREFIXED ones whose
  prefix starts its name; of those, a binding matches a request when its principal is the request's (or
  ``User:*``), its host is the client's (or ``*``) and its operation is the one asked for, or ALL, or — for
  an ALLOW only — one that implies it (READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies
  DESCRIBE_CONFIGS). A matching DENY refuses, whatever ALLOWs there are; a matching ALLOW allows; when
  no binding applies to the resource at all, ``allow.everyone.if.no.acl.found`` decides, and when some
  apply but none matches, the request is refused. ``authorize_by_resource_type`` is KIP-679's "may the
  principal do this to some resource of the type" and ``authorized_operations`` the bitfield that
  Metadata, DescribeCluster and DescribeGroups carry.

The bindings are indexed by (resource type, literal name) and, for PREFIXED ones, by (resource type,
prefix) with the set of prefix lengths in use: a check looks up the resource's name, ``*`` and the
name's prefixes of those lengths, never every binding.
"""
from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import IntEnum

from trafka.wire.errors import ErrorCode

#: The name of the one CLUSTER resource.
CLUSTER_NAME = "kafka-cluster"
#: The resource name and host that match any, and the principal that matches every user.
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


def operation(code: int) -> AclOperation:
    """The operation of a wire code; a code Kafka does not know is UNKNOWN, as Kafka reads it."""
    try:
        return AclOperation(code)
    except ValueError:
        return AclOperation.UNKNOWN


def resource_type(code: int) -> AclResourceType:
    try:
        return AclResourceType(code)
    except ValueError:
        return AclResourceType.UNKNOWN


def pattern_type(code: int) -> PatternType:
    try:
        return PatternType(code)
    except ValueError:
        return PatternType.UNKNOWN


def permission_type(code: int) -> AclPermissionType:
    try:
        return AclPermissionType(code)
    except ValueError:
        return AclPermissionType.UNKNOWN


_O = AclOperation
_SUPPORTED: dict[AclResourceType, frozenset[AclOperation]] = {
    AclResourceType.TOPIC: frozenset({_O.READ, _O.WRITE, _O.CREATE, _O.DESCRIBE, _O.DELETE, _O.ALTER,
                                      _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}),
    AclResourceType.GROUP: frozenset({_O.READ, _O.DESCRIBE, _O.DELETE, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}),
    AclResourceType.CLUSTER: frozenset({_O.CREATE, _O.CLUSTER_ACTION, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS,
                                        _O.IDEMPOTENT_WRITE, _O.ALTER, _O.DESCRIBE}),
    AclResourceType.TRANSACTIONAL_ID: frozenset({_O.DESCRIBE, _O.WRITE, _O.TWO_PHASE_COMMIT}),
    AclResourceType.DELEGATION_TOKEN: frozenset({_O.DESCRIBE}),
    AclResourceType.USER: frozenset({_O.CREATE_TOKENS, _O.DESCRIBE_TOKENS}),
}
#: Operations an ALLOW of them also grants DESCRIBE by (a DENY of them does not deny DESCRIBE).
IMPLIES_DESCRIBE = frozenset({_O.DESCRIBE, _O.READ, _O.WRITE, _O.DELETE, _O.ALTER})
#: Operations an ALLOW of them also grants DESCRIBE_CONFIGS by.
IMPLIES_DESCRIBE_CONFIGS = frozenset({_O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS})


def supported_operations(resource: AclResourceType) -> frozenset[AclOperation]:
    """The operations that apply to a concrete resource type (what authorized operations report)."""
    try:
        return _SUPPORTED[resource]
    except KeyError:
        raise ValueError(f"{resource.name} is not a concrete resource type") from None


def operations_bitfield(operations: Iterable[AclOperation]) -> int:
    """Authorized operations as the protocol carries them: bit n set for the operation of code n."""
    bits = 0
    for op in operations:
        bits |= 1 << op
    return bits


def kafka_name(value: IntEnum) -> str:
    """Kafka's camel-case name of an enum value, as its ZooKeeper data and paths spell them:
    ``TransactionalId``, ``IdempotentWrite``, ``Allow``."""
    return "".join(part.capitalize() for part in value.name.split("_"))


def parse_principal(text: str) -> tuple[str, str]:
    """``Type:name`` split at its first colon; ValueError (with Kafka's message) for anything else."""
    principal_type, colon, name = text.partition(":")
    if not text or not colon:
        raise ValueError(f"expected a string in format principalType:principalName but got {text}")
    return principal_type, name


def parse_super_users(value: str | None) -> frozenset[str]:
    """``super.users``: principals separated by ``;`` (blanks around each ignored); ValueError for one
    that is not ``Type:name``."""
    users = set()
    for entry in (value or "").split(";"):
        entry = entry.strip()
        if entry:
            parse_principal(entry)
            users.add(entry)
    return frozenset(users)


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: a resource pattern (type, name, LITERAL or PREFIXED) and an entry (principal, host,
    operation, ALLOW or DENY)."""

    resource_type: AclResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def pattern_str(self) -> str:
        """The resource pattern as Kafka prints it."""
        return (f"ResourcePattern(resourceType={self.resource_type.name}, name={self.resource_name}, "
                f"patternType={self.pattern_type.name})")

    def entry_str(self) -> str:
        """The access control entry as Kafka prints it."""
        return (f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, "
                f"permissionType={self.permission_type.name})")

    def __str__(self) -> str:
        return f"(pattern={self.pattern_str()}, entry={self.entry_str()})"

    def sort_key(self) -> tuple:
        return (self.resource_type, self.resource_name, self.pattern_type, self.principal, self.host,
                self.operation, self.permission_type)


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Which bindings a DescribeAcls or DeleteAcls names. None (name, principal, host) and ANY (the
    enums) match anything; the MATCH pattern type with a name matches every binding that applies to
    that resource (its LITERAL name, the ``*`` wildcard, PREFIXED patterns the name starts with)."""

    resource_type: AclResourceType = AclResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def matches(self, binding: AclBinding) -> bool:
        if self.resource_type != AclResourceType.ANY and self.resource_type != binding.resource_type:
            return False
        wanted = self.pattern_type
        if wanted not in (PatternType.ANY, PatternType.MATCH) and wanted != binding.pattern_type:
            return False
        name = self.resource_name
        if name is not None:
            if wanted == PatternType.ANY or wanted == binding.pattern_type:
                if name != binding.resource_name:
                    return False
            elif binding.pattern_type == PatternType.LITERAL:  # MATCH
                if name != binding.resource_name and binding.resource_name != WILDCARD:
                    return False
            elif not name.startswith(binding.resource_name):  # MATCH against PREFIXED
                return False
        if self.principal is not None and self.principal != binding.principal:
            return False
        if self.host is not None and self.host != binding.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != binding.operation:
            return False
        return self.permission_type == AclPermissionType.ANY or self.permission_type == binding.permission_type

    def is_unknown(self) -> bool:
        return AclOperation.UNKNOWN == self.operation or AclPermissionType.UNKNOWN == self.permission_type or (
            AclResourceType.UNKNOWN == self.resource_type or PatternType.UNKNOWN == self.pattern_type)


#: The filter every binding matches.
ANY_FILTER = AclBindingFilter()


def creation_error(binding: AclBinding) -> tuple[ErrorCode, str] | None:
    """Why CreateAcls refuses to create ``binding`` (INVALID_REQUEST and Kafka's message), or None."""
    if binding.resource_type == AclResourceType.CLUSTER and binding.resource_name != CLUSTER_NAME:
        return ErrorCode.INVALID_REQUEST, f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not binding.resource_name:
        return ErrorCode.INVALID_REQUEST, "Invalid empty resource name"
    if binding.resource_type in (AclResourceType.UNKNOWN, AclResourceType.ANY):
        return ErrorCode.INVALID_REQUEST, f"Invalid resourceType {binding.resource_type.name}"
    if binding.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return ErrorCode.INVALID_REQUEST, f"Invalid patternType {binding.pattern_type.name}"
    if binding.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return ErrorCode.INVALID_REQUEST, f"Invalid operation {binding.operation.name}"
    if binding.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return ErrorCode.INVALID_REQUEST, f"Invalid permissionType {binding.permission_type.name}"
    if not binding.host:
        return ErrorCode.INVALID_REQUEST, "Host pattern cannot be null or empty"
    try:
        parse_principal(binding.principal)
    except ValueError:
        return ErrorCode.INVALID_REQUEST, (
            f"Could not parse principal from `{binding.principal}` (no colon is present separating the "
            "principal type from the principal name)")
    return None


def filter_error(acl_filter: AclBindingFilter) -> tuple[ErrorCode, str] | None:
    """Why DeleteAcls refuses a filter (INVALID_REQUEST and Kafka's message), or None."""
    if acl_filter.resource_type == AclResourceType.UNKNOWN or acl_filter.pattern_type == PatternType.UNKNOWN:
        return ErrorCode.INVALID_REQUEST, "Unknown patternFilter."
    if acl_filter.operation == AclOperation.UNKNOWN or acl_filter.permission_type == AclPermissionType.UNKNOWN:
        return ErrorCode.INVALID_REQUEST, "Unknown entryFilter."
    return None


# An entry as the index keeps it, for the checks' inner loop.
_Entry = tuple[str, str, AclOperation, AclPermissionType]
_ALLOW = AclPermissionType.ALLOW
_DENY = AclPermissionType.DENY


def _verdict(entries: Iterable[_Entry], principal: str, host: str, op: AclOperation) -> AclPermissionType | None:
    """DENY if an entry of these denies ``op``, else ALLOW if one allows it, else None."""
    allowed = None
    for acl_principal, acl_host, acl_op, permission in entries:
        if acl_principal != principal and acl_principal != WILDCARD_PRINCIPAL:
            continue
        if acl_host != WILDCARD and acl_host != host:
            continue
        if acl_op != _O.ALL and acl_op != op:
            # Implied operations are granted by an ALLOW only.
            if permission != _ALLOW:
                continue
            if op == _O.DESCRIBE:
                if acl_op not in IMPLIES_DESCRIBE:
                    continue
            elif op == _O.DESCRIBE_CONFIGS:
                if acl_op not in IMPLIES_DESCRIBE_CONFIGS:
                    continue
            else:
                continue
        if permission == _DENY:
            return _DENY
        allowed = _ALLOW
    return allowed


class Authorizer:
    """The bindings in force, indexed for checks, with the broker's ``super.users`` and
    ``allow.everyone.if.no.acl.found``."""

    def __init__(self, super_users: frozenset[str] = frozenset(), allow_everyone_if_no_acl_found: bool = False,
                 bindings: Iterable[AclBinding] = ()) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._bindings: dict[AclBinding, None] = {}
        # resource type -> name -> entries, for LITERAL bindings (the * wildcard among them) and PREFIXED.
        self._literal: dict[AclResourceType, dict[str, list[_Entry]]] = {}
        self._prefixed: dict[AclResourceType, dict[str, list[_Entry]]] = {}
        # resource type -> the lengths of its prefixes, ascending.
        self._prefix_lengths: dict[AclResourceType, list[int]] = {}
        # resource type -> prefix length -> how many prefixes of that length there are.
        self._prefix_counts: dict[AclResourceType, dict[int, int]] = {}
        for binding in bindings:
            self.add(binding)

    # -- the bindings --

    def __len__(self) -> int:
        return len(self._bindings)

    def __iter__(self) -> Iterator[AclBinding]:
        return iter(list(self._bindings))

    def __contains__(self, binding: object) -> bool:
        return binding in self._bindings

    def add(self, binding: AclBinding) -> bool:
        """Put ``binding`` in force; False if it already was."""
        if binding in self._bindings:
            return False
        if binding.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise ValueError(f"a binding's pattern type is LITERAL or PREFIXED, not {binding.pattern_type.name}")
        self._bindings[binding] = None
        entry = (binding.principal, binding.host, binding.operation, binding.permission_type)
        rt, name = binding.resource_type, binding.resource_name
        if binding.pattern_type == PatternType.LITERAL:
            self._literal.setdefault(rt, {}).setdefault(name, []).append(entry)
        else:
            by_prefix = self._prefixed.setdefault(rt, {})
            if name not in by_prefix:
                by_prefix[name] = []
                counts = self._prefix_counts.setdefault(rt, {})
                counts[len(name)] = counts.get(len(name), 0) + 1
                if counts[len(name)] == 1:
                    bisect.insort(self._prefix_lengths.setdefault(rt, []), len(name))
            by_prefix[name].append(entry)
        return True

    def remove(self, binding: AclBinding) -> bool:
        """Take ``binding`` out of force; False if it was not."""
        if binding not in self._bindings:
            return False
        del self._bindings[binding]
        entry = (binding.principal, binding.host, binding.operation, binding.permission_type)
        rt, name = binding.resource_type, binding.resource_name
        index = self._literal if binding.pattern_type == PatternType.LITERAL else self._prefixed
        by_name = index[rt]
        entries = by_name[name]
        entries.remove(entry)
        if not entries:
            del by_name[name]
            if binding.pattern_type == PatternType.PREFIXED:
                counts = self._prefix_counts[rt]
                counts[len(name)] -= 1
                if not counts[len(name)]:
                    del counts[len(name)]
                    self._prefix_lengths[rt].remove(len(name))
            if not by_name:
                del index[rt]
                if binding.pattern_type == PatternType.PREFIXED:
                    del self._prefix_lengths[rt], self._prefix_counts[rt]
        return True

    def replace(self, bindings: Iterable[AclBinding]) -> None:
        """Put exactly ``bindings`` in force."""
        wanted = dict.fromkeys(bindings)
        for binding in [b for b in self._bindings if b not in wanted]:
            self.remove(binding)
        for binding in wanted:
            self.add(binding)

    def pattern_bindings(self, resource_type: AclResourceType, name: str, pattern_type: PatternType
                         ) -> list[AclBinding]:
        """The bindings of one resource pattern (a LITERAL or PREFIXED name), from the index."""
        index = self._literal if pattern_type == PatternType.LITERAL else self._prefixed
        return [AclBinding(resource_type, name, pattern_type, *entry)
                for entry in index.get(resource_type, {}).get(name, ())]

    def replace_pattern(self, resource_type: AclResourceType, name: str, pattern_type: PatternType,
                        bindings: Iterable[AclBinding]) -> None:
        """Put exactly ``bindings`` in force for one resource pattern (the others untouched)."""
        wanted = dict.fromkeys(bindings)
        for binding in self.pattern_bindings(resource_type, name, pattern_type):
            if binding not in wanted:
                self.remove(binding)
        for binding in wanted:
            self.add(binding)

    def bindings(self, acl_filter: AclBindingFilter = ANY_FILTER) -> list[AclBinding]:
        """The bindings ``acl_filter`` matches."""
        if acl_filter is ANY_FILTER:
            return list(self._bindings)
        return [binding for binding in self._bindings if acl_filter.matches(binding)]

    # -- checks --

    def authorize(self, principal: str, host: str, operation: AclOperation, resource_type: AclResourceType,
                  resource_name: str) -> bool:
        """Whether ``principal`` connected from ``host`` may do ``operation`` on the resource."""
        if principal in self.super_users:
            return True
        found = allowed = False
        literal = self._literal.get(resource_type)
        if literal is not None:
            for name in (resource_name, WILDCARD) if resource_name != WILDCARD else (WILDCARD,):
                entries = literal.get(name)
                if entries:
                    found = True
                    verdict = _verdict(entries, principal, host, operation)
                    if verdict is _DENY:
                        return False
                    if verdict is _ALLOW:
                        allowed = True
        prefixed = self._prefixed.get(resource_type)
        if prefixed is not None:
            size = len(resource_name)
            for length in self._prefix_lengths[resource_type]:
                if length > size:
                    break
                entries = prefixed.get(resource_name[:length])
                if entries:
                    found = True
                    verdict = _verdict(entries, principal, host, operation)
                    if verdict is _DENY:
                        return False
                    if verdict is _ALLOW:
                        allowed = True
        if allowed:
            return True
        return not found and self.allow_everyone_if_no_acl_found

    def authorize_by_resource_type(self, principal: str, host: str, operation: AclOperation,
                                   resource_type: AclResourceType) -> bool:
        """Whether ``principal`` may do ``operation`` on at least one resource of the type (KIP-679):
        a super user may; otherwise an ALLOW (of the operation or ALL, for the principal or ``User:*``,
        from its host or ``*``) must name a resource that no DENY covers — a wildcard DENY covers every
        resource, a LITERAL DENY its own name, a PREFIXED DENY every name it starts; an ALLOW on ``*``
        is enough unless there is such a wildcard DENY. When no binding applies to some resource,
        ``allow.everyone.if.no.acl.found`` answers for it."""
        if operation in (AclOperation.ANY, AclOperation.UNKNOWN):
            raise ValueError(f"operation must not be {operation.name}")
        if resource_type in (AclResourceType.ANY, AclResourceType.UNKNOWN):
            raise ValueError(f"resource type must not be {resource_type.name}")
        # A made-up name: super users, and allow.everyone.if.no.acl.found where nothing names it.
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allow_literal: set[str] = set()
        allow_prefixed: set[str] = set()
        wildcard_allow = False
        for pattern, by_name in ((PatternType.LITERAL, self._literal.get(resource_type, {})),
                                 (PatternType.PREFIXED, self._prefixed.get(resource_type, {}))):
            for name, entries in by_name.items():
                for acl_principal, acl_host, acl_op, permission in entries:
                    if acl_host != host and acl_host != WILDCARD:
                        continue
                    if acl_principal != principal and acl_principal != WILDCARD_PRINCIPAL:
                        continue
                    if acl_op != operation and acl_op != _O.ALL:
                        continue
                    if permission == _DENY:
                        if pattern == PatternType.LITERAL:
                            if name == WILDCARD:
                                return False
                            deny_literal.add(name)
                        else:
                            deny_prefixed.add(name)
                    elif pattern == PatternType.LITERAL:
                        if name == WILDCARD:
                            wildcard_allow = True
                        else:
                            allow_literal.add(name)
                    else:
                        allow_prefixed.add(name)
        if wildcard_allow:
            return True
        for pattern, names in ((PatternType.LITERAL, allow_literal), (PatternType.PREFIXED, allow_prefixed)):
            for name in names:
                if pattern == PatternType.LITERAL and name in deny_literal:
                    continue
                if not any(name[:i] in deny_prefixed for i in range(1, len(name) + 1)):
                    return True
        return False

    def authorized_operations(self, principal: str, host: str, resource_type: AclResourceType,
                              resource_name: str) -> int:
        """The bitfield of the operations the resource type supports that ``principal`` may do on it."""
        return operations_bitfield(
            op for op in supported_operations(resource_type)
            if self.authorize(principal, host, op, resource_type, resource_name))
