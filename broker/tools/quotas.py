"""``trafka quotas``: client quotas, as ``kafka-configs.sh --entity-type users|clients|ips`` manages them, through
DescribeClientQuotas and AlterClientQuotas against a running broker (trafka, or any Kafka since 2.6), with
``--bootstrap-server`` and ``--command-config`` as every tool takes them:

    trafka quotas describe [--entity-type users|clients|ips [--entity-name N | --entity-default]] ...
    trafka quotas alter --entity-type users --entity-name alice [--entity-type clients --entity-default]
                        [--add-config producer_byte_rate=1048576,consumer_byte_rate=2097152]
                        [--delete-config request_percentage]

An entity is one ``--entity-type`` or two (users with clients), each followed by its ``--entity-name`` or
``--entity-default`` (the default of every user or client id without its own); ``describe`` with a type alone
shows every entity of that type, and with no type at all every entity. Quotas: ``producer_byte_rate``,
``consumer_byte_rate`` (bytes per second), ``request_percentage``, ``controller_mutation_rate`` for users and
clients; ``connection_creation_rate`` for ips. ``describe`` prints one line per entity, as kafka-configs.sh
does: ``Quota configs for user-principal 'alice', client-id 'app' are producer_byte_rate=1048576.0``. A
broker's refusal is shown with Kafka's error name and message (``INVALID_REQUEST: Invalid configuration key
bogus``); the exit code is then 1.
"""
from __future__ import annotations

import argparse

from trafka.broker.tools.admin_client import AdminClient, ClientError, check

ENTITY_TYPES = {"users": "user", "clients": "client-id", "ips": "ip"}
_LABELS = (("user", "user-principal"), ("client-id", "client-id"), ("ip", "ip"))
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2
VERSION = 1


class _InOrder(argparse.Action):
    """Keeps --entity-type, --entity-name and --entity-default in the order given (each name follows its type)."""

    def __call__(self, parser, namespace, values, option_string=None):
        items = list(getattr(namespace, "entity", None) or [])
        items.append((option_string, values))
        namespace.entity = items


def add_parser(commands: argparse._SubParsersAction) -> None:
    quotas = commands.add_parser(
        "quotas", help="describe and alter client quotas (users, clients, ips), as kafka-configs.sh does",
        description="Client quotas of a running broker (--bootstrap-server HOST:PORT, --command-config FILE for a "
                    "secured listener): producer_byte_rate, consumer_byte_rate, request_percentage, "
                    "controller_mutation_rate of users and client ids, connection_creation_rate of ips."
    ).add_subparsers(dest="action", required=True)
    entity = argparse.ArgumentParser(add_help=False)
    entity.add_argument("--entity-type", action=_InOrder, choices=sorted(ENTITY_TYPES), dest="entity")
    entity.add_argument("--entity-name", action=_InOrder, dest="entity")
    entity.add_argument("--entity-default", action=_InOrder, nargs=0, dest="entity")
    quotas.add_parser("describe", parents=[entity], help="the quotas of matching entities")
    alter = quotas.add_parser("alter", parents=[entity], help="set and remove an entity's quotas")
    alter.add_argument("--add-config", action="append", default=[], metavar="KEY=VALUE[,KEY=VALUE...]")
    alter.add_argument("--delete-config", action="append", default=[], metavar="KEY[,KEY...]")


def parse_entity(items: list[tuple[str, object]] | None) -> list[tuple[str, str | None, bool]]:
    """(entity type, name or None, named) per --entity-type, from the options in order; ClientError when a name
    comes before any type or a type is given twice."""
    parsed: list[list] = []
    for option, value in items or []:
        if option == "--entity-type":
            entity_type = ENTITY_TYPES[str(value)]
            if any(p[0] == entity_type for p in parsed):
                raise ClientError(f"--entity-type {value} given twice")
            parsed.append([entity_type, None, False])
        else:
            if not parsed or parsed[-1][2]:
                raise ClientError(f"{option} must follow an --entity-type (and only one per type)")
            parsed[-1][1] = None if option == "--entity-default" else str(value)
            parsed[-1][2] = True
    return [tuple(p) for p in parsed]


def _entity_text(entity: dict[str, str | None]) -> str:
    return ", ".join(f"{label} '{'<default>' if entity[key] is None else entity[key]}'"
                     for key, label in _LABELS if key in entity)


def _number(value: float) -> str:
    return repr(float(value))


def describe(client: AdminClient, args: argparse.Namespace) -> int:
    from trafka.wire.messages import DescribeClientQuotasRequest as D

    components = []
    for entity_type, name, named in parse_entity(args.entity):
        if not named:
            components.append(D.ComponentData(entity_type=entity_type, match_type=MATCH_SPECIFIED, match=None))
        elif name is None:
            components.append(D.ComponentData(entity_type=entity_type, match_type=MATCH_DEFAULT, match=None))
        else:
            components.append(D.ComponentData(entity_type=entity_type, match_type=MATCH_EXACT, match=name))
    # Named entities alone (as kafka-configs.sh asks): a user's own quotas, not those of its clients too.
    strict = bool(components)
    response = client.request(D(components=components, strict=strict), VERSION)
    check(response.error_code, "describing client quotas", response.error_message)
    lines = []
    for entry in response.entries or []:
        entity = {e.entity_type: e.entity_name for e in entry.entity}
        values = ", ".join(f"{v.key}={_number(v.value)}" for v in sorted(entry.values, key=lambda v: v.key))
        lines.append(f"Quota configs for {_entity_text(entity)} are {values}")
    for line in sorted(lines):
        print(line)
    return 0


def _split(items: list[str]) -> list[str]:
    return [part.strip() for item in items for part in item.split(",") if part.strip()]


def alter(client: AdminClient, args: argparse.Namespace) -> int:
    from trafka.wire.messages import AlterClientQuotasRequest as A

    entity = parse_entity(args.entity)
    if not entity or not all(named for _, _, named in entity):
        raise ClientError("alter needs an entity: --entity-type T followed by --entity-name N or --entity-default")
    ops = []
    for item in _split(args.add_config):
        key, sep, value = item.partition("=")
        try:
            number = float(value)
        except ValueError:
            number = None
        if not sep or not key or number is None:
            raise ClientError(f"--add-config {item!r}: expected KEY=NUMBER")
        ops.append(A.OpData(key=key.strip(), value=number, remove=False))
    ops += [A.OpData(key=key, value=0.0, remove=True) for key in _split(args.delete_config)]
    if not ops:
        raise ClientError("nothing to alter: give --add-config KEY=VALUE or --delete-config KEY")
    request = A(entries=[A.EntryData(entity=[A.EntityData(entity_type=t, entity_name=n) for t, n, _ in entity],
                                     ops=ops)], validate_only=False)
    response = client.request(request, VERSION)
    text = _entity_text({t: n for t, n, _ in entity})
    for result in response.entries:
        check(result.error_code, f"quotas of {text}", result.error_message)
    print(f"Completed updating quotas of {text}.")
    return 0


ACTIONS = {"describe": describe, "alter": alter}

