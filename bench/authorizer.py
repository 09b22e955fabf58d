"""The authorizer's cost: produce and fetch throughput with Kafka's StandardAuthorizer and 1,000 ACLs, as a
ratio of the same broker without an authorizer, on trafka and Apache Kafka side by side.

    python -m bench --authorizer            # about 1.5 minutes on 2 cores
    python -m bench --authorizer --quick    # a check that the mode works: under a minute
    python -m bench --authorizer --brokers trafka   # one broker only (trafka, kafka)

Each broker runs twice, both processes started before anything is measured, each with a SASL_PLAINTEXT
listener on 127.0.0.1 (PLAIN; JAAS users ``admin`` and ``bench``) beside the PLAINTEXT one:

- **no authorizer**: nothing else set;
- **authorizer**: ``authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer``,
  ``super.users=User:admin`` (Kafka also ``User:ANONYMOUS``: in KRaft combined mode its controller and
  PLAINTEXT listeners are anonymous) and 1,000 ACLs created with CreateAcls as ``admin`` before any clock
  starts (``acl_bindings``): other principals' rights on other topics and groups (LITERAL and PREFIXED,
  ALLOW and DENY, prefixes of many lengths, some for ``User:*`` and some for one host), other principals'
  ALLOW and DENY bindings on the benchmark topic's own name and on prefixes of it, and the client's own:
  ALLOW WRITE on the topic (LITERAL), ALLOW READ on ``bench.`` (PREFIXED; DESCRIBE comes with either),
  ALLOW READ on its consumer's group id and a DENY on another topic. The client, ``bench``, is no super
  user, so every Produce and Fetch it sends walks the bindings that apply to the topic.

Before measuring, as ``admin``, DescribeAcls must list 1,000 bindings (Kafka applies created ACLs
asynchronously: it is asked until it does), and ``bench`` must produce a record to the topic and read it
back; with the authorizer, ``bench`` must also be refused WRITE on a topic of another principal.

The workloads are the main benchmark's 1 KB produce and consume cells (``bench.workloads.produce`` and
``consume``, as in bench/security.py: confluent-kafka, ``linger.ms=5``, ``batch.size`` 1 MiB, compression
none, no key, random payload, acks=1; the consumer ``assign()``s partition 0 from the start, group id
``bench-consume`` (no group joined), ``fetch.queue.backoff.ms=10``), each run in a fresh client process
(``python -m bench.authorizer --workload JSON``) connecting to the SASL_PLAINTEXT listener as ``bench``
in both configurations:

0. **Warm-up**: ``warmup_count`` records produced to each (broker, configuration), not counted.
1. **Produce**: ``count`` x 1 KB; time from the first ``produce()`` to ``flush()`` returning. Every
   (broker, configuration) pair in turns, ``repeats`` rounds, each round starting one pair further on
   (``bench.common.in_turns``): the median.
2. **Consume**: ``count`` records from the start of the topic: the steady rate from the first batch to the
   last, in turns as above, the median.

Reported: records/s and MB/s per broker and configuration, the cores the broker and the client kept busy,
each broker's authorizer figures as a ratio of its own no-authorizer figures (of the medians, and round by
round: a round runs both configurations seconds apart), trafka/kafka per
configuration, and the time one check of trafka's authorizer takes with these ACLs (timed in the
harness's process, ``trafka_check_us``). Results: ``bench/results/<date>-authorizer.json`` and ``.md``
(``-authorizer-quick`` for ``--quick``).
"""
from __future__ import annotations

import collections
import sys
import time
from pathlib import Path
from typing import Any

from bench import brokers, common, variants
from bench.common import Progress, lookup, size_label
from bench.variants import num as _num

ADMIN_TIMEOUT_S = 60.0
SUPPORTED = ("trafka", "kafka")
CONFIGURATIONS = ("none", "acls")
LABELS = {"none": "no authorizer", "acls": "authorizer, 1,000 ACLs"}
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
LISTENER = "SASL_PLAINTEXT"
MECHANISM = "PLAIN"
ADMIN, ADMIN_PASSWORD = "admin", "admin-secret"
USER, PASSWORD = "bench", "bench-secret"
PRINCIPAL = f"User:{USER}"
JAAS = (f'org.apache.kafka.common.security.plain.PlainLoginModule required username="{ADMIN}" '
        f'password="{ADMIN_PASSWORD}" user_{ADMIN}="{ADMIN_PASSWORD}" user_{USER}="{PASSWORD}";')
# Kafka in KRaft combined mode: its controller listener and the PLAINTEXT one its own connections use are
# anonymous, and need every right. trafka's single node makes no requests to itself.
SUPER_USERS = {"trafka": f"User:{ADMIN}", "kafka": f"User:{ADMIN};User:ANONYMOUS"}
TOPIC = "bench.authorizer"
GROUP = "bench-consume"  # the group id of bench.workloads.consume (assign() only: no group is joined)
REFUSED_TOPIC = "team-000.orders"  # a topic of another principal: bench may not write to it
ACL_COUNT = 1000
# The checks' clients say nothing below critical: a check that fails raises with what the client saw, and a
# consumer closed right after its check may leave its coordinator connection mid-handshake.
CHECK_LOG_LEVEL = 2


AuthorizerPlan = variants.Plan

# 11 rounds: one check costs microseconds against a millisecond or more per request, so the difference sought is
# far inside the run-to-run spread of a shared 2-core machine, and a run takes about a second.
FULL = AuthorizerPlan(mode="authorizer", size=1024, count=200_000, repeats=11, warmup_count=100_000)
QUICK = AuthorizerPlan(mode="authorizer-quick", size=1024, count=50_000, repeats=1, warmup_count=10_000)


# ---------------------------------------------------------------------------------------------------
# The 1,000 ACLs

# (resource type, name, pattern type, principal, host, operation, permission), in confluent-kafka's names.
Acl = tuple[str, str, str, str, str, str, str]


def acl_bindings(count: int = ACL_COUNT) -> list[Acl]:
    """``count`` distinct ACLs, always the same: the client's own, other principals' on the benchmark topic's
    name and its prefixes, and a cluster's worth of teams' rights on their own topics and groups."""
    acls: list[Acl] = [
        # The client's own: WRITE by the topic's name, READ through a prefix, its consumer's group id, and a
        # DENY that applies to another topic.
        ("TOPIC", TOPIC, "LITERAL", PRINCIPAL, "*", "WRITE", "ALLOW"),
        ("TOPIC", "bench.", "PREFIXED", PRINCIPAL, "*", "READ", "ALLOW"),
        ("GROUP", GROUP, "LITERAL", PRINCIPAL, "*", "READ", "ALLOW"),
        ("TOPIC", "bench.audit", "LITERAL", PRINCIPAL, "*", "READ", "DENY"),
    ]
    # Others on the benchmark topic: each of these applies to every request for it and must be looked at.
    acls += [("TOPIC", TOPIC, "LITERAL", f"User:reader-{i:02d}", "*", "READ", "ALLOW") for i in range(12)]
    acls += [("TOPIC", TOPIC, "LITERAL", f"User:writer-{i:02d}", "*", "WRITE", "ALLOW") for i in range(6)]
    acls += [("TOPIC", TOPIC, "LITERAL", f"User:intruder-{i:02d}", "*", op, "DENY")
             for i in range(4) for op in ("READ", "WRITE")]
    acls += [("TOPIC", TOPIC, "LITERAL", f"User:reader-{i:02d}", f"10.1.0.{i + 1}", "WRITE", "DENY") for i in range(4)]
    for i, prefix in enumerate(("b", "be", "ben", "bench", "bench.", "bench.a", "bench.auth", "bench.authoriz")):
        acls.append(("TOPIC", prefix, "PREFIXED", f"User:auditor-{i:02d}", "*", "DESCRIBE", "ALLOW"))
        acls.append(("TOPIC", prefix, "PREFIXED", f"User:intruder-{i:02d}", "*", "ALL", "DENY"))
    acls += [("GROUP", "bench-", "PREFIXED", f"User:reader-{i:02d}", "*", "READ", "ALLOW") for i in range(6)]
    acls += [("TOPIC", "public.", "PREFIXED", "User:*", "*", "DESCRIBE", "ALLOW"),
             ("GROUP", "public-", "PREFIXED", "User:*", "*", "READ", "ALLOW")]
    # Teams, each with an application, a reader and an operator, as many as it takes to reach ``count``.
    team = 0
    while len(acls) < count:
        t = f"team-{team:03d}"
        app, reader, ops = f"User:{t}-app", f"User:{t}-reader", f"User:{t}-ops"
        neighbour = f"team-{(team + 1) % 100:03d}"
        acls += [
            ("TOPIC", f"{t}.orders", "LITERAL", app, "*", "WRITE", "ALLOW"),
            ("TOPIC", f"{t}.payments", "LITERAL", app, "*", "WRITE", "ALLOW"),
            ("TOPIC", f"{t}.ingest-", "PREFIXED", app, "*", "WRITE", "ALLOW"),
            ("TOPIC", f"{t}.ingest-legacy-", "PREFIXED", app, "*", "WRITE", "DENY"),
            ("TOPIC", f"{t}.", "PREFIXED", app, "*", "CREATE", "ALLOW"),
            ("TOPIC", f"{t}.", "PREFIXED", reader, "*", "READ", "ALLOW"),
            ("TOPIC", f"{t}.payments.pii", "LITERAL", reader, "*", "READ", "DENY"),
            ("TOPIC", f"{t}.orders", "LITERAL", reader, f"10.9.{team % 256}.7", "READ", "DENY"),
            ("TOPIC", f"{neighbour}.orders", "LITERAL", reader, "*", "READ", "ALLOW"),
            ("TOPIC", f"{t}.public", "LITERAL", "User:*", "*", "READ", "ALLOW"),
            ("TOPIC", t, "PREFIXED", ops, "*", "ALTER_CONFIGS", "ALLOW"),
            ("TOPIC", t, "PREFIXED", ops, "*", "DESCRIBE_CONFIGS", "ALLOW"),
            ("GROUP", f"{t}-", "PREFIXED", reader, "*", "READ", "ALLOW"),
            ("GROUP", f"{t}-dashboard", "LITERAL", ops, "*", "DESCRIBE", "ALLOW"),
            ("GROUP", f"{t}-", "PREFIXED", ops, "*", "DELETE", "ALLOW"),
            ("GROUP", f"{t}-legacy", "LITERAL", reader, "*", "READ", "DENY"),
        ]
        team += 1
    acls = acls[:count]
    assert len(set(acls)) == count, "the ACLs must be distinct"
    return acls


def applying_to_topic(acls: list[Acl], topic: str = TOPIC) -> list[Acl]:
    """The bindings an authorizer must consider for a request on ``topic``: its name's, ``*``'s and those of
    every prefix of its name."""
    return [a for a in acls if a[0] == "TOPIC" and (
        (a[2] == "LITERAL" and a[1] in (topic, "*")) or (a[2] == "PREFIXED" and topic.startswith(a[1])))]


def acl_summary(acls: list[Acl]) -> dict[str, Any]:
    kinds = collections.Counter(f"{rt} {pattern} {permission}" for rt, _, pattern, _, _, _, permission in acls)
    topic_prefixes = {len(a[1]) for a in acls if a[0] == "TOPIC" and a[2] == "PREFIXED"}
    return {
        "count": len(acls),
        "by_kind": dict(sorted(kinds.items())),
        "principals": len({a[3] for a in acls}),
        "topic_prefix_lengths": sorted(topic_prefixes),
        "applying_to_benchmark_topic": len(applying_to_topic(acls)),
        "client_own": [list(a) for a in acls if a[3] == PRINCIPAL],
    }


def trafka_check_us(acls: list[Acl], checks: int = 20_000) -> dict[str, float]:
    """Microseconds per check of trafka's ``Authorizer.authorize`` holding ``acls``, for the client's WRITE and
    READ on the benchmark topic (what each Produce and Fetch asks), timed in this process."""
    from trafka.broker.security.authorizer import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AclResourceType,
        Authorizer,
        PatternType,
    )

    authorizer = Authorizer(frozenset({f"User:{ADMIN}"}), bindings=[
        AclBinding(AclResourceType[rt], name, PatternType[pattern], principal, host, AclOperation[op],
                   AclPermissionType[permission]) for rt, name, pattern, principal, host, op, permission in acls])
    out = {}
    for operation in (AclOperation.WRITE, AclOperation.READ):
        check = authorizer.authorize
        assert check(PRINCIPAL, "127.0.0.1", operation, AclResourceType.TOPIC, TOPIC)
        started = time.perf_counter()
        for _ in range(checks):
            check(PRINCIPAL, "127.0.0.1", operation, AclResourceType.TOPIC, TOPIC)
        out[operation.name] = round((time.perf_counter() - started) / checks * 1e6, 2)
    return out


# ---------------------------------------------------------------------------------------------------
# The client process (common.main_workload): the main benchmark's workload, as the client user over
# SASL_PLAINTEXT.


def run_workload(params: dict[str, Any], timeout: float = common.WORKLOAD_TIMEOUT_S) -> dict[str, Any]:
    return common.run_workload("bench.authorizer", params, timeout)


def client_config(user: str = USER, password: str = PASSWORD) -> dict[str, str]:
    return {"security.protocol": LISTENER, "sasl.mechanism": MECHANISM, "sasl.username": user,
            "sasl.password": password}


# ---------------------------------------------------------------------------------------------------
# The harness


def broker_properties(name: str, configuration: str) -> dict[str, str]:
    """The SASL_PLAINTEXT listener's settings (both configurations) and, for ``acls``, the authorizer's."""
    properties = {
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": MECHANISM,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
    }
    if configuration == "acls":
        properties.update({"authorizer.class.name": AUTHORIZER, "super.users": SUPER_USERS[name]})
    return properties


class Subject:
    """One broker in one configuration: its process, its SASL_PLAINTEXT address, its results so far."""

    def __init__(self, name: str, configuration: str, acls: list[Acl], live: list[brokers.BrokerProcess]) -> None:
        self.name, self.configuration = name, configuration
        self.extra = brokers.ExtraListeners.on_free_ports(
            {LISTENER: LISTENER}, properties=broker_properties(name, configuration))
        self.broker = brokers.start(brokers.with_listeners(brokers.SPECS[name], self.extra))
        live.append(self.broker)
        self.address = self.extra.address(LISTENER)
        self.results: dict[str, Any] = {
            "start_to_ready_s": self.broker.ready_s,
            "listeners": {"PLAINTEXT": self.broker.bootstrap, LISTENER: self.address},
            "warmup": {}, "produce": {}, "consume": {},
        }
        self.prepare(acls if configuration == "acls" else [])

    def admin(self) -> Any:
        from confluent_kafka.admin import AdminClient

        return AdminClient({"bootstrap.servers": self.address, "log_level": CHECK_LOG_LEVEL,
                            **client_config(ADMIN, ADMIN_PASSWORD)})

    def prepare(self, acls: list[Acl]) -> None:
        """As ``admin``: the topics and the ACLs; then the checks that the client may work and, with the
        authorizer, that it is refused elsewhere."""
        from confluent_kafka.admin import (
            AclBinding,
            AclBindingFilter,
            AclOperation,
            AclPermissionType,
            NewTopic,
            ResourcePatternType,
            ResourceType,
        )

        admin = self.admin()
        topics = [NewTopic(TOPIC, 1, 1), NewTopic(REFUSED_TOPIC, 1, 1)]
        for future in admin.create_topics(topics, operation_timeout=ADMIN_TIMEOUT_S,
                                          request_timeout=ADMIN_TIMEOUT_S).values():
            future.result(timeout=ADMIN_TIMEOUT_S)
        self._wait_for_leader(admin, TOPIC)
        checks: dict[str, Any] = {}
        if acls:
            started = time.perf_counter()
            bindings = [AclBinding(ResourceType[rt], name, ResourcePatternType[pattern], principal, host,
                                   AclOperation[op], AclPermissionType[permission])
                        for rt, name, pattern, principal, host, op, permission in acls]
            for future in admin.create_acls(bindings, request_timeout=ADMIN_TIMEOUT_S).values():
                future.result(timeout=ADMIN_TIMEOUT_S)
            checks["create_acls_s"] = round(time.perf_counter() - started, 3)
            every = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                     AclPermissionType.ANY)
            deadline = time.perf_counter() + ADMIN_TIMEOUT_S
            while True:  # Kafka applies created ACLs from its metadata log, a moment after acknowledging them
                described = admin.describe_acls(every, request_timeout=ADMIN_TIMEOUT_S).result(timeout=ADMIN_TIMEOUT_S)
                if len(described) >= len(acls) or time.perf_counter() > deadline:
                    break
                time.sleep(0.1)
            checks["described_acls"] = len(described)
            if len(described) != len(acls):
                raise brokers.BrokerError(f"{self.label}: DescribeAcls lists {len(described)} ACLs, not {len(acls)}")
        checks["client_produces_and_reads"] = self._client_round_trip()
        if acls:
            refusal = self._client_refused()
            checks["client_refused_elsewhere"] = refusal
            if refusal != "TOPIC_AUTHORIZATION_FAILED":
                raise brokers.BrokerError(f"{self.label}: {PRINCIPAL} writing to {REFUSED_TOPIC}: {refusal}, "
                                          "not TOPIC_AUTHORIZATION_FAILED")
        self.results["checks"] = checks

    def _wait_for_leader(self, admin: Any, topic: str) -> None:
        deadline = time.perf_counter() + ADMIN_TIMEOUT_S
        while time.perf_counter() < deadline:
            described = admin.list_topics(topic, timeout=10).topics.get(topic)
            if described is not None and described.error is None and all(
                    p.leader >= 0 for p in described.partitions.values()) and described.partitions:
                return
            time.sleep(0.05)
        raise brokers.BrokerError(f"{self.label}: topic {topic} has no leader after {ADMIN_TIMEOUT_S:.0f} s")

    def _client_round_trip(self) -> bool:
        """``bench`` produces one record to the topic and reads it back; raises if it cannot."""
        from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

        delivered: list[Any] = []
        producer = Producer({"bootstrap.servers": self.address, "log_level": CHECK_LOG_LEVEL, **client_config()})
        producer.produce(TOPIC, b"authorizer check", on_delivery=lambda err, msg: delivered.append(err))
        producer.flush(30)
        if delivered != [None]:
            raise brokers.BrokerError(f"{self.label}: {PRINCIPAL} could not produce to {TOPIC}: {delivered}")
        consumer = Consumer({"bootstrap.servers": self.address, "log_level": CHECK_LOG_LEVEL, "group.id": GROUP,
                             "enable.auto.commit": False, **client_config()})
        try:
            consumer.list_topics(TOPIC, timeout=10)
            consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
            deadline = time.perf_counter() + 30
            while time.perf_counter() < deadline:
                message = consumer.poll(0.5)
                if message is None:
                    continue
                if message.error() is not None:
                    raise brokers.BrokerError(f"{self.label}: {PRINCIPAL} reading {TOPIC}: {message.error()}")
                return True
        finally:
            consumer.close()
        raise brokers.BrokerError(f"{self.label}: {PRINCIPAL} read nothing back from {TOPIC}")

    def _client_refused(self) -> str:
        """What ``bench`` gets writing to a topic it has no ACL for: the error's name."""
        from confluent_kafka import Producer

        delivered: list[Any] = []
        producer = Producer({"bootstrap.servers": self.address, "log_level": CHECK_LOG_LEVEL,
                             "message.timeout.ms": 10_000, **client_config()})
        producer.produce(REFUSED_TOPIC, b"refused", on_delivery=lambda err, msg: delivered.append(err))
        producer.flush(20)
        return delivered[0].name() if delivered and delivered[0] is not None else repr(delivered)

    @property
    def label(self) -> str:
        return f"{self.name}, {LABELS[self.configuration]}"

    def run(self, params: dict[str, Any]) -> dict[str, Any]:
        result = run_workload({"bootstrap": self.address, "broker_pid": self.broker.pid,
                               "client_config": client_config(), "topic": TOPIC, **params})
        if not self.broker.alive():
            result["error"] = f"broker exited: {self.broker.log_tail(5)}"
        return result


def run(plan: AuthorizerPlan, subjects: list[Subject], progress: Progress) -> None:
    measured = variants.measure(plan, subjects, lambda s, params: s.run(params), name=lambda s: s.name,
                                label=lambda s: f", {LABELS[s.configuration]}", progress=progress)
    for section, results in measured.items():
        for s, result in results.items():
            s.results[section] = result


def derive(by_broker: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Each broker's rates with the authorizer over its own rates without (in its results, as
    ``relative_to_no_authorizer``), and trafka's rate over kafka's per configuration (returned)."""
    for results in by_broker.values():
        relative = results["relative_to_no_authorizer"] = {}
        per_round = results["relative_to_no_authorizer_per_round"] = {}
        for section in ("produce", "consume"):
            plain = lookup(results, ("none", section, "records_per_s"))
            authorized = lookup(results, ("acls", section, "records_per_s"))
            relative[section] = authorized / plain if plain and authorized else None
            # The same ratio round by round: the two configurations ran minutes apart at most, within a round
            # seconds apart, so a slow spell of the machine moves both of a round's figures.
            rounds = [a / n if a and n else None for a, n in zip(
                lookup(results, ("acls", section, "runs_records_per_s")) or [],
                lookup(results, ("none", section, "runs_records_per_s")) or [], strict=False)]
            known = sorted(r for r in rounds if r is not None)
            per_round[section] = {"ratios": [round(r, 3) if r is not None else None for r in rounds],
                                  "median": known[len(known) // 2] if known else None}
    return variants.trafka_over_kafka(by_broker, CONFIGURATIONS, _where)


def _where(section: str, configuration: str) -> tuple[str, ...]:
    return (configuration, section)


# ---------------------------------------------------------------------------------------------------
# Reporting


def report(plan: AuthorizerPlan, document: dict[str, Any]) -> str:
    by_broker: dict[str, dict[str, Any]] = document["results"]
    names = list(by_broker)
    what = (f"{plan.count:,} x {size_label(plan.size)} records, acks={plan.acks}, {plan.partitions} partition, "
            f"over SASL_PLAINTEXT (PLAIN) as {PRINCIPAL}, median of {plan.repeats} run{'s' if plan.repeats > 1 else ''}"
            " in turns")
    lines = variants.heading("Authorizer", document, what)
    lines += variants.throughput_table(document, CONFIGURATIONS, LABELS.__getitem__, _where)

    lines += ["", "Each broker's figures with the authorizer and 1,000 ACLs over its own figures without an "
              "authorizer (records/s; 1.00 = the authorizer costs nothing):",
              "", "| over no authorizer | " + " | ".join(names) + " |", "|" + "---|" * (len(names) + 1)]
    for section in ("produce", "consume"):
        cells = [_num(lookup(by_broker[n], ("relative_to_no_authorizer", section)), ".2f") for n in names]
        lines.append(f"| **{section}** | " + " | ".join(cells) + " |")
    if plan.repeats > 1:
        for section in ("produce", "consume"):
            cells = []
            for n in names:
                rounds = lookup(by_broker[n], ("relative_to_no_authorizer_per_round", section)) or {}
                known = [r for r in rounds.get("ratios", []) if r is not None]
                cells.append(f"{_num(rounds.get('median'), '.2f')} ({min(known):.2f}-{max(known):.2f})"
                             if known else "n/a")
            lines.append(f"| {section}, round by round: median (range) | " + " | ".join(cells) + " |")

    summary = document["settings"]["acls"]
    lines += ["", f"ACLs: {summary['count']:,} for {summary['principals']} principals "
              f"({', '.join(f'{k}: {v}' for k, v in summary['by_kind'].items())}); "
              f"{summary['applying_to_benchmark_topic']} of them apply to `{TOPIC}` (its name and prefixes of it), "
              f"topic prefixes of {len(summary['topic_prefix_lengths'])} lengths. Checked before measuring:", ""]
    for n in names:
        for configuration in CONFIGURATIONS:
            c = lookup(by_broker[n], (configuration, "checks")) or {}
            parts = []
            if "described_acls" in c:
                parts.append(f"DescribeAcls lists {c['described_acls']:,} ACLs (created in {c['create_acls_s']:.2f} s)")
            if c.get("client_produces_and_reads"):
                parts.append(f"{PRINCIPAL} produced to `{TOPIC}` and read it back")
            if "client_refused_elsewhere" in c:
                parts.append(f"writing to `{REFUSED_TOPIC}`: {c['client_refused_elsewhere']}")
            lines.append(f"- {n}, {LABELS[configuration]}: " + ("; ".join(parts) or "n/a"))
    cost = document.get("trafka_authorize_us")
    if cost:
        lines += ["", f"trafka's `Authorizer.authorize` with these ACLs, timed in the harness's process: "
                  f"{cost['WRITE']:.1f} µs for {PRINCIPAL}'s WRITE on `{TOPIC}` (each Produce), {cost['READ']:.1f} µs "
                  "for its READ (each Fetch)."]
    errors = []
    for n in names:
        for configuration in CONFIGURATIONS:
            for section in ("warmup", "produce", "consume"):
                r = lookup(by_broker[n], (configuration, section))
                if isinstance(r, dict) and "error" in r:
                    errors.append(f"- {n} {LABELS[configuration]} {section}: {r['error']}")
    if errors:
        lines += ["", "Errors:", "", *errors]
    for note in document.get("notes", []):
        lines += ["", note]
    return "\n".join(lines) + "\n"


def settings(plan: AuthorizerPlan, acls: list[Acl], names: list[str]) -> dict[str, Any]:
    return {
        "workloads": "bench.workloads produce and consume (the main benchmark's, same client settings): "
                     f"confluent-kafka, {plan.count:,} x {size_label(plan.size)}, acks={plan.acks}, linger.ms=5, "
                     "batch.size=1048576, compression none, no key, random payload; the consumer assign()s "
                     f"partition 0 from the start, group id {GROUP} (no group joined), fetch.queue.backoff.ms=10; "
                     "each run a fresh process, its client configurations with the listener's settings added",
        "client": {k: ("<password>" if k == "sasl.password" else v) for k, v in client_config().items()},
        "listeners": f"PLAINTEXT and {LISTENER} ({MECHANISM}: users {ADMIN} and {USER}) on 127.0.0.1; the clients "
                     f"use {LISTENER}; topics and ACLs created there as {ADMIN}; topic {TOPIC}, {plan.partitions} "
                     "partition",
        "broker_properties": {f"{n} {c}": {k: ("<JAAS: PlainLoginModule, users admin and bench>"
                                               if k.endswith("jaas.config") else v)
                                           for k, v in broker_properties(n, c).items()}
                              for n in names for c in CONFIGURATIONS},
        "acls": acl_summary(acls),
        "order": f"both configurations of every broker started first; warm-up of {plan.warmup_count:,} records each, "
                 f"not counted; then produce and consume rounds over every (broker, configuration) in turns "
                 f"({plan.repeats} round(s), median)",
        **variants.broker_settings(),
    }


def main(argv: list[str] | None = None, quick: bool = False, output: Path | None = None,
         brokers_arg: str = ",".join(SUPPORTED)) -> int:
    notes: list[str] = []
    parsed = common.parse_mode("python -m bench --authorizer", __doc__, argv, quick, output, brokers_arg, SUPPORTED,
                               notes)
    if parsed is None:
        return 0
    args, names = parsed
    plan = QUICK if args.quick else FULL

    start = common.RunStart()
    acls = acl_bindings()
    progress = Progress(len(names) * len(CONFIGURATIONS) * (1 + 2 * plan.repeats))
    live: list[brokers.BrokerProcess] = []
    by_broker: dict[str, dict[str, Any]] = {}
    try:
        versions = {n: brokers.SPECS[n].version() for n in names}
        subjects = []
        for configuration in CONFIGURATIONS:
            for name in names:
                subject = Subject(name, configuration, acls, live)
                print(f"bench: {subject.label} ready in {subject.broker.ready_s:.2f} s: {LISTENER} {subject.address}; "
                      f"checks {subject.results['checks']}", file=sys.stderr, flush=True)
                subjects.append(subject)
        run(plan, subjects, progress)
        for s in subjects:
            output_tail = common.stop_broker(s.broker, live, s.results)
            by_broker.setdefault(s.name, {"version": versions[s.name]})[s.configuration] = {
                **s.results, "broker_output_tail": output_tail}
    except KeyboardInterrupt:
        return common.interrupted()
    finally:
        common.stop_all(live)
    by_broker = {n: by_broker[n] for n in names if n in by_broker}
    versus = derive(by_broker)
    document = {
        **start.document(plan, "python -m bench --authorizer" + (" --quick" if args.quick else ""), versions),
        "settings": settings(plan, acls, names),
        "notes": notes,
        "results": by_broker,
        "trafka_over_kafka": versus,
        **({"trafka_authorize_us": trafka_check_us(acls)} if "trafka" in names else {}),
    }
    common.publish(document, report(plan, document), args.output, start.started_at)
    return 0


if __name__ == "__main__":
    sys.exit(main())
