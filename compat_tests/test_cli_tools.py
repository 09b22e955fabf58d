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
