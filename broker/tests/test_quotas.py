"""Client quotas as pure functions and with an injected clock: Kafka's precedence of entities, its Rate over
sampled windows, its throttle times and window roll-over, AlterClientQuotas' validation and
DescribeClientQuotas' filters."""
from __future__ import annotations

import pytest
import trio

from trafka.broker.security.quotas import (
    CLIENT_ID,
    IP,
    USER,
    Alteration,
    ClientQuotaManager,
    ClientQuotas,
    ClientQuotaStore,
    Component,
    QuotaRequestError,
    Rate,
    client_throttles,
    describe_entity,
    describe_quotas,
    entity,
    plan_alterations,
    resolve_quota,
    throttle_time_ms,
    user_of,
)
from trafka.wire.errors import ErrorCode

# -- precedence ------------------------------------------------------------------------------------------------

ALL_LEVELS = {
    entity(user="alice", client_id="app"): 1,
    entity(user="alice", client_id=None): 2,
    entity(user="alice"): 3,
    entity(user=None, client_id="app"): 4,
    entity(user=None, client_id=None): 5,
    entity(user=None): 6,
    entity(client_id="app"): 7,
    entity(client_id=None): 8,
}


@pytest.mark.parametrize(("removed", "expected_level", "tags"), [
    ((), 1, ("alice", "app")),
    ((1,), 2, ("alice", "app")),
    ((1, 2), 3, ("alice", "")),
    ((1, 2, 3), 4, ("alice", "app")),
    ((1, 2, 3, 4), 5, ("alice", "app")),
    ((1, 2, 3, 4, 5), 6, ("alice", "")),
    ((1, 2, 3, 4, 5, 6), 7, ("", "app")),
    ((1, 2, 3, 4, 5, 6, 7), 8, ("", "app")),
])
def test_precedence_follows_kafkas_eight_levels(removed, expected_level, tags):
    limits = {e: float(level) for e, level in ALL_LEVELS.items() if level not in removed}
    assert resolve_quota(limits, "alice", "app") == (tags, float(expected_level))


def test_no_entity_no_quota_and_other_names_fall_to_defaults():
    assert resolve_quota({}, "alice", "app") is None
    limits = {entity(user="bob"): 10.0, entity(client_id=None): 5.0}
    assert resolve_quota(limits, "alice", "app") == (("", "app"), 5.0)
    assert resolve_quota(limits, "bob", "app") == (("bob", ""), 10.0)


def test_user_of_principal():
    assert user_of("User:alice") == "alice"
    assert user_of("User:ANONYMOUS") == "ANONYMOUS"
    assert user_of(None) == "ANONYMOUS"


# -- Rate and throttle time ------------------------------------------------------------------------------------

def test_rate_counts_at_least_all_windows_but_one():
    rate = Rate(11, 1000)
    rate.record(1000, 0)
    # One sample, no time elapsed: measured over 10 whole windows.
    assert rate.window_size(0) == 10_000
    assert rate.measure(0) == pytest.approx(100.0)
    rate.record(1000, 10_500)
    # 10.5 s elapsed since the oldest sample started: that is the window.
    assert rate.window_size(10_500) == 10_500
    assert rate.measure(10_500) == pytest.approx(2000 / 10.5)


def test_rate_rolls_samples_over_and_purges_old_ones():
    rate = Rate(3, 1000)
    for t in (0, 1000, 2000, 3000):
        rate.record(100, t)
    # At 3000 the first sample's last event is 3 windows old: it is purged; 300 over the 2 s since 1000.
    assert rate.measure(3000) == pytest.approx(150.0)
    # A fifth sample reuses the oldest slot (there are 3 + 1); the one of 1000 is purged in turn.
    rate.record(100, 4000)
    assert rate.measure(4000) == pytest.approx(150.0)
    # Long after: every sample expired (its last event 3 windows ago), nothing left.
    assert rate.measure(20_000) == 0.0


@pytest.mark.parametrize(("recorded", "bound", "expected"), [
    (1000, 100.0, 0),                     # 100/s exactly: within the quota
    (2000, 100.0, 10_000),                # 200/s against 100/s over a 10 s window: 10 s
    (1100, 100.0, 1000),                  # 110/s: one second
    (1050, 100.0, 500),
])
def test_throttle_time_is_kafkas_formula(recorded, bound, expected):
    rate = Rate(11, 1000)
    rate.record(recorded, 0)
    assert throttle_time_ms(rate, bound, 0) == expected


def test_manager_records_and_throttles_with_an_injected_clock():
    now = [0]
    manager = ClientQuotaManager("Produce", clock=lambda: now[0])
    assert manager.record("alice", "app", 10**9) == 0          # no quota set: nothing recorded
    manager.configure({entity(user="alice"): 1000.0})
    assert manager.record("alice", "app", 5000) == 0           # 500/s over 10 s
    assert manager.record("alice", "other", 6000) == 1000      # the user's quota is shared by its client ids
    now[0] = 30_000
    assert manager.record("alice", "app", 100) == 0            # the old samples have expired
    assert manager.max_value_in_window("alice", "x") == 10_000
    assert manager.max_value_in_window("bob", "x") is None


def test_unrecord_takes_bytes_back():
    manager = ClientQuotaManager("Fetch", clock=lambda: 0)
    manager.configure({entity(client_id=None): 100.0})
    assert manager.record("u", "c", 2000) == 10_000
    manager.unrecord("u", "c", 2000)
    assert manager.record("u", "c", 500) == 0


def test_request_time_throttle_is_bounded_by_one_window():
    quotas = ClientQuotas(clock=lambda: 0)
    quotas.update({entity(user=None): {"request_percentage": 1.0}})
    # A second of handling time against 1 % of a thread: far over, held for at most one window.
    assert quotas.after_request(3, 12, "User:alice", "app", None, None, 100, 10**9) == 1000


def test_quotas_update_splits_types_and_ips():
    quotas = ClientQuotas()
    assert not quotas.active
    quotas.update({entity(user="a"): {"producer_byte_rate": 10.0, "consumer_byte_rate": 20.0},
                   entity(ip="10.0.0.1"): {"connection_creation_rate": 5.0}, entity(ip=None): {
                       "connection_creation_rate": 7.0}})
    assert quotas.active and quotas.produce.enabled and quotas.fetch.enabled and not quotas.request.enabled
    assert quotas.ip_connection_rates == {"10.0.0.1": 5.0, None: 7.0}
    quotas.update({entity(ip=None): {"connection_creation_rate": 7.0}})
    assert not quotas.active


def test_produce_is_recorded_and_the_response_told():
    class Response:
        throttle_time_ms = 0

    quotas = ClientQuotas(clock=lambda: 0)
    quotas.update({entity(client_id="app"): {"producer_byte_rate": 100.0}})
    response = Response()
    assert quotas.after_request(0, 9, "User:ANONYMOUS", "app", None, response, 2000, 0) == 10_000
    assert response.throttle_time_ms == 10_000
    assert quotas.after_request(0, 9, "User:ANONYMOUS", "other", None, Response(), 2000, 0) == 0


@pytest.mark.parametrize(("api_key", "version", "expected"), [
    (0, 5, False), (0, 6, True), (1, 7, False), (1, 8, True), (48, 1, False), (50, 0, True), (18, 3, True),
])
def test_which_clients_back_off_themselves(api_key, version, expected):
    assert client_throttles(api_key, version) is expected


# -- AlterClientQuotas -----------------------------------------------------------------------------------------

def alter(configs, *entries, ip_ok=True):
    alterations = [Alteration(tuple(pairs), tuple(ops)) for pairs, ops in entries]
    return plan_alterations(configs, alterations, lambda name: ip_ok)


@pytest.mark.parametrize(("pairs", "ops", "message"), [
    ([(USER, "a")], [("producer_byte_rate", 1024.5, False)], "producer_byte_rate cannot be a fractional value."),
    ([(USER, "a")], [("producer_byte_rate", 0.0, False)], "Quota producer_byte_rate must be greater than 0"),
    ([(USER, "a")], [("bogus", 1.0, False)], "Invalid configuration key bogus"),
    ([(USER, "a")], [("connection_creation_rate", 1.0, False)], "Invalid configuration key connection_creation_rate"),
    ([(IP, "1.2.3.4")], [("producer_byte_rate", 1.0, False)], "Invalid configuration key producer_byte_rate"),
    ([(IP, "1.2.3.4"), (USER, "a")], [("connection_creation_rate", 1.0, False)],
     "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"),
    ([], [("producer_byte_rate", 1.0, False)], "Invalid empty client quota entity"),
    ([("foo", "x")], [("producer_byte_rate", 1.0, False)], "Unhandled client quota entity type: foo"),
    ([(USER, "")], [("producer_byte_rate", 1.0, False)], "Empty user not supported"),
    ([(USER, "a")], [("producer_byte_rate", 1e30, False)], ("Proposed value for producer_byte_rate is too large "
                                                            "for a LONG.")),
    ([(IP, "1.2.3.4")], [("connection_creation_rate", 3e9, False)], ("Proposed value for connection_creation_rate "
                                                                    "is too large for an INT.")),
    ([(USER, "a")], [("producer_byte_rate", 1.0, False), ("producer_byte_rate", 2.0, False)],
     "Ignoring duplicate entity ClientQuotaEntity(entries={user=a})"),
])
def test_alter_refuses_as_kafka(pairs, ops, message):
    results, after = alter({}, (pairs, ops))
    assert [(r.error, r.message) for r in results] == [(ErrorCode.INVALID_REQUEST, message)]
    assert after == {}


def test_alter_sets_and_removes():
    results, after = alter({}, ([(USER, None), (CLIENT_ID, "c1")], [("consumer_byte_rate", 2048.0, False),
                                                                     ("request_percentage", 12.5, False)]),
                           ([(IP, None)], [("connection_creation_rate", 10.0, False)]),
                           ([(USER, "a")], [("controller_mutation_rate", 1e30, False)]))
    assert [r.error for r in results] == [ErrorCode.NONE] * 3
    assert results[0].pairs == ((CLIENT_ID, "c1"), (USER, None))
    assert after == {entity(user=None, client_id="c1"): {"consumer_byte_rate": 2048.0, "request_percentage": 12.5},
                     entity(ip=None): {"connection_creation_rate": 10.0},
                     entity(user="a"): {"controller_mutation_rate": 1e30}}
    results, after = alter(after, ([(USER, "a")], [("controller_mutation_rate", 0.0, True),
                                                   ("producer_byte_rate", 5.0, True)]))
    assert results[0].error == ErrorCode.NONE
    assert entity(user="a") not in after


def test_alter_an_entity_twice_keeps_the_first_and_a_type_twice_takes_the_last_name():
    results, after = alter({}, ([(USER, "a")], [("producer_byte_rate", 1.0, False)]),
                           ([(USER, "a")], [("producer_byte_rate", 2.0, False)]))
    assert [(r.error, r.message) for r in results] == [
        (ErrorCode.INVALID_REQUEST, "Ignoring duplicate entity ClientQuotaEntity(entries={user=a})")]
    assert after == {entity(user="a"): {"producer_byte_rate": 1.0}}
    results, after = alter({}, ([(USER, "a"), (USER, "b")], [("producer_byte_rate", 1.0, False)]))
    assert results[0].pairs == ((USER, "b"),) and after == {entity(user="b"): {"producer_byte_rate": 1.0}}


def test_alter_refuses_an_unresolvable_ip():
    results, _ = alter({}, ([(IP, "not a host!")], [("connection_creation_rate", 1.0, False)]), ip_ok=False)
    assert results[0].message == "not a host! is not a valid IP or resolvable host."


def test_entity_text_in_javas_order():
    assert describe_entity(entity(user=None, client_id="c")) == "ClientQuotaEntity(entries={client-id=c, user=null})"


# -- DescribeClientQuotas --------------------------------------------------------------------------------------

CONFIGS = {
    entity(user="alice"): {"producer_byte_rate": 1024.0},
    entity(user=None, client_id="c1"): {"consumer_byte_rate": 2048.0},
    entity(client_id=None): {"producer_byte_rate": 100.0},
    entity(ip="1.2.3.4"): {"connection_creation_rate": 5.0},
    entity(ip=None): {"connection_creation_rate": 10.0},
}


@pytest.mark.parametrize(("components", "strict", "expected"), [
    ([], False, list(CONFIGS)),
    ([], True, []),
    ([(USER, 0, "alice")], False, [entity(user="alice")]),
    ([(USER, 1, None)], False, [entity(user=None, client_id="c1")]),
    ([(USER, 2, None)], False, [entity(user="alice"), entity(user=None, client_id="c1")]),
    ([(USER, 2, None)], True, [entity(user="alice")]),
    ([(CLIENT_ID, 1, None)], True, [entity(client_id=None)]),
    ([(IP, 2, None)], False, [entity(ip="1.2.3.4"), entity(ip=None)]),
    ([(IP, 1, None)], False, [entity(ip=None)]),
])
def test_describe_filters(components, strict, expected):
    found = describe_quotas(CONFIGS, [Component(*c) for c in components], strict)
    assert sorted(map(str, (e for e, _ in found))) == sorted(map(str, expected))


@pytest.mark.parametrize(("components", "code", "message"), [
    ([(CLIENT_ID, 0, None)], ErrorCode.INVALID_REQUEST, ("Request specified MATCH_TYPE_EXACT, but set match string "
                                                        "to null.")),
    ([(CLIENT_ID, 1, "x")], ErrorCode.INVALID_REQUEST, ("Request specified MATCH_TYPE_DEFAULT, but also specified a "
                                                       "match string.")),
    ([(CLIENT_ID, 2, "x")], ErrorCode.INVALID_REQUEST, ("Request specified MATCH_TYPE_SPECIFIED, but also specified "
                                                       "a match string.")),
    ([(CLIENT_ID, 3, None)], ErrorCode.INVALID_REQUEST, "Unknown match type 3"),
    ([("foo", 0, "x")], ErrorCode.UNSUPPORTED_VERSION, "Unsupported entity type foo"),
    ([("", 0, "x")], ErrorCode.INVALID_REQUEST, "Invalid empty entity type."),
    ([(USER, 0, "x"), (USER, 0, "y")], ErrorCode.INVALID_REQUEST, ("Entity type user cannot appear more than once "
                                                                 "in the filter.")),
    ([(IP, 2, None), (USER, 2, None)], ErrorCode.INVALID_REQUEST, ("Invalid entity filter component combination. IP "
                                                                 "filter component should not be used with user or "
                                                                 "clientId filter component.")),
])
def test_describe_refuses_as_kafka(components, code, message):
    with pytest.raises(QuotaRequestError) as refused:
        describe_quotas(CONFIGS, [Component(*c) for c in components], False)
    assert (refused.value.code, refused.value.message) == (code, message)


def test_store_keeps_quotas_across_restarts(tmp_path):
    store = ClientQuotaStore.load(tmp_path)
    results, changed = store.alter([Alteration(((USER, "alice"),), (("producer_byte_rate", 1024.0, False),))])
    assert changed and results[0].error == ErrorCode.NONE
    _, changed = store.alter([Alteration(((USER, "bob"),), (("producer_byte_rate", 1.0, False),))],
                             validate_only=True)
    assert not changed
    assert ClientQuotaStore.load(tmp_path).configs == {entity(user="alice"): {"producer_byte_rate": 1024.0}}


# -- controller mutations (KIP-599) ----------------------------------------------------------------------------

def test_controller_mutations_strict_and_permissive():
    now = [0]
    manager = ClientQuotaManager("ControllerMutation", clock=lambda: now[0])
    manager.configure({entity(client_id="admin"): 1.0})  # 11 partitions ahead at most
    # Strict: allowed while the bucket is not below zero (the request that takes it below passes).
    assert [manager.mutate("u", "admin", 4, strict=True) for _ in range(3)] == [0, 0, 0]
    assert manager.mutate("u", "admin", 1, strict=True) == 1000       # 11 - 12 = -1 token: a second
    now[0] = 500
    assert manager.mutate("u", "admin", 1, strict=True) == 500        # refilled half a token, nothing recorded
    now[0] = 1000
    # Permissive: recorded whatever, throttled for going below zero.
    assert manager.mutate("u", "admin", 3, strict=False) == 3000
    assert manager.mutate("u", "other", 100, strict=True) == 0        # no quota for that client


def test_refused_topics_are_left_out_and_answered_throttled():
    from trafka.wire.messages import CreateTopicsRequest, CreateTopicsResponse

    quotas = ClientQuotas(clock=lambda: 0)
    quotas.update({entity(client_id="admin"): {"controller_mutation_rate": 1.0}})
    handled = []

    async def handle(request):
        handled.append([t.name for t in request.topics])
        return CreateTopicsResponse(topics=[CreateTopicsResponse.CreatableTopicResult(name=t.name)
                                            for t in request.topics])

    def partitions_of(api_key, item):
        return item.num_partitions

    request = CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(name=n, num_partitions=p)
                                          for n, p in (("a", 12), ("b", 1), ("c", 1))])
    response, throttle_ms = trio.run(quotas.with_mutation_quota, 19, 7, "User:ANONYMOUS", "admin", request, handle,
                                     partitions_of)
    assert handled == [["a"]]
    assert [(t.name, t.error_code, t.error_message) for t in response.topics] == [
        ("a", 0, ""), ("b", ErrorCode.THROTTLING_QUOTA_EXCEEDED, None), ("c", ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                                                                            None)]
    assert throttle_ms == response.throttle_time_ms == 1000


def test_idle_clients_measurements_are_dropped(monkeypatch):
    import trafka.broker.security.quotas as quotas_module

    monkeypatch.setattr(quotas_module, "MAX_IDLE_SENSORS", 3)
    now = [0]
    manager = ClientQuotaManager("Produce", clock=lambda: now[0])
    manager.configure({entity(client_id=None): 100.0})
    for client in ("a", "b", "c"):
        manager.record("u", client, 10)
    now[0] = 11_000  # all 11 windows later: idle
    manager.record("u", "d", 10)
    assert set(manager._sensors) == {("", "d")}


def test_a_fetch_throttled_for_request_time_is_answered_empty():
    from trafka.wire.messages import FetchRequest, FetchResponse

    quotas = ClientQuotas(clock=lambda: 0)
    quotas.update({entity(client_id="busy"): {"request_percentage": 1.0}})
    response = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(topic="t", partitions=[
        FetchResponse.PartitionData(partition_index=0, records=b"x" * 10)])])
    request = FetchRequest(replica_id=-1)
    assert quotas.after_request(1, 12, "User:ANONYMOUS", "busy", request, response, 100, 10**9) == 1000
    assert response.responses == [] and response.throttle_time_ms == 1000
