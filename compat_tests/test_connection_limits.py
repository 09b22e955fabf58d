"""Connection limits side by side with Apache Kafka 4.4: the same settings on both brokers, the same connections
made, and what a client sees compared. Clients of the limited address connect from 127.0.0.2 (the brokers'
own connections come from 127.0.0.1): beyond ``max.connections.per.ip.overrides`` a connection is closed before
any answer while the others are served; at ``listener.name.<l>.max.connections`` a new connection waits
unanswered until another closes; an ip's ``connection_creation_rate`` quota closes the connections over it."""
from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from compat_tests.clients import ConfluentClient, Message
from compat_tests.harness import BrokerProcess, wait_until
from compat_tests.reference import KafkaBroker
from compat_tests.wire_client import WireClient, decode_response, encode_frame, read_frame
from trafka.wire.messages import AlterClientQuotasRequest, ApiVersionsRequest, DescribeClientQuotasRequest

LIMITED = "127.0.0.2"


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    root = Path(tmp_path_factory.mktemp("connection-limits"))
    settings = {"max.connections.per.ip.overrides": f"{LIMITED}:2"}
    kafka = KafkaBroker(root / "kafka", overrides=settings)
    trafka = BrokerProcess(root / "trafka", name="trafka", overrides=settings)
    try:
        kafka.start()
        trafka.start()
        yield {"kafka": kafka, "trafka": trafka}
    finally:
        trafka.close()
        kafka.close()


def _connect(bootstrap: str, source: str = LIMITED) -> socket.socket:
    host, port = bootstrap.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=5, source_address=(source, 0))


def _api_versions(sock: socket.socket, timeout: float = 5.0) -> str:
    """What the client sees of an ApiVersions request on ``sock``: "answered", "closed" or "no answer"."""
    sock.settimeout(timeout)
    try:
        sock.sendall(encode_frame(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3))
        _, response = decode_response(read_frame(sock), 18, 3)
        return "answered" if response.error_code == 0 else f"error {response.error_code}"
    except (ConnectionError, OSError) as exc:
        if isinstance(exc, TimeoutError):
            return "no answer"
        return "closed"


def _per_ip(bootstrap: str) -> list[str]:
    seen = []
    first, second = _connect(bootstrap), _connect(bootstrap)
    try:
        seen += [_api_versions(first), _api_versions(second)]
        with _connect(bootstrap) as third:
            seen.append(_api_versions(third))
        # Another address is served meanwhile.
        with _connect(bootstrap, "127.0.0.1") as other:
            seen.append(_api_versions(other))
        first.close()
        for _ in range(50):  # the broker counts the closed connection out as soon as it sees it closed
            with _connect(bootstrap) as again:
                outcome = _api_versions(again)
            if outcome == "answered":
                break
        seen.append(outcome)
    finally:
        first.close()
        second.close()
    return seen


def test_max_connections_per_ip_as_kafka(brokers):
    observed = {name: _per_ip(process.bootstrap) for name, process in brokers.items()}
    assert observed["trafka"] == observed["kafka"] == ["answered", "answered", "closed", "answered", "answered"]


def test_clients_of_other_addresses_keep_producing(brokers):
    for process in brokers.values():
        held = [_connect(process.bootstrap), _connect(process.bootstrap)]
        try:
            client = ConfluentClient(process.bootstrap)
            client.produce("connection-limits", [Message(b"served")])
            assert [r.value for r in client.consume("connection-limits", 1)] == [b"served"]
        finally:
            for sock in held:
                sock.close()


def test_listener_limit_makes_connections_wait(tmp_path):
    settings = {"listener.name.plaintext.max.connections": 2}
    outcomes = {}
    for name, process in (("kafka", KafkaBroker(tmp_path / "kafka", overrides=settings)),
                          ("trafka", BrokerProcess(tmp_path / "trafka", name="trafka", overrides=settings))):
        process.start()
        try:
            # (Kafka's own client of its broker listener may hold a slot: count what is free first.)
            held = []
            while True:
                sock = _connect(process.bootstrap)
                if _api_versions(sock, timeout=2.0) != "answered":
                    break
                held.append(sock)
            waiting = sock
            seen = ["no answer"]
            held.pop().close()
            waiting.settimeout(10)
            _, response = decode_response(read_frame(waiting), 18, 3)  # its request is read once accepted
            seen.append("answered" if response.error_code == 0 else "error")
            outcomes[name] = (seen, len(held) >= 1)
            for sock in [*held, waiting]:
                sock.close()
        finally:
            process.close()
    assert outcomes["trafka"] == outcomes["kafka"] == (["no answer", "answered"], True)


def _quota_in_force(client: WireClient, address: str) -> bool:
    described = client.request(DescribeClientQuotasRequest(components=[DescribeClientQuotasRequest.ComponentData(
        entity_type="ip", match_type=0, match=address)], strict=True), 1)
    return any(v.key == "connection_creation_rate" for entry in described.entries or () for v in entry.values)


def test_ip_connection_creation_rate_quota(brokers):
    # An address of its own: 127.0.0.2's limit of two open connections would close some of the burst's
    # connections before the broker has counted the previous ones out (Kafka counts them out asynchronously).
    rated = "127.0.0.3"
    observed = {}
    for name, process in brokers.items():
        with WireClient(process.bootstrap) as admin:
            alter = AlterClientQuotasRequest(entries=[AlterClientQuotasRequest.EntryData(
                entity=[AlterClientQuotasRequest.EntityData(entity_type="ip", entity_name=rated)],
                ops=[AlterClientQuotasRequest.OpData(key="connection_creation_rate", value=1.0)])])
            assert admin.request(alter, 1).entries[0].error_code == 0
            # Kafka applies a quota once its metadata log has it: the burst starts when the broker describes it.
            wait_until(lambda: _quota_in_force(admin, rated), timeout=10)
        try:
            outcomes = []
            for attempt in range(40):
                with _connect(process.bootstrap, rated) as sock:
                    outcome = _api_versions(sock, timeout=3.0)
                outcomes.append(outcome)
                if outcome != "answered":
                    break
            observed[name] = outcomes
        finally:
            with WireClient(process.bootstrap) as admin:
                alter.entries[0].ops[0].remove = True
                admin.request(alter, 1)
    # The quota's windows let 1/s over 10 s through at once, then the next connection is closed unanswered.
    # Where the burst falls in the one-second sample windows moves the count by one.
    for name, outcomes in observed.items():
        assert outcomes[-1] == "closed", (name, outcomes)
    assert abs(len(observed["trafka"]) - len(observed["kafka"])) <= 1, observed
