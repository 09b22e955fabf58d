"""``trafka topics | groups | configs | produce | consume`` against a real trafka broker and against Apache
Kafka itself: the same commands, the same output, the exit codes a script relies on."""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest
from confluent_kafka import Consumer

from compat_tests.harness import SOURCE_ROOT, wait_until
from compat_tests.reference import KafkaBroker


@pytest.fixture(params=["trafka", "kafka"])
def target(request):
    return request.getfixturevalue("broker" if request.param == "trafka" else "kafka")


def trafka(target, *arguments: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trafka", *arguments, "--bootstrap-server", target.bootstrap],
                          input=stdin, capture_output=True, text=True, timeout=60, cwd=SOURCE_ROOT)


def test_topics(target):
    name = f"cli-{uuid.uuid4().hex[:8]}"

    created = trafka(target, "topics", "create", name, "--partitions", "3", "--config", "retention.ms=3600000")
    again = trafka(target, "topics", "create", name)
    tolerated = trafka(target, "topics", "create", name, "--if-not-exists")

    assert (created.returncode, created.stdout) == (0, f"Created topic {name} with 3 partition(s).\n"), created
    assert again.returncode == 1 and "TOPIC_ALREADY_EXISTS" in again.stderr, again
    assert tolerated.returncode == 0, tolerated
    wait_until(lambda: name in trafka(target, "topics", "list").stdout.split(), message=f"{name} to be listed")
    described = wait_until(lambda: (out := trafka(target, "topics", "describe", name).stdout).count("Leader: ") == 3
                           and out, message=f"{name}'s partitions to have leaders")
    first = described.splitlines()[0]
    assert f"Topic: {name}\t" in first and "PartitionCount: 3\tReplicationFactor: 1\tConfigs: retention.ms=3600000" in first
    assert trafka(target, "topics", "delete", name).returncode == 0
    missing = trafka(target, "topics", "delete", name)
    assert missing.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in missing.stderr, missing
    assert trafka(target, "topics", "delete", name, "--if-exists").returncode == 0


def test_produce_consume_and_a_groups_lag(target):
    name = f"cli-{uuid.uuid4().hex[:8]}"
    assert trafka(target, "topics", "create", name, "--partitions", "1").returncode == 0
    wait_until(lambda: "Leader: " in trafka(target, "topics", "describe", name).stdout, message="a leader")

    produced = trafka(target, "produce", name, "--keys", stdin="k1\tone\nk2\ttwo\nk3\tthree\n")
    consumed = trafka(target, "consume", name, "--from-beginning", "--keys", "--max-messages", "3")

    assert produced.returncode == 0, produced
    assert (consumed.returncode, consumed.stdout) == (0, "k1\tone\nk2\ttwo\nk3\tthree\n"), consumed
    group = f"cli-group-{uuid.uuid4().hex[:8]}"
    consumer = Consumer({"bootstrap.servers": target.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    try:
        consumer.subscribe([name])
        message = wait_until(lambda: (m := consumer.poll(0.5)) is not None and m.error() is None and m,
                             message="one record")
        consumer.commit(message=message, asynchronous=False)
    finally:
        consumer.close()
    listed = trafka(target, "groups", "list")
    described = trafka(target, "groups", "describe", group)
    assert group in listed.stdout, listed
    assert described.returncode == 0, described
    assert described.stdout.splitlines()[1].split("\t")[:6] == [group, name, "0", "1", "3", "2"], described.stdout


def test_configs(target):
    name = f"cli-{uuid.uuid4().hex[:8]}"
    assert trafka(target, "topics", "create", name).returncode == 0

    altered = trafka(target, "configs", "alter", "--topic", name, "--set", "retention.ms=1234567")
    refused = trafka(target, "configs", "alter", "--broker", "1", "--set", "num.partitions=3")

    assert altered.returncode == 0, altered
    assert "retention.ms=1234567\ttopic" in trafka(target, "configs", "describe", "--topic", name).stdout
    assert refused.returncode == 1 and "Cannot update these configs dynamically: [num.partitions]" in refused.stderr


def test_produce_gets_a_missing_topic_created_where_the_broker_creates_topics(target):
    name = f"cli-new-{uuid.uuid4().hex[:8]}"

    produced = trafka(target, "produce", name, stdin="first\nsecond\n")

    assert produced.returncode == 0, produced
    assert produced.stderr.splitlines()[0] == f"Created topic {name}: the broker creates topics on first use.", produced
    assert f"Produced 2 record(s) to {name}-0." in produced.stderr
    consumed = trafka(target, "consume", name, "--from-beginning", "--max-messages", "2")
    assert (consumed.returncode, consumed.stdout) == (0, "first\nsecond\n"), consumed
    again = trafka(target, "produce", name, stdin="third\n")
    assert again.returncode == 0 and "Created topic" not in again.stderr, again


@pytest.fixture(params=["trafka", "kafka"])
def strict_target(request, broker_factory, tmp_path):
    """A broker that does not create topics on first use: trafka, or Apache Kafka itself."""
    settings = {"auto.create.topics.enable": "false"}
    if request.param == "trafka":
        yield broker_factory(settings)
        return
    kafka = KafkaBroker(tmp_path / "strict-kafka", overrides=settings, name="strict-kafka")
    kafka.start()
    yield kafka
    kafka.close()


def test_produce_to_a_missing_topic_where_the_broker_does_not_create_topics(strict_target):
    strict = strict_target
    name = f"cli-new-{uuid.uuid4().hex[:8]}"

    produced = trafka(strict, "produce", name, stdin="lost\n")

    assert produced.returncode == 1, produced
    assert produced.stderr == (
        f"trafka produce: topic {name} does not exist, and the broker does not create topics on first use "
        f"(auto.create.topics.enable=false): create it with 'trafka topics create {name}'\n")
    assert name not in trafka(strict, "topics", "list").stdout.split()


def test_an_unreachable_broker_is_exit_code_1():
    result = subprocess.run([sys.executable, "-m", "trafka", "topics", "list", "--bootstrap-server", "127.0.0.1:1"],
                            capture_output=True, text=True, timeout=30, cwd=SOURCE_ROOT)
    assert (result.returncode, result.stderr) == (1, "trafka topics: cannot connect to 127.0.0.1:1: Connection refused\n")


def test_reset_offsets_of_an_inactive_group(target):
    name = f"cli-{uuid.uuid4().hex[:8]}"
    assert trafka(target, "topics", "create", name, "--partitions", "1").returncode == 0
    wait_until(lambda: "Leader: " in trafka(target, "topics", "describe", name).stdout, message="a leader")
    assert trafka(target, "produce", name, stdin="a\nb\nc\nd\n").returncode == 0
    group = f"cli-reset-{uuid.uuid4().hex[:8]}"
    consumer = Consumer({"bootstrap.servers": target.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    try:
        consumer.subscribe([name])
        message = wait_until(lambda: (m := consumer.poll(0.5)) is not None and m.error() is None and m,
                             message="one record")
        consumer.commit(message=message, asynchronous=False)
        active = trafka(target, "groups", "reset-offsets", group, "--topic", name, "--to-earliest", "--execute")
    finally:
        consumer.close()

    dry = trafka(target, "groups", "reset-offsets", group, "--topic", name, "--to-latest")
    shifted = wait_until(lambda: (r := trafka(target, "groups", "reset-offsets", group, "--topic", name,
                                               "--shift-by", "2", "--execute")).returncode == 0 and r,
                         message="the group to be inactive")

    assert active.returncode == 1 and "can only be reset while it is inactive" in active.stderr, active
    assert dry.stdout.splitlines()[1].split("\t") == [group, name, "0", "4"], dry.stdout
    assert shifted.stdout.splitlines()[1].split("\t") == [group, name, "0", "3"], shifted.stdout
    described = trafka(target, "groups", "describe", group)
    assert described.stdout.splitlines()[1].split("\t")[:6] == [group, name, "0", "3", "4", "1"], described.stdout


def test_users(target):
    """``trafka users`` through DescribeUserScramCredentials and AlterUserScramCredentials: the same output
    from trafka and from Apache Kafka, Kafka's own error names and messages."""
    alice, bob = f"alice-{uuid.uuid4().hex[:6]}", f"bob-{uuid.uuid4().hex[:6]}"

    made = trafka(target, "users", "set", alice, "--password", "alice-secret")
    made_512 = trafka(target, "users", "add", bob, "--mechanism", "SCRAM-SHA-512", "--iterations", "8192",
                      stdin="bob-secret\n")
    listed = trafka(target, "users", "list", alice, bob)
    every = trafka(target, "users", "list")

    assert (made.returncode, made.stdout) == (0, f"Set the SCRAM-SHA-256 credential of user {alice} (4096 "
                                                 f"iterations).\nSet the SCRAM-SHA-512 credential of user {alice} "
                                                 "(4096 iterations).\n")
    assert made_512.returncode == 0, made_512
    assert listed.stdout == (f"USER\tMECHANISM\tITERATIONS\n{alice}\tSCRAM-SHA-256\t4096\n"
                             f"{alice}\tSCRAM-SHA-512\t4096\n{bob}\tSCRAM-SHA-512\t8192\n"), listed
    assert f"{bob}\tSCRAM-SHA-512\t8192\n" in every.stdout and every.returncode == 0, every

    too_few = trafka(target, "users", "set", "carol", "--password", "x", "--iterations", "1000",
                     "--mechanism", "SCRAM-SHA-256")
    not_there = trafka(target, "users", "delete", bob, "--mechanism", "SCRAM-SHA-256")
    unknown = trafka(target, "users", "list", "nobody-at-all")
    assert (too_few.returncode, too_few.stderr) == (
        1, "trafka users: setting the SCRAM-SHA-256 credential of user carol: UNACCEPTABLE_CREDENTIAL: "
           "Too few iterations\n")
    assert (not_there.returncode, not_there.stderr) == (
        1, f"trafka users: deleting the SCRAM-SHA-256 credential of user {bob}: RESOURCE_NOT_FOUND: "
           "Attempt to delete a user credential that does not exist\n")
    assert (unknown.returncode, unknown.stdout, unknown.stderr) == (
        1, "USER\tMECHANISM\tITERATIONS\n",
        "trafka users: user nobody-at-all: RESOURCE_NOT_FOUND: Attempt to describe a user credential that does not "
        "exist: nobody-at-all\n")

    deleted = trafka(target, "users", "delete", alice)
    assert (deleted.returncode, deleted.stdout) == (0, f"Deleted the SCRAM-SHA-256 credential of user {alice}.\n"
                                                       f"Deleted the SCRAM-SHA-512 credential of user {alice}.\n")
    assert trafka(target, "users", "list", alice).returncode == 1


def test_users_of_a_data_directory_before_the_broker_starts(tmp_path):
    """The first user, made before any broker runs (kafka-storage.sh format --add-scram): the broker that
    starts on the directory serves it; while it runs, the directory is its own."""
    data_dir = tmp_path / "fresh"
    tool = [sys.executable, "-m", "trafka", "users"]

    made = subprocess.run([*tool, "add", "--data-dir", str(data_dir), "admin", "--password", "admin-secret"],
                          capture_output=True, text=True, timeout=60, cwd=SOURCE_ROOT)
    listed = subprocess.run([*tool, "list", "--data-dir", str(data_dir)], capture_output=True, text=True, timeout=60,
                            cwd=SOURCE_ROOT)

    assert made.returncode == 0 and made.stdout.splitlines()[0] == (
        f"Set the SCRAM-SHA-256 credential of user admin (4096 iterations) in {data_dir}."), made
    assert listed.stdout == "USER\tMECHANISM\tITERATIONS\nadmin\tSCRAM-SHA-256\t4096\nadmin\tSCRAM-SHA-512\t4096\n"
    from compat_tests.harness import BrokerProcess

    running = BrokerProcess(data_dir, name="users-broker").start()
    try:
        assert trafka(running, "users", "list", "admin").stdout.count("admin\t") == 2
        busy = subprocess.run([*tool, "delete", "admin", "--data-dir", str(data_dir)], capture_output=True, text=True,
                              timeout=60, cwd=SOURCE_ROOT)
        assert (busy.returncode, busy.stderr) == (1, f"trafka users: a broker is using {data_dir}: change its users "
                                                     "through it, with --bootstrap-server HOST:PORT (and "
                                                     "--command-config FILE for a secured listener)\n")
    finally:
        running.stop()
