"""The cluster's state in Kafka's ZooKeeper layout, without ZooKeeper: the JSON of topics, partition
states and topic configs as Kafka 3.9 writes and reads them (broker.cluster), the controller's decisions
when brokers leave and come back (broker.cluster.controller), and which znode a watch names
(broker.cluster.zookeeper)."""
from __future__ import annotations

import json
import uuid

import pytest

from trafka.broker.cluster import (
    NO_LEADER,
    RECOVERED,
    RECOVERING,
    BrokerRegistration,
    ClusterChange,
    PartitionState,
    TopicAssignment,
    decode_topic_config,
    decode_uuid,
    encode_topic_config,
    encode_uuid,
)
from trafka.broker.cluster.controller import initial_partition_state, next_partition_state
from trafka.broker.cluster.zookeeper import ZooKeeperCluster, classify

# Written by Apache Kafka 3.9 in ZooKeeper mode for a topic created with CreateTopics (two partitions on
# broker 1, two configs); the topic id it answered was a0e02a73-d494-480f-be54-b59d902c4ee2.
KAFKA_TOPIC = (b'{"partitions":{"0":[1],"1":[1]},"topic_id":"oOAqc9SUSA--VLWdkCxO4g","adding_replicas":{},'
               b'"removing_replicas":{},"version":3}')
KAFKA_TOPIC_ID = uuid.UUID("a0e02a73-d494-480f-be54-b59d902c4ee2")
KAFKA_STATE = b'{"controller_epoch":2,"leader":1,"version":1,"leader_epoch":0,"isr":[1]}'
KAFKA_CONFIG = b'{"version":1,"config":{"retention.ms":"1000","unclean.leader.election.enable":"true"}}'


# -- codecs ----------------------------------------------------------------------------------------

def test_a_topic_reads_and_writes_as_kafka_writes_it():
    assignment = TopicAssignment.from_json("t1", KAFKA_TOPIC, 4)
    assert assignment == TopicAssignment("t1", KAFKA_TOPIC_ID, ((1,), (1,)), 4)
    assert assignment.to_json() == KAFKA_TOPIC


def test_a_topic_keeps_its_partitions_in_order_and_its_replicas_in_assignment_order():
    data = (b'{"version":2,"partitions":{"10":[3,1],"2":[2,3],"0":[1,2],"1":[3,2],"3":[1,3],"4":[2,1],'
            b'"5":[3,1],"6":[1,2],"7":[2,3],"8":[3,2],"9":[1,3]},"adding_replicas":{},"removing_replicas":{}}')
    assignment = TopicAssignment.from_json("old", data, 0)
    assert assignment.replicas[0] == (1, 2) and assignment.replicas[2] == (2, 3) and assignment.replicas[10] == (3, 1)
    assert assignment.topic_id == uuid.UUID(int=0)  # written by a Kafka older than 2.8: no id


def test_a_topic_id_is_kafkas_base64():
    assert encode_uuid(KAFKA_TOPIC_ID) == "oOAqc9SUSA--VLWdkCxO4g"
    assert decode_uuid("oOAqc9SUSA--VLWdkCxO4g") == KAFKA_TOPIC_ID
    some = uuid.uuid4()
    assert decode_uuid(encode_uuid(some)) == some and len(encode_uuid(some)) == 22


def test_a_partition_state_reads_and_writes_as_kafka_writes_it():
    state = PartitionState.from_json(KAFKA_STATE, 7)
    assert state == PartitionState(1, 0, (1,), 2, 7)
    assert state.leader_recovery_state == RECOVERED and state.online
    assert state.to_json() == KAFKA_STATE


def test_an_offline_or_recovering_partition_state():
    offline = PartitionState(NO_LEADER, 3, (2,), 1)
    assert not offline.online
    assert offline.to_json() == b'{"controller_epoch":1,"leader":-1,"version":1,"leader_epoch":3,"isr":[2]}'
    recovering = PartitionState(3, 4, (3,), 2, leader_recovery_state=RECOVERING)
    assert json.loads(recovering.to_json()) == {"controller_epoch": 2, "leader": 3, "version": 1, "leader_epoch": 4,
                                                "isr": [3], "leader_recovery_state": 1}
    assert PartitionState.from_json(recovering.to_json(), 0) == PartitionState(3, 4, (3,), 2, 0, RECOVERING)


def test_the_version_is_the_znodes_not_the_json():
    state = PartitionState(1, 0, (1, 2), 1, version=12)
    assert b"12" not in state.to_json()
    assert TopicAssignment("t", KAFKA_TOPIC_ID, ((1,),), version=9).to_json().endswith(b'"version":3}')


def test_topic_configs_read_and_write_as_kafka_writes_them():
    configs = decode_topic_config(KAFKA_CONFIG)
    assert configs == {"retention.ms": "1000", "unclean.leader.election.enable": "true"}
    assert encode_topic_config(configs) == KAFKA_CONFIG
    assert encode_topic_config({}) == b'{"version":1,"config":{}}'
    assert decode_topic_config(b"") == decode_topic_config(None) == {}


def test_a_change_is_empty_until_something_changed():
    assert not ClusterChange()
    assert ClusterChange(brokers_changed=True)
    assert ClusterChange(partitions_changed=frozenset({("t", 0)}))


# -- the controller's decisions ---------------------------------------------------------------------

def test_a_new_partition_is_led_by_its_first_live_replica():
    assert initial_partition_state((3, 1, 2), {1, 2, 3}, 5) == PartitionState(3, 0, (3, 1, 2), 5)
    assert initial_partition_state((3, 1, 2), {1, 2}, 5) == PartitionState(1, 0, (1, 2), 5)
    assert initial_partition_state((3,), {1, 2}, 5) == PartitionState(NO_LEADER, 0, (), 5)


def test_the_leader_leaves_the_first_live_isr_member_in_assignment_order_leads():
    state = PartitionState(1, 4, (1, 3, 2), 1, version=8)
    assert next_partition_state(state, (1, 2, 3), {2, 3}, 2) == PartitionState(2, 5, (3, 2), 2, 8)


def test_a_follower_leaves_it_leaves_the_isr_under_a_new_leader_epoch():
    state = PartitionState(1, 4, (1, 2, 3), 1, version=8)
    assert next_partition_state(state, (1, 2, 3), {1, 3}, 2) == PartitionState(1, 5, (1, 3), 2, 8)


def test_nothing_to_do_while_the_leader_and_isr_are_live():
    state = PartitionState(1, 4, (1, 2), 1)
    assert next_partition_state(state, (1, 2, 3), {1, 2}, 2) is None  # 3, out of the ISR, is not needed
    assert next_partition_state(state, (1, 2, 3), {1, 2, 3}, 2) is None


def test_the_last_isr_member_leaves_the_partition_goes_offline_and_keeps_it():
    state = PartitionState(2, 1, (2,), 1, version=1)
    assert next_partition_state(state, (2, 3), {1}, 1) == PartitionState(NO_LEADER, 2, (2,), 1, 1)
    # Several ISR members at once: the last leader is the one kept.
    state = PartitionState(3, 1, (2, 3), 1, version=1)
    assert next_partition_state(state, (2, 3), {1}, 1) == PartitionState(NO_LEADER, 2, (3,), 1, 1)


def test_an_offline_partition_waits_for_an_isr_member():
    offline = PartitionState(NO_LEADER, 2, (2,), 1, version=2)
    assert next_partition_state(offline, (2, 3), {1}, 1) is None
    assert next_partition_state(offline, (2, 3), {1, 3}, 1) is None
    assert next_partition_state(offline, (2, 3), {1, 2, 3}, 3) == PartitionState(2, 3, (2,), 3, 2)


def test_unclean_election_takes_a_live_replica_outside_the_isr_marked_recovering():
    offline = PartitionState(NO_LEADER, 2, (2,), 1, version=2)
    assert next_partition_state(offline, (2, 3), {1, 3}, 1, unclean=True) == \
        PartitionState(3, 3, (3,), 1, 2, RECOVERING)
    # Straight from the dead leader, without an offline step.
    led = PartitionState(2, 1, (2,), 1, version=1)
    assert next_partition_state(led, (2, 3, 1), {1, 3}, 1, unclean=True) == PartitionState(3, 2, (3,), 1, 1, RECOVERING)
    # A live ISR member is always preferred.
    assert next_partition_state(PartitionState(2, 1, (2, 1), 1), (2, 3, 1), {1, 3}, 1, unclean=True) == \
        PartitionState(1, 2, (1,), 1)


def test_a_partition_that_never_had_a_leader_takes_its_live_replicas():
    never = PartitionState(NO_LEADER, 0, (), 1, version=0)
    assert next_partition_state(never, (2, 3), {1}, 1) is None
    assert next_partition_state(never, (2, 3), {1, 3}, 2) == PartitionState(3, 1, (3,), 2, 0)


def test_the_recovery_state_is_kept_by_a_clean_change():
    recovering = PartitionState(3, 3, (3, 2), 1, version=4, leader_recovery_state=RECOVERING)
    assert next_partition_state(recovering, (2, 3), {3}, 1) == PartitionState(3, 4, (3,), 1, 4, RECOVERING)


def test_unclean_election_follows_the_topic_config_else_the_broker_default():
    cluster = ZooKeeperCluster("127.0.0.1:2181", BrokerRegistration(1, "127.0.0.1", 9092),
                               unclean_leader_election_enable=True)
    cluster.topic_configs = {"on": {"unclean.leader.election.enable": "true"},
                             "off": {"unclean.leader.election.enable": "false"}, "plain": {}}
    assert [cluster._unclean(name) for name in ("on", "off", "plain", "unknown")] == [True, False, True, True]
    cluster.unclean_leader_election_enable = False
    assert [cluster._unclean(name) for name in ("on", "off", "plain")] == [True, False, False]


# -- watched znodes ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("path", "expected"), [
    ("/brokers/ids", ("brokers", None, None)),
    ("/brokers/ids/3", ("brokers", None, None)),
    ("/controller", ("brokers", None, None)),
    ("/controller_epoch", ("brokers", None, None)),
    ("/brokers/topics", ("topics", None, None)),
    ("/brokers/topics/orders", ("topic", "orders", None)),
    ("/brokers/topics/orders/partitions/12/state", ("state", "orders", 12)),
    ("/brokers/topics/orders/partitions/12", ("other", None, None)),
    ("/config/topics/orders", ("config", "orders", None)),
    ("/admin/delete_topics", ("deletions", None, None)),
    ("/admin/delete_topics/orders", ("other", None, None)),
])
def test_a_watched_znode_names_what_to_read_again(path, expected):
    assert classify(path) == expected
