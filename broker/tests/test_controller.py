"""The controller's decisions (broker.cluster.controller): replica placement as Kafka makes it in
ZooKeeper mode, and leader election from the ISR."""
from __future__ import annotations

from collections import Counter

import pytest

from trafka.broker.cluster.controller import _rack_alternated, assign_replicas, elect_leader
from trafka.wire.errors import ErrorCode, KafkaError


def test_rack_unaware_placement_spreads_leaders_and_followers():
    brokers = dict.fromkeys(range(5))

    assignment = assign_replicas(brokers, 10, 3, start=0)

    assert assignment == {
        0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
        5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2],
    }


def test_new_partitions_continue_the_round_of_leaders():
    brokers = dict.fromkeys(range(5))
    added = assign_replicas(brokers, 4, 3, start=0, first_partition=6)
    assert list(added) == [6, 7, 8, 9]
    assert [replicas[0] for replicas in added.values()] == [1, 2, 3, 4]
    assert all(len(set(replicas)) == 3 for replicas in added.values())


def test_brokers_are_taken_in_id_order_whatever_the_mapping_order():
    assert assign_replicas({3: None, 1: None, 2: None}, 3, 1, start=0) == {0: [1], 1: [2], 2: [3]}


def test_a_random_start_still_places_every_replica_on_distinct_brokers():
    for _ in range(20):
        assignment = assign_replicas(dict.fromkeys(range(4)), 8, 3)
        assert all(len(set(replicas)) == 3 for replicas in assignment.values())
        assert Counter(replicas[0] for replicas in assignment.values()) == dict.fromkeys(range(4), 2)


def test_racks_alternate_and_each_replica_gets_its_own_rack():
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert _rack_alternated(racks) == [0, 3, 1, 5, 4, 2]

    assignment = assign_replicas(racks, 12, 3, start=2)

    assert all(len({racks[b] for b in replicas}) == 3 for replicas in assignment.values())
    assert Counter(replicas[0] for replicas in assignment.values()) == dict.fromkeys(range(6), 2)
    # With more replicas than racks, racks are shared only once each has one.
    for replicas in assign_replicas(racks, 6, 4, start=0).values():
        assert len(set(replicas)) == 4 and len({racks[b] for b in replicas}) == 3


@pytest.mark.parametrize(
    ("brokers", "partitions", "replication_factor", "code", "message"),
    [
        (dict.fromkeys(range(3)), 1, 4, ErrorCode.INVALID_REPLICATION_FACTOR,
         "Replication factor: 4 larger than available brokers: 3."),
        (dict.fromkeys(range(3)), 0, 1, ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0."),
        (dict.fromkeys(range(3)), 1, 0, ErrorCode.INVALID_REPLICATION_FACTOR,
         "Replication factor must be larger than 0."),
        ({0: "a", 1: None}, 1, 2, ErrorCode.INVALID_REPLICATION_FACTOR,
         "Not all brokers have rack information for replica rack aware assignment."),
    ],
)
def test_placements_that_cannot_be_made(brokers, partitions, replication_factor, code, message):
    with pytest.raises(KafkaError) as refused:
        assign_replicas(brokers, partitions, replication_factor, start=0)
    assert (refused.value.code, refused.value.message) == (code, message)


@pytest.mark.parametrize(
    ("replicas", "isr", "live", "unclean", "leader"),
    [
        ([1, 2, 3], [1, 2, 3], {1, 2, 3}, False, 1),      # the preferred replica
        ([1, 2, 3], [2, 3], {1, 2, 3}, False, 2),         # 1 out of sync
        ([1, 2, 3], [1, 3], {2, 3}, False, 3),            # 1 dead, 2 out of sync
        ([1, 2, 3], [1], {2, 3}, False, None),            # the only in-sync replica is dead: offline
        ([1, 2, 3], [1], {2, 3}, True, 2),                # unclean: the first live replica
        ([1, 2, 3], [1], set(), True, None),
    ],
)
def test_leader_election(replicas, isr, live, unclean, leader):
    assert elect_leader(replicas, isr, live, unclean=unclean) == leader
