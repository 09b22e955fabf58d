"""``trafka topics | groups | configs | produce | consume | users | acls | quotas``: the day-to-day jobs of Kafka's
``kafka-topics.sh``, ``kafka-consumer-groups.sh``, ``kafka-configs.sh`` and console clients, against any
Kafka-compatible broker (``--bootstrap-server``, default 127.0.0.1:9092).

    trafka topics list | describe [TOPIC ...] | create TOPIC [--partitions N] [--config K=V ...] | delete TOPIC ...
    trafka groups list | describe GROUP ... | reset-offsets GROUP --topic T --to-earliest|... [--execute]
    trafka configs describe --topic T | --broker ID;  trafka configs alter ... --set K=V --delete K
    trafka produce TOPIC            (one record per line of standard input; KEY<TAB>VALUE with --keys;
                                     a missing topic is created where the broker creates topics on first use)
    trafka consume TOPIC [--from-beginning] [--max-messages N]
    trafka users list [USER ...] | set USER [--password P] [--mechanism M] [--iterations N] | delete USER
                                    (SCRAM credentials, of a running broker or, with --data-dir, of a
                                     data directory no broker uses: trafka.broker.tools.users)
    trafka acls list | add | remove  (ACLs, with kafka-acls.sh's options: trafka.broker.tools.acls)
    trafka quotas describe | alter   (client quotas, with kafka-configs.sh's options: trafka.broker.tools.quotas)

Every tool takes ``--command-config FILE``, a client properties file with the security settings of the
listener it connects to, as Kafka's tools do (trafka.broker.tools.client_security): SSL, mutual TLS,
SASL_PLAINTEXT and SASL_SSL with PLAIN or SCRAM-SHA-256/512. Its ``bootstrap.servers`` serves when no
``--bootstrap-server`` is given.

Exit codes: 0 done, 1 the broker refused or could not be reached (the message says which), 2 a usage error
(a bad --command-config file included).
"""
from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Sequence

from trafka.broker.tools.admin_client import AdminClient, ClientError, check
from trafka.broker.tools.client_security import ClientConfigError, ClientSecurity
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import (
    ConsumerGroupDescribeRequest,
    DescribeShareGroupOffsetsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DescribeConfigsRequest,
    DescribeGroupsRequest,
    FetchRequest,
    IncrementalAlterConfigsRequest,
    ListGroupsRequest,
    ListOffsetsRequest,
    MetadataResponse,
    OffsetCommitRequest,
    OffsetFetchRequest,
    ProduceRequest,
    ShareGroupDescribeRequest,
)
from trafka.wire.records import SimpleRecord, build_batch, iter_batches

COMMANDS = ("topics", "groups", "configs", "produce", "consume", "users", "acls", "quotas")
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
LATEST, EARLIEST = -1, -2
SET, DELETE = 0, 1
#: How long ``produce`` waits for the partitions of a topic it got created to have leaders.
LEADER_TIMEOUT_S = 30.0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="trafka", description="Kafka tools for any Kafka-compatible broker.")
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT",
                        help=f"a broker of the cluster (default: the --command-config file's bootstrap.servers, "
                             f"else {DEFAULT_BOOTSTRAP})")
    parser.add_argument("--command-config", metavar="FILE",
                        help="client properties: security.protocol, sasl.mechanism, sasl.jaas.config, ssl.* "
                             "(Kafka's client names; librdkafka's sasl.username, ssl.ca.location ... too)")
    commands = parser.add_subparsers(dest="command", required=True)

    topics = commands.add_parser("topics", help="list, describe, create and delete topics").add_subparsers(
        dest="action", required=True)
    listing = topics.add_parser("list", help="topic names, one a line")
    listing.add_argument("--internal", action="store_true", help="include internal topics")
    describe = topics.add_parser("describe", help="partitions, leaders, replicas and configs")
    describe.add_argument("topics", nargs="*", metavar="TOPIC", help="default: every topic")
    create = topics.add_parser("create", help="create a topic")
    create.add_argument("topic")
    create.add_argument("--partitions", type=int, default=-1, help="default: the broker's num.partitions")
    create.add_argument("--replication-factor", type=int, default=-1)
    create.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")
    create.add_argument("--if-not-exists", action="store_true")
    delete = topics.add_parser("delete", help="delete topics")
    delete.add_argument("topics", nargs="+", metavar="TOPIC")
    delete.add_argument("--if-exists", action="store_true")

    groups = commands.add_parser("groups", help="list consumer groups, describe them with their lag").add_subparsers(
        dest="action", required=True)
    groups.add_parser("list", help="group ids with their type and state")
    described = groups.add_parser("describe", help="committed offsets, log end offsets, lag and owners")
    described.add_argument("groups", nargs="+", metavar="GROUP")
    reset = groups.add_parser("reset-offsets", help="move an inactive group's committed offsets (a dry run "
                                                    "unless --execute)")
    reset.add_argument("group")
    reset.add_argument("--topic", required=True, help="TOPIC, or TOPIC:P,P,... for some partitions")
    where = reset.add_mutually_exclusive_group(required=True)
    where.add_argument("--to-earliest", action="store_true")
    where.add_argument("--to-latest", action="store_true")
    where.add_argument("--to-offset", type=int, metavar="N")
    where.add_argument("--shift-by", type=int, metavar="N", help="from the committed offset, + or -")
    reset.add_argument("--execute", action="store_true", help="commit the new offsets (default: only show them)")

    configs = commands.add_parser("configs", help="describe and alter topic and broker configs").add_subparsers(
        dest="action", required=True)
    for name in ("describe", "alter"):
        action = configs.add_parser(name)
        target = action.add_mutually_exclusive_group(required=True)
        target.add_argument("--topic")
        target.add_argument("--broker", metavar="ID", help='a broker id, or "" for the cluster-wide default')
        if name == "alter":
            action.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
            action.add_argument("--delete", action="append", default=[], metavar="KEY")

    produce = commands.add_parser("produce", help="produce the lines of standard input")
    produce.add_argument("topic")
    produce.add_argument("--partition", type=int, help="default: one partition at random for all")
    produce.add_argument("--keys", action="store_true", help="each line is KEY<TAB>VALUE")

    consume = commands.add_parser("consume", help="print a topic's records")
    consume.add_argument("topic")
    consume.add_argument("--from-beginning", action="store_true", help="default: only records produced from now")
    consume.add_argument("--max-messages", type=int, help="stop after so many")
    consume.add_argument("--timeout-ms", type=int, default=3000, help="stop when nothing came for so long")
    consume.add_argument("--keys", action="store_true", help="print KEY<TAB>VALUE")

    from trafka.broker.tools.users import add_parser as add_users_parser

    add_users_parser(commands)
    from trafka.broker.tools.acls import add_parser as add_acls_parser

    add_acls_parser(commands)
    from trafka.broker.tools.quotas import add_parser as add_quotas_parser

    add_quotas_parser(commands)
    return parser


def main(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(argv)
    try:
        security = ClientSecurity.load(args.command_config) if args.command_config else None
        if args.command == "users" and (args.data_dir is not None or args.zookeeper is not None):
            from trafka.broker.tools.users import offline

            return offline(args)
    except ClientConfigError as exc:
        print(f"trafka {args.command}: {exc}", file=sys.stderr)
        return 2
    except ClientError as exc:
        print(f"trafka {args.command}: {exc}", file=sys.stderr)
        return 1
    bootstrap = args.bootstrap_server or (security and security.bootstrap_servers) or DEFAULT_BOOTSTRAP
    try:
        with AdminClient(bootstrap, security=security) as client:
            return _action(args)(client, args)
    except ClientConfigError as exc:
        print(f"trafka {args.command}: {exc}", file=sys.stderr)
        return 2
    except ClientError as exc:
        print(f"trafka {args.command}: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # the output was closed (| head): nothing more to say
        return 0


def _action(args: argparse.Namespace):
    if args.command == "users":
        from trafka.broker.tools.users import ACTIONS

        return ACTIONS[args.action]
    if args.command == "acls":
        from trafka.broker.tools.acls import ACTIONS as ACL_ACTIONS

        return ACL_ACTIONS[args.action]
    if args.command == "quotas":
        from trafka.broker.tools.quotas import ACTIONS as QUOTA_ACTIONS

        return QUOTA_ACTIONS[args.action]
    return _ACTIONS[(args.command, getattr(args, "action", None))]


# -- topics ----------------------------------------------------------------------------------------


def _topics_list(client: AdminClient, args: argparse.Namespace) -> int:
    for topic in sorted(client.metadata().topics, key=lambda t: t.name):
        if args.internal or not topic.is_internal:
            print(topic.name)
    return 0


def _topics_describe(client: AdminClient, args: argparse.Namespace) -> int:
    metadata = client.metadata(args.topics or None)
    failed = 0
    for topic in sorted(metadata.topics, key=lambda t: t.name):
        if topic.error_code != ErrorCode.NONE:
            print(f"trafka topics: {topic.name}: {ErrorCode(topic.error_code).name}", file=sys.stderr)
            failed = 1
            continue
        partitions = sorted(topic.partitions, key=lambda p: p.partition_index)
        replication = len(partitions[0].replica_nodes) if partitions else 0
        overrides = [f"{c.name}={c.value}" for c in _configs(client, TOPIC_RESOURCE, topic.name) if c.config_source == 1]
        print(f"Topic: {topic.name}\tTopicId: {topic.topic_id}\tPartitionCount: {len(partitions)}\t"
              f"ReplicationFactor: {replication}\tConfigs: {','.join(overrides)}")
        for p in partitions:
            print(f"\tTopic: {topic.name}\tPartition: {p.partition_index}\tLeader: {p.leader_id}\t"
                  f"Replicas: {','.join(map(str, p.replica_nodes))}\tIsr: {','.join(map(str, p.isr_nodes))}")
    return failed


def _topics_create(client: AdminClient, args: argparse.Namespace) -> int:
    topic = CreateTopicsRequest.CreatableTopic(
        name=args.topic, num_partitions=args.partitions, replication_factor=args.replication_factor,
        assignments=[], configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
                                 for k, v in _pairs(args.config, "--config").items()],
    )
    (result,) = client.request(CreateTopicsRequest(topics=[topic], timeout_ms=30_000), 5).topics
    if result.error_code == ErrorCode.TOPIC_ALREADY_EXISTS and args.if_not_exists:
        return 0
    check(result.error_code, f"creating topic {args.topic}", result.error_message)
    print(f"Created topic {args.topic} with {result.num_partitions} partition(s).")
    return 0


def _topics_delete(client: AdminClient, args: argparse.Namespace) -> int:
    response = client.request(DeleteTopicsRequest(topic_names=list(args.topics), timeout_ms=30_000), 5)
    for result in response.responses:
        if result.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and args.if_exists:
            continue
        check(result.error_code, f"deleting topic {result.name}", result.error_message)
        print(f"Deleted topic {result.name}.")
    return 0


# -- groups ----------------------------------------------------------------------------------------


def _groups_list(client: AdminClient, args: argparse.Namespace) -> int:
    response = client.request(ListGroupsRequest(states_filter=[], types_filter=[]), 5)
    check(response.error_code, "listing groups")
    for group in sorted(response.groups, key=lambda g: g.group_id):
        print(f"{group.group_id}\t{group.group_type or 'classic'}\t{group.group_state}")
    return 0


def _share_group_describe(client: AdminClient, group_id: str, coordinator: int) -> bool:
    """Print a share group's members and assignments (as kafka-share-groups.sh --describe --members does);
    False when ``group_id`` is no share group."""
    try:
        (described,) = client.request(ShareGroupDescribeRequest(group_ids=[group_id]), 1,
                                      node_id=coordinator).groups
    except Exception:  # a broker that serves no share groups
        return False
    if described.error_code != 0:
        return False
    print(f"{group_id}\tshare\t{described.group_state}\tgroup epoch {described.group_epoch}\t"
          f"assignment epoch {described.assignment_epoch}")
    for m in described.members:
        assignment = ",".join(f"{tp.topic_name}:{','.join(map(str, sorted(tp.partitions)))}"
                              for tp in m.assignment.topic_partitions) or "-"
        print(f"{group_id}\t{m.member_id}\t{m.client_host}\t{m.client_id}\tepoch {m.member_epoch}\t{assignment}")
    try:  # the start offset of each partition the group consumes, and its lag (DescribeShareGroupOffsets)
        D = DescribeShareGroupOffsetsRequest
        offsets = client.request(D(groups=[D.DescribeShareGroupOffsetsRequestGroup(group_id=group_id, topics=None)]),
                                 1, node_id=coordinator).groups[0]
    except Exception:  # a broker that does not serve it
        return True
    if offsets.error_code == 0 and offsets.topics:
        print("GROUP\tTOPIC\tPARTITION\tSTART-OFFSET\tLAG")
        for topic in sorted(offsets.topics, key=lambda t: t.topic_name):
            for p in sorted(topic.partitions, key=lambda p: p.partition_index):
                start = p.start_offset if p.start_offset >= 0 else "-"
                lag = p.lag if p.lag >= 0 else "-"
                print(f"{group_id}\t{topic.topic_name}\t{p.partition_index}\t{start}\t{lag}")
    return True


def _groups_describe(client: AdminClient, args: argparse.Namespace) -> int:
    header = True
    for group_id in args.groups:
        coordinator = client.coordinator(group_id)
        if _share_group_describe(client, group_id, coordinator):
            continue
        if header:
            print("GROUP\tTOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-END-OFFSET\tLAG\tCONSUMER-ID\tCLIENT-ID")
            header = False
        owners = _owners(client, coordinator, group_id)
        fetched = client.request(OffsetFetchRequest(group_id=group_id, topics=None, require_stable=False), 7,
                                 node_id=coordinator)
        check(fetched.error_code, f"fetching the offsets of group {group_id}")
        committed = {(t.name, p.partition_index): p.committed_offset for t in fetched.topics for p in t.partitions}
        ends = _log_end_offsets(client, {topic for topic, _ in set(committed) | set(owners)})
        for topic, partition in sorted(set(committed) | set(owners)):
            offset = committed.get((topic, partition), -1)
            end = ends.get((topic, partition), -1)
            lag = end - offset if offset >= 0 and end >= 0 else "-"
            member, client_id = owners.get((topic, partition), ("-", "-"))
            print(f"{group_id}\t{topic}\t{partition}\t{offset if offset >= 0 else '-'}\t{end}\t{lag}\t{member}\t"
                  f"{client_id}")
    return 0


def _groups_reset_offsets(client: AdminClient, args: argparse.Namespace) -> int:
    topic, _, listed = args.topic.partition(":")
    (found,) = client.metadata([topic]).topics
    check(found.error_code, f"topic {topic}")
    partitions = sorted(int(p) for p in listed.split(",")) if listed else sorted(
        p.partition_index for p in found.partitions)
    coordinator = client.coordinator(args.group)
    (described,) = client.request(DescribeGroupsRequest(groups=[args.group]), 5, node_id=coordinator).groups
    if described.members:
        raise ClientError(f"the offsets of group {args.group} can only be reset while it is inactive "
                          f"(it is {described.group_state}, with {len(described.members)} member(s))")
    earliest = _list_offsets(client, {topic}, EARLIEST)
    latest = _list_offsets(client, {topic}, LATEST)
    fetched = client.request(OffsetFetchRequest(group_id=args.group, topics=[
        OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=partitions)], require_stable=False),
        7, node_id=coordinator)
    committed = {p.partition_index: p.committed_offset for t in fetched.topics for p in t.partitions}
    new = {}
    for partition in partitions:
        low, high = earliest.get((topic, partition), 0), latest.get((topic, partition), 0)
        if args.to_earliest:
            wanted = low
        elif args.to_latest:
            wanted = high
        elif args.to_offset is not None:
            wanted = args.to_offset
        else:
            wanted = max(committed.get(partition, -1), low) + args.shift_by
        new[partition] = min(max(wanted, low), high)  # within the log, as Kafka's tool keeps it
    print("GROUP\tTOPIC\tPARTITION\tNEW-OFFSET")
    for partition, offset in new.items():
        print(f"{args.group}\t{topic}\t{partition}\t{offset}")
    if not args.execute:
        print("(a dry run: --execute commits these offsets)", file=sys.stderr)
        return 0
    C = OffsetCommitRequest
    response = client.request(C(group_id=args.group, generation_id_or_member_epoch=-1, member_id="",
                                group_instance_id=None, topics=[C.OffsetCommitRequestTopic(name=topic, partitions=[
                                    C.OffsetCommitRequestPartition(partition_index=p, committed_offset=o,
                                                                   committed_leader_epoch=-1, committed_metadata="")
                                    for p, o in new.items()])]), 8, node_id=coordinator)
    for result in response.topics[0].partitions:
        check(result.error_code, f"committing {topic}-{result.partition_index} for group {args.group}")
    return 0


def _owners(client: AdminClient, coordinator: int, group_id: str) -> dict[tuple[str, int], tuple[str, str]]:
    """(topic, partition) -> (member id, client id) of the group's members, whatever its protocol."""
    from trafka.broker.groups.migration import decode_assignment

    owners: dict[tuple[str, int], tuple[str, str]] = {}
    (described,) = client.request(DescribeGroupsRequest(groups=[group_id]), 5, node_id=coordinator).groups
    if described.error_code == ErrorCode.NONE and described.protocol_type == "consumer":
        for member in described.members:
            if member.member_assignment:
                for topic, partitions in decode_assignment(bytes(member.member_assignment)).items():
                    owners.update(((topic, p), (member.member_id, member.client_id)) for p in partitions)
        if described.members or described.group_state != "Dead":
            return owners
    response = client.request(ConsumerGroupDescribeRequest(group_ids=[group_id]), 0, node_id=coordinator)
    for group in response.groups:
        if group.error_code == ErrorCode.NONE:
            for member in group.members:
                for assigned in member.assignment.topic_partitions:
                    owners.update(((assigned.topic_name, p), (member.member_id, member.client_id))
                                  for p in assigned.partitions)
    return owners


def _log_end_offsets(client: AdminClient, topics: set[str]) -> dict[tuple[str, int], int]:
    return _list_offsets(client, topics, LATEST)


def _list_offsets(client: AdminClient, topics: set[str], timestamp: int) -> dict[tuple[str, int], int]:
    """Each partition's offset for ``timestamp`` (LATEST, EARLIEST), asked of its leader."""
    if not topics:
        return {}
    by_leader: dict[int, dict[str, list[int]]] = {}
    for topic in client.metadata(sorted(topics)).topics:
        for p in topic.partitions:
            by_leader.setdefault(p.leader_id, {}).setdefault(topic.name, []).append(p.partition_index)
    offsets = {}
    L = ListOffsetsRequest
    for leader, partitions in by_leader.items():
        request = L(replica_id=-1, isolation_level=0, topics=[
            L.ListOffsetsTopic(name=name, partitions=[L.ListOffsetsPartition(partition_index=p, timestamp=timestamp)
                                                      for p in indexes]) for name, indexes in partitions.items()])
        for topic in client.request(request, 7, node_id=leader).topics:
            for p in topic.partitions:
                if p.error_code == ErrorCode.NONE:
                    offsets[(topic.name, p.partition_index)] = p.offset
    return offsets


# -- configs ---------------------------------------------------------------------------------------


def _configs(client: AdminClient, resource_type: int, name: str):
    R = DescribeConfigsRequest.DescribeConfigsResource
    response = client.request(DescribeConfigsRequest(
        resources=[R(resource_type=resource_type, resource_name=name, configuration_keys=None)],
        include_synonyms=False, include_documentation=False), 4)
    (result,) = response.results
    check(result.error_code, f"describing the configs of {name or 'the cluster default'}", result.error_message)
    return result.configs


_SOURCES = {1: "topic", 2: "broker (dynamic)", 3: "cluster default (dynamic)", 4: "server.properties",
            5: "default", 6: "broker logger"}


def _configs_describe(client: AdminClient, args: argparse.Namespace) -> int:
    resource_type, name = (TOPIC_RESOURCE, args.topic) if args.topic is not None else (BROKER_RESOURCE, args.broker)
    for config in sorted(_configs(client, resource_type, name), key=lambda c: c.name):
        value = "(sensitive)" if config.is_sensitive else config.value
        print(f"{config.name}={value}\t{_SOURCES.get(config.config_source, config.config_source)}")
    return 0


def _configs_alter(client: AdminClient, args: argparse.Namespace) -> int:
    resource_type, name = (TOPIC_RESOURCE, args.topic) if args.topic is not None else (BROKER_RESOURCE, args.broker)
    I = IncrementalAlterConfigsRequest
    changes = [I.AlterableConfig(name=k, config_operation=SET, value=v) for k, v in _pairs(args.set, "--set").items()]
    changes += [I.AlterableConfig(name=k, config_operation=DELETE, value=None) for k in args.delete]
    if not changes:
        raise ClientError("nothing to change: give --set KEY=VALUE or --delete KEY")
    response = client.request(I(validate_only=False, resources=[
        I.AlterConfigsResource(resource_type=resource_type, resource_name=name, configs=changes)]), 1)
    (result,) = response.responses
    check(result.error_code, f"altering the configs of {name or 'the cluster default'}", result.error_message)
    print(f"Altered {len(changes)} config(s) of {'topic ' + name if args.topic is not None else 'broker ' + repr(name)}.")
    return 0


# -- produce and consume ---------------------------------------------------------------------------


def _produce(client: AdminClient, args: argparse.Namespace) -> int:
    topic = _topic_to_produce_to(client, args.topic)
    leaders = {p.partition_index: p.leader_id for p in topic.partitions}
    partition = args.partition if args.partition is not None else random.choice(sorted(leaders))
    if partition not in leaders:
        raise ClientError(f"topic {args.topic} has no partition {partition}")
    records = []
    for line in sys.stdin.buffer:
        line = line.rstrip(b"\r\n")
        key, value = line.split(b"\t", 1) if args.keys and b"\t" in line else (None, line)
        records.append(SimpleRecord(key, value, timestamp=int(time.time() * 1000)))
    sent = 0
    for start in range(0, len(records), 500):
        batch = build_batch(records[start:start + 500])
        response = client.request(ProduceRequest(acks=-1, timeout_ms=30_000, topic_data=[
            ProduceRequest.TopicProduceData(name=args.topic, partition_data=[
                ProduceRequest.PartitionProduceData(index=partition, records=batch)])]), 9, node_id=leaders[partition])
        result = response.responses[0].partition_responses[0]
        check(result.error_code, f"producing to {args.topic}-{partition}", result.error_message)
        sent += len(records[start:start + 500])
    print(f"Produced {sent} record(s) to {args.topic}-{partition}.", file=sys.stderr)
    return 0


def _topic_to_produce_to(client: AdminClient, name: str) -> MetadataResponse.MetadataResponseTopic:
    """The topic's metadata, with a leader for every partition. A missing topic is created where the
    broker creates topics on first use, as Kafka's console producer gets it created (its Metadata asks
    for auto-creation); where the broker does not, the error says that the topic does not exist."""
    (topic,) = client.metadata([name]).topics
    deadline = time.monotonic() + LEADER_TIMEOUT_S
    if topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        # Kafka answers UNKNOWN_TOPIC_OR_PARTITION while its controller creates the topic, so the
        # answer alone does not tell a refusal; the broker's own setting does.
        refused = ClientError(f"topic {name} does not exist, and the broker does not create topics on first use "
                              f"(auto.create.topics.enable=false): create it with 'trafka topics create {name}'")
        (topic,) = client.metadata([name], auto_create=True).topics
        if topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and not _creates_topics(client):
            raise refused
        while topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and time.monotonic() < deadline:
            time.sleep(0.1)
            (topic,) = client.metadata([name], auto_create=True).topics
        if topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            raise refused
        print(f"Created topic {name}: the broker creates topics on first use.", file=sys.stderr)
    waiting = (ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE)
    while topic.error_code in waiting and not _all_led(topic) and time.monotonic() < deadline:
        time.sleep(0.1)
        (topic,) = client.metadata([name]).topics
    check(topic.error_code, f"topic {name}")
    return topic


def _creates_topics(client: AdminClient) -> bool:
    """Whether the cluster's brokers create topics on first use (asked of one of them, since Kafka
    describes a broker's configs only to the broker itself); True where it does not say."""
    brokers = client.metadata([]).brokers
    if not brokers:
        return True
    node_id = min(b.node_id for b in brokers)
    R = DescribeConfigsRequest.DescribeConfigsResource
    response = client.request(DescribeConfigsRequest(
        resources=[R(resource_type=BROKER_RESOURCE, resource_name=str(node_id),
                     configuration_keys=["auto.create.topics.enable"])],
        include_synonyms=False, include_documentation=False), 4, node_id=node_id)
    (result,) = response.results
    values = [c.value for c in result.configs if c.name == "auto.create.topics.enable"]
    return result.error_code != ErrorCode.NONE or values != ["false"]


def _all_led(topic: MetadataResponse.MetadataResponseTopic) -> bool:
    return bool(topic.partitions) and all(
        p.error_code == ErrorCode.NONE and p.leader_id >= 0 for p in topic.partitions)


def _consume(client: AdminClient, args: argparse.Namespace) -> int:
    (topic,) = client.metadata([args.topic]).topics
    check(topic.error_code, f"topic {args.topic}")
    leaders = {p.partition_index: p.leader_id for p in topic.partitions}
    positions = _list_offsets(client, {args.topic}, EARLIEST if args.from_beginning else LATEST)
    printed = 0
    quiet_since = time.monotonic()
    while args.max_messages is None or printed < args.max_messages:
        got = 0
        for partition, leader in sorted(leaders.items()):
            offset = positions.get((args.topic, partition), 0)
            request = FetchRequest(replica_id=-1, max_wait_ms=200, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                                   topics=[FetchRequest.FetchTopic(topic=args.topic, partitions=[
                                       FetchRequest.FetchPartition(partition=partition, fetch_offset=offset,
                                                                   partition_max_bytes=1 << 20)])])
            data = client.request(request, 12, node_id=leader).responses[0].partitions[0]
            check(data.error_code, f"fetching {args.topic}-{partition} at offset {offset}")
            for record in _records(data.records):
                if record.offset < offset:
                    continue
                key = record.key.decode(errors="replace") + "\t" if args.keys and record.key is not None else ""
                print(key + (record.value or b"").decode(errors="replace"), flush=True)
                offset = record.offset + 1
                printed += 1
                got += 1
                if args.max_messages is not None and printed >= args.max_messages:
                    break
            positions[(args.topic, partition)] = offset
            if args.max_messages is not None and printed >= args.max_messages:
                break
        if got:
            quiet_since = time.monotonic()
        elif (time.monotonic() - quiet_since) * 1000 >= args.timeout_ms:
            break
    print(f"Consumed {printed} record(s).", file=sys.stderr)
    return 0


def _records(data):
    """The records of the whole batches in a Fetch response's records (a partial last one is left)."""
    buffer = bytes(data or b"")
    end = 0
    while end + 12 <= len(buffer):
        size = 12 + int.from_bytes(buffer[end + 8:end + 12], "big")
        if end + size > len(buffer):
            break
        end += size
    for batch in iter_batches(buffer, 0, end):
        if not batch.is_control:
            yield from batch.records()


def _pairs(items: Sequence[str], option: str) -> dict[str, str]:
    pairs = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ClientError(f"{option} {item!r}: expected KEY=VALUE")
        pairs[key] = value
    return pairs


_ACTIONS = {
    ("topics", "list"): _topics_list,
    ("topics", "describe"): _topics_describe,
    ("topics", "create"): _topics_create,
    ("topics", "delete"): _topics_delete,
    ("groups", "list"): _groups_list,
    ("groups", "describe"): _groups_describe,
    ("groups", "reset-offsets"): _groups_reset_offsets,
    ("configs", "describe"): _configs_describe,
    ("configs", "alter"): _configs_alter,
    ("produce", None): _produce,
    ("consume", None): _consume,
}
