"""``trafka acls``: ACLs, as ``kafka-acls.sh`` manages them, on a running broker (trafka, or Kafka with an
authorizer) through CreateAcls, DescribeAcls and DeleteAcls, with ``--bootstrap-server`` and
``--command-config`` as every tool takes them:

    trafka acls list [RESOURCE ...] [--principal P] [--resource-pattern-type any|match|literal|prefixed]
    trafka acls add (--allow-principal P | --deny-principal P) ... [--operation OP ...] [--allow-host H]
                    [--deny-host H] RESOURCE ... [--resource-pattern-type literal|prefixed]
    trafka acls remove [the same options as add: what they name is deleted] [--force]

A RESOURCE is ``--topic NAME``, ``--group NAME``, ``--cluster``, ``--transactional-id NAME``,
``--delegation-token NAME`` or ``--user-principal NAME`` (each repeatable, ``*`` for every resource of the
kind). Operations take Kafka's names in any case (``Read``, ``IDEMPOTENT_WRITE``, ``describe-configs``);
``add`` defaults to ``All``. ``--producer`` and ``--consumer`` add kafka-acls.sh's sets: WRITE, DESCRIBE and
CREATE on topics (and WRITE, DESCRIBE on a transactional id, IDEMPOTENT_WRITE on the cluster with
``--idempotent``); READ and DESCRIBE on topics and READ on groups. Hosts default to ``*``.

``list`` prints what kafka-acls.sh prints: per resource pattern, ``Current ACLs for resource
`ResourcePattern(...)`:`` and one ``(principal=..., host=..., operation=..., permissionType=...)`` line per
ACL (resources sorted). Without a resource it lists every ACL (of ``--principal``, if given); with one, the
ACLs of that pattern (``--resource-pattern-type``, default ``literal``; ``match`` lists every ACL that
applies to the resource, ``any`` those of every pattern type with that name). ``remove`` without a principal,
operation or host removes every ACL of the resource. A broker's refusals are shown with Kafka's error names
and messages; the exit code is then 1.
"""
from __future__ import annotations

import argparse
import sys

from trafka.broker.security.authorizer import (
    CLUSTER_NAME,
    AclBinding,
    AclOperation,
    AclPermissionType,
    AclResourceType,
    PatternType,
)
from trafka.broker.tools.admin_client import AdminClient, ClientError, check

ANY = 1


def add_parser(commands: argparse._SubParsersAction) -> None:
    acls = commands.add_parser(
        "acls", help="list, add and remove ACLs (as kafka-acls.sh)",
        description="ACLs of a running broker with an authorizer (--bootstrap-server HOST:PORT, --command-config "
                    "FILE for a secured listener), with kafka-acls.sh's options."
    ).add_subparsers(dest="action", required=True)
    resources = argparse.ArgumentParser(add_help=False)
    resources.add_argument("--topic", action="append", default=[], metavar="NAME", help="a topic (* for every one)")
    resources.add_argument("--group", action="append", default=[], metavar="NAME", help="a consumer group")
    resources.add_argument("--cluster", action="store_true", help="the cluster")
    resources.add_argument("--transactional-id", action="append", default=[], metavar="NAME")
    resources.add_argument("--delegation-token", action="append", default=[], metavar="NAME")
    resources.add_argument("--user-principal", action="append", default=[], metavar="NAME",
                           help="a user (whose delegation tokens)")
    resources.add_argument("--resource-pattern-type", type=str.upper, metavar="TYPE",
                           choices=["ANY", "MATCH", "LITERAL", "PREFIXED"],
                           help="literal (the default) or prefixed; list and remove also take any and match")
    entries = argparse.ArgumentParser(add_help=False)
    entries.add_argument("--allow-principal", action="append", default=[], metavar="PRINCIPAL",
                         help="Type:name, e.g. User:alice (User:* for everyone)")
    entries.add_argument("--deny-principal", action="append", default=[], metavar="PRINCIPAL")
    entries.add_argument("--allow-host", action="append", default=[], metavar="HOST", help="default: *")
    entries.add_argument("--deny-host", action="append", default=[], metavar="HOST", help="default: *")
    entries.add_argument("--operation", action="append", default=[], metavar="OP",
                         help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
                              "AlterConfigs, IdempotentWrite, CreateTokens, DescribeTokens, TwoPhaseCommit, All")
    entries.add_argument("--producer", action="store_true", help="the ACLs a producer needs")
    entries.add_argument("--consumer", action="store_true", help="the ACLs a consumer needs")
    entries.add_argument("--idempotent", action="store_true", help="with --producer: IdempotentWrite on the cluster")
    listing = acls.add_parser("list", parents=[resources], help="list ACLs")
    listing.add_argument("--principal", action="append", default=[], metavar="PRINCIPAL",
                         help="only the ACLs of this principal")
    acls.add_parser("add", parents=[resources, entries], help="add ACLs")
    removing = acls.add_parser("remove", parents=[resources, entries], help="remove ACLs")
    removing.add_argument("--force", action="store_true", help="(kafka-acls.sh's; nothing is asked here)")


# -- reading the options ---------------------------------------------------------------------------------------


def parse_operation(text: str) -> AclOperation:
    wanted = text.strip().upper().replace("-", "").replace("_", "")
    for op in AclOperation:
        if op.name.replace("_", "") == wanted and op not in (AclOperation.UNKNOWN, AclOperation.ANY):
            return op
    raise ClientError(f"--operation {text}: not one of Kafka's operations "
                      "(Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, "
                      "IdempotentWrite, CreateTokens, DescribeTokens, TwoPhaseCommit, All)")


def resources(args: argparse.Namespace) -> list[tuple[AclResourceType, str]]:
    named = [(AclResourceType.TOPIC, n) for n in args.topic] + [(AclResourceType.GROUP, n) for n in args.group]
    if args.cluster:
        named.append((AclResourceType.CLUSTER, CLUSTER_NAME))
    named += [(AclResourceType.TRANSACTIONAL_ID, n) for n in args.transactional_id]
    named += [(AclResourceType.DELEGATION_TOKEN, n) for n in args.delegation_token]
    named += [(AclResourceType.USER, n) for n in args.user_principal]
    return named


def _pattern(args: argparse.Namespace, *, filters: bool) -> PatternType:
    pattern = PatternType[args.resource_pattern_type or "LITERAL"]
    if not filters and pattern not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise ClientError(f"--resource-pattern-type {pattern.name.lower()}: add takes literal or prefixed")
    return pattern


def _operations_by_resource(args: argparse.Namespace, named: list[tuple[AclResourceType, str]]
                            ) -> dict[tuple[AclResourceType, str], list[AclOperation]]:
    """Each resource with the operations the options give it (kafka-acls.sh's --producer and --consumer sets
    included)."""
    chosen = [parse_operation(op) for op in args.operation]
    result: dict[tuple[AclResourceType, str], list[AclOperation]] = {}
    for resource in named:
        kind = resource[0]
        ops = list(chosen)
        if args.producer:
            if kind == AclResourceType.TOPIC:
                ops += [AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE]
            elif kind == AclResourceType.TRANSACTIONAL_ID:
                ops += [AclOperation.WRITE, AclOperation.DESCRIBE]
        if args.consumer:
            if kind == AclResourceType.TOPIC:
                ops += [AclOperation.READ, AclOperation.DESCRIBE]
            elif kind == AclResourceType.GROUP:
                ops += [AclOperation.READ]
        if ops or not (args.producer or args.consumer):
            result[resource] = list(dict.fromkeys(ops))
    if args.producer and args.idempotent:
        result.setdefault((AclResourceType.CLUSTER, CLUSTER_NAME), []).append(AclOperation.IDEMPOTENT_WRITE)
    return result


def _entries(args: argparse.Namespace) -> list[tuple[str, str, AclPermissionType]]:
    entries = []
    for principals, hosts, permission in ((args.allow_principal, args.allow_host, AclPermissionType.ALLOW),
                                          (args.deny_principal, args.deny_host, AclPermissionType.DENY)):
        for principal in principals:
            if ":" not in principal:
                raise ClientError(f"{principal}: a principal is Type:name, e.g. User:alice")
            for host in hosts or ["*"]:
                entries.append((principal, host, permission))
    return entries


def bindings_to_add(args: argparse.Namespace) -> list[AclBinding]:
    named = resources(args)
    if not named:
        raise ClientError("name a resource: --topic, --group, --cluster, --transactional-id, --delegation-token "
                          "or --user-principal")
    entries = _entries(args)
    if not entries:
        raise ClientError("name who: --allow-principal or --deny-principal")
    pattern = _pattern(args, filters=False)
    bindings = []
    for (kind, name), ops in _operations_by_resource(args, named).items():
        for principal, host, permission in entries:
            for op in ops or [AclOperation.ALL]:
                bindings.append(AclBinding(kind, name, pattern, principal, host, op, permission))
    return bindings


# -- requests --------------------------------------------------------------------------------------------------


def _version(kind: AclResourceType | int) -> int:
    return 3 if kind == AclResourceType.USER else 2  # USER resources are v3's (Kafka 2.8 and later serve v2)


def _describe(client: AdminClient, kind: int, name: str | None, pattern: int, principal: str | None = None
              ) -> list[AclBinding]:
    from trafka.wire.messages import DescribeAclsRequest

    response = client.request(DescribeAclsRequest(
        resource_type_filter=kind, resource_name_filter=name, pattern_type_filter=pattern,
        principal_filter=principal, host_filter=None, operation=ANY, permission_type=ANY), _version(kind))
    check(response.error_code, "listing ACLs", response.error_message)
    return [AclBinding(AclResourceType(r.resource_type), r.resource_name, PatternType(r.pattern_type), a.principal,
                       a.host, AclOperation(a.operation), AclPermissionType(a.permission_type))
            for r in response.resources for a in r.acls]


def _print(bindings: list[AclBinding]) -> None:
    by_pattern: dict[tuple, list[AclBinding]] = {}
    for binding in sorted(bindings, key=AclBinding.sort_key):
        by_pattern.setdefault((binding.resource_type, binding.resource_name, binding.pattern_type), []).append(binding)
    for members in by_pattern.values():
        print(f"Current ACLs for resource `{members[0].pattern_str()}`: ")
        for binding in members:
            print(f" \t{binding.entry_str()} ")
        print()


def _list(client: AdminClient, args: argparse.Namespace) -> int:
    named = resources(args)
    principals = args.principal or [None]
    found: dict[AclBinding, None] = {}
    if not named:
        pattern = PatternType[args.resource_pattern_type] if args.resource_pattern_type else PatternType.ANY
        for principal in principals:
            found.update(dict.fromkeys(_describe(client, ANY, None, pattern, principal)))
    for kind, name in named:
        for principal in principals:
            found.update(dict.fromkeys(_describe(client, kind, name, _pattern(args, filters=True), principal)))
    _print(list(found))
    return 0


def _add(client: AdminClient, args: argparse.Namespace) -> int:
    from trafka.wire.messages import CreateAclsRequest

    bindings = bindings_to_add(args)
    for pattern in dict.fromkeys((b.resource_type, b.resource_name, b.pattern_type) for b in bindings):
        members = [b for b in bindings if (b.resource_type, b.resource_name, b.pattern_type) == pattern]
        print(f"Adding ACLs for resource `{members[0].pattern_str()}`: ")
        for binding in members:
            print(f" \t{binding.entry_str()} ")
        print()
    response = client.request(CreateAclsRequest(creations=[CreateAclsRequest.AclCreation(
        resource_type=b.resource_type, resource_name=b.resource_name, resource_pattern_type=b.pattern_type,
        principal=b.principal, host=b.host, operation=b.operation, permission_type=b.permission_type)
        for b in bindings]), max(_version(b.resource_type) for b in bindings))
    failed = 0
    for binding, result in zip(bindings, response.results, strict=True):
        try:
            check(result.error_code, f"adding {binding}", result.error_message)
        except ClientError as exc:
            print(f"trafka acls: {exc}", file=sys.stderr)
            failed = 1
    for kind, name in dict.fromkeys((b.resource_type, b.resource_name) for b in bindings):
        _print(_describe(client, kind, name, bindings[0].pattern_type))
    return failed


def _remove(client: AdminClient, args: argparse.Namespace) -> int:
    from trafka.wire.messages import DeleteAclsRequest

    named = resources(args)
    if not named:
        raise ClientError("name a resource: --topic, --group, --cluster, --transactional-id, --delegation-token "
                          "or --user-principal")
    pattern = _pattern(args, filters=True)
    entries = _entries(args)
    filters = []
    for (kind, name), ops in _operations_by_resource(args, named).items():
        if not entries and not ops:  # everything on the resource
            filters.append(DeleteAclsRequest.DeleteAclsFilter(
                resource_type_filter=kind, resource_name_filter=name, pattern_type_filter=pattern,
                principal_filter=None, host_filter=None, operation=ANY, permission_type=ANY))
            continue
        for principal, host, permission in entries or [(None, None, AclPermissionType.ANY)]:
            for op in ops or [AclOperation.ANY]:
                filters.append(DeleteAclsRequest.DeleteAclsFilter(
                    resource_type_filter=kind, resource_name_filter=name, pattern_type_filter=pattern,
                    principal_filter=principal, host_filter=host, operation=op, permission_type=permission))
    response = client.request(DeleteAclsRequest(filters=filters),
                              max(_version(f.resource_type_filter) for f in filters))
    failed = 0
    removed = []
    for result in response.filter_results:
        try:
            check(result.error_code, "removing ACLs", result.error_message)
        except ClientError as exc:
            print(f"trafka acls: {exc}", file=sys.stderr)
            failed = 1
            continue
        removed += [AclBinding(AclResourceType(m.resource_type), m.resource_name, PatternType(m.pattern_type),
                               m.principal, m.host, AclOperation(m.operation), AclPermissionType(m.permission_type))
                    for m in result.matching_acls]
    for binding in sorted(dict.fromkeys(removed), key=AclBinding.sort_key):
        print(f"Removed {binding}")
    return failed


ACTIONS = {"list": _list, "add": _add, "remove": _remove}
