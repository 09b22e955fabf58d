"""Connection limits as Kafka's ConnectionQuotas applies them: per-address limits and overrides, the broker's
and listeners' limits with the inter-broker listener kept open, creation rates and the ip connection rate
quota, with an injected clock."""
from __future__ import annotations

import pytest
import trio
import trio.testing

from trafka.broker.config import ConfigError
from trafka.broker.security.connection_quotas import ConnectionQuotas, Verdict, parse_overrides
from trafka.broker.security.quotas import ClientQuotas, entity


def quotas(props=None, listeners=("PLAINTEXT",), inter_broker="PLAINTEXT", client_quotas=None, now=None):
    clock = (lambda: now[0]) if now is not None else (lambda: 0)
    return ConnectionQuotas(props or {}, list(listeners), inter_broker, client_quotas, clock=clock,
                            resolve=lambda host: {"localhost": "127.0.0.1"}.get(host, host))


def test_per_ip_limit_and_overrides():
    q = quotas({"max.connections.per.ip": "2", "max.connections.per.ip.overrides": "localhost:3,10.0.0.9:0"})
    assert q.per_ip_overrides == {"127.0.0.1": 3, "10.0.0.9": 0}
    assert [q.count("PLAINTEXT", "10.0.0.1") for _ in range(3)] == [True, True, False]
    assert [q.count("PLAINTEXT", "127.0.0.1") for _ in range(4)] == [True, True, True, False]
    assert q.count("PLAINTEXT", "10.0.0.9") is False
    q.release("PLAINTEXT", "10.0.0.1")
    assert q.count("PLAINTEXT", "10.0.0.1") is True
    assert q.total == 5


@pytest.mark.parametrize("text", ["nohost", "host:x", ":3"])
def test_malformed_overrides_stop_the_start(text):
    with pytest.raises(ConfigError):
        parse_overrides(text, resolve=lambda host: host)


def test_broker_limit_spares_the_inter_broker_listener():
    q = quotas({"max.connections": "1", "listener.name.internal.max.connections": "2"},
               listeners=("PLAINTEXT", "INTERNAL"), inter_broker="INTERNAL")
    assert q.count("PLAINTEXT", "10.0.0.1")
    assert not q.slot_available("PLAINTEXT")
    assert q.slot_available("INTERNAL")
    q.count("INTERNAL", "10.0.0.2")
    q.count("INTERNAL", "10.0.0.2")
    assert not q.slot_available("INTERNAL")  # its own limit still holds


def test_creation_rate_throttles_accepting():
    q = quotas({"max.connection.creation.rate": "2"})
    # 20 connections at once against 2/s over at least 10 s: the 21st is 0.5 s early, bounded by one window.
    throttles = [q.creation_throttle_ms("PLAINTEXT", 0) for _ in range(21)]
    assert throttles[:20] == [0] * 20
    assert throttles[20] == 500


def test_ip_connection_rate_quota_throttles_and_unrecords():
    client_quotas = ClientQuotas()
    client_quotas.update({entity(ip=None): {"connection_creation_rate": 1.0},
                          entity(ip="10.0.0.5"): {"connection_creation_rate": 100.0}})
    q = quotas(client_quotas=client_quotas)
    assert [q.ip_throttle_ms("PLAINTEXT", "10.0.0.1", 0) for _ in range(11)] == [0] * 10 + [1000]
    assert q.ip_throttle_ms("PLAINTEXT", "10.0.0.5", 0) == 0
    assert q.ip_rate("10.0.0.7") == 1.0


def test_admit_waits_for_a_free_slot():
    q = quotas({"max.connections": "1"})
    order = []

    async def main():
        assert await q.admit("PLAINTEXT", "10.0.0.1") == (Verdict.ACCEPT, 0)

        async def second():
            order.append(("second", await q.admit("PLAINTEXT", "10.0.0.2")))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(second)
            await trio.testing.wait_all_tasks_blocked()
            order.append("released")
            q.release("PLAINTEXT", "10.0.0.1")
    trio.run(main)
    assert order == ["released", ("second", (Verdict.ACCEPT, 0))]


def test_admit_rejects_over_the_address_limit():
    q = quotas({"max.connections.per.ip": "1"})

    async def main():
        assert await q.admit("PLAINTEXT", "10.0.0.1") == (Verdict.ACCEPT, 0)
        assert await q.admit("PLAINTEXT", "10.0.0.1") == (Verdict.REJECT, 0)
        assert await q.admit("PLAINTEXT", "10.0.0.2") == (Verdict.ACCEPT, 0)
    trio.run(main)


def test_ip_quotas_of_host_names_apply_to_their_address():
    client_quotas = ClientQuotas()
    q = quotas(client_quotas=client_quotas)
    client_quotas.update({entity(ip="localhost"): {"connection_creation_rate": 3.0}})
    assert q.ip_rate("127.0.0.1") == 3.0
    assert q.ip_rate("10.0.0.1") is None
