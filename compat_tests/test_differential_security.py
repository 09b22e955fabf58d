"""Authentication side by side: Apache Kafka 4.4 and trafka started with the same listeners, mechanisms, JAAS
users and SCRAM users; the same SASL exchanges and SCRAM credential requests sent to both, byte for byte,
and what a client sees compared: codes and messages of every refusal, DescribeUserScramCredentials' and
AlterUserScramCredentials' answers, and the addresses Metadata gives on each listener."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from compat_tests.harness import BrokerProcess
from compat_tests.ports import free_port
from compat_tests.reference import KafkaBroker
from compat_tests.wire_client import WireClient
from trafka.broker.security.credentials import ScramCredentialStore, from_password
from trafka.broker.security.sasl.client import ScramClient
from trafka.wire.messages import (
    AlterUserScramCredentialsRequest,
    DescribeUserScramCredentialsRequest,
    MetadataRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" '
              'password="alice-secret" user_alice="alice-secret";')
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
SETTINGS = {
    "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
    "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
    # KIP-368: sessions of a minute, told in SaslAuthenticate; clients re-authenticate on the connection.
    "listener.name.sasl_plaintext.connections.max.reauth.ms": 60_000,
}
Upsertion = AlterUserScramCredentialsRequest.ScramCredentialUpsertion
Deletion = AlterUserScramCredentialsRequest.ScramCredentialDeletion


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[object, int]]]:
    """Kafka and trafka, each with a PLAINTEXT and a SASL_PLAINTEXT listener and SCRAM user bob: by name,
    the process and its SASL port."""
    root = Path(tmp_path_factory.mktemp("differential-security"))
    kafka = KafkaBroker(root / "kafka", overrides=SETTINGS, listeners={"SASL_PLAINTEXT": "SASL_PLAINTEXT"},
                        scram_users=["SCRAM-SHA-256=[name=bob,password=bob-secret]"])
    trafka_dir = root / "trafka"
    trafka_dir.mkdir()
    ScramCredentialStore.load(trafka_dir).set("bob", "SCRAM-SHA-256", from_password("SCRAM-SHA-256", "bob-secret"))
    sasl_port = free_port()
    trafka = BrokerProcess(trafka_dir, name="trafka", overrides={
        **SETTINGS, "listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{sasl_port}"})
    try:
        kafka.start()
        trafka.start()
        yield {"kafka": (kafka, kafka.ports["SASL_PLAINTEXT"]), "trafka": (trafka, sasl_port)}
    finally:
        trafka.close()
        kafka.close()


def on_both(brokers, ask: Callable[[WireClient], object], *, sasl: bool = True) -> dict[str, object]:
    observed = {}
    for name, (process, sasl_port) in brokers.items():
        with WireClient(f"127.0.0.1:{sasl_port}" if sasl else process.bootstrap) as client:
            observed[name] = ask(client)
    return observed


def assert_same(observed: dict[str, object]) -> None:
    assert observed["trafka"] == observed["kafka"], observed


def _handshake(client: WireClient, mechanism: str, version: int = 1) -> tuple[int, list[str]]:
    response = client.request(SaslHandshakeRequest(mechanism=mechanism), version)
    return response.error_code, sorted(response.mechanisms)


def _authenticate(client: WireClient, token: bytes, version: int = 2):
    return client.request(SaslAuthenticateRequest(auth_bytes=token), version)


def _closed(action: Callable[[], object]) -> bool:
    try:
        action()
    except (ConnectionError, OSError, EOFError):
        return True
    return False


# -------------------------------------------------------------------------------- refusals


def test_a_mechanism_that_is_not_enabled(brokers):
    assert_same(on_both(brokers, lambda client: _handshake(client, "SCRAM-SHA-512")))


@pytest.mark.parametrize("token", [b"\0alice\0wrong", b"\0nobody\0x", b"other\0alice\0alice-secret", b"\0\0", b"junk",
                                   b"\0alice\0", b"\0alice\0alice-secret\0", b"\0alice\0alice-secret\0more\0"],
                         ids=["wrong-password", "unknown-user", "foreign-authzid", "empty", "malformed", "no-password",
                              "third-nul", "four-nuls"])
def test_plain_refusals(brokers, token):
    def ask(client):
        handshake = _handshake(client, "PLAIN")
        response = _authenticate(client, token)
        return handshake, response.error_code, response.error_message, bytes(response.auth_bytes), \
            _closed(lambda: client.request(MetadataRequest(topics=[]), 12))

    assert_same(on_both(brokers, ask))


@pytest.mark.parametrize("user, password", [("bob", "wrong"), ("nobody", "bob-secret")])
def test_scram_refusals(brokers, user, password):
    def ask(client):
        _handshake(client, "SCRAM-SHA-256")
        scram = ScramClient("SCRAM-SHA-256", user, password)
        first = _authenticate(client, scram.first())
        if first.error_code:
            return "first", first.error_code, first.error_message
        final = _authenticate(client, scram.respond(bytes(first.auth_bytes)))
        return "final", final.error_code, final.error_message

    assert_same(on_both(brokers, ask))


def test_requests_before_authentication_close_the_connection(brokers):
    assert_same(on_both(brokers, lambda client: _closed(lambda: client.request(MetadataRequest(topics=[]), 12))))
    assert_same(on_both(brokers, lambda client: (
        _handshake(client, "PLAIN"), _closed(lambda: client.request(MetadataRequest(topics=[]), 12)))))


def test_sasl_requests_where_there_is_no_exchange(brokers):
    def after_success(client):
        _handshake(client, "PLAIN")
        ok = _authenticate(client, b"\0alice\0alice-secret")
        again = _authenticate(client, b"\0alice\0alice-secret")
        return ok.error_code, ok.session_lifetime_ms, again.error_code, again.error_message

    assert_same(on_both(brokers, after_success))

    def on_plaintext(client):
        handshake = client.request(SaslHandshakeRequest(mechanism="PLAIN"), 1)
        authenticate = _authenticate(client, b"\0alice\0alice-secret")
        return handshake.error_code, authenticate.error_code, authenticate.error_message

    assert_same(on_both(brokers, on_plaintext, sasl=False))


@pytest.mark.parametrize("again", [b"\0alice\0alice-secret", b"\0alice\0wrong", b"\0admin\0x"],
                         ids=["same-user", "wrong-password", "another-user"])
def test_reauthentication_on_the_same_connection(brokers, again):
    """KIP-368: after a successful login the client authenticates again on the same connection."""
    def ask(client):
        _handshake(client, "PLAIN")
        first = _authenticate(client, b"\0alice\0alice-secret")
        handshake = _handshake(client, "PLAIN")
        second = _authenticate(client, again)
        served = not _closed(lambda: client.request(MetadataRequest(topics=[]), 12))
        return (first.error_message, first.session_lifetime_ms, handshake, second.error_code, second.error_message,
                second.session_lifetime_ms, served)

    assert_same(on_both(brokers, ask))


# -------------------------------------------------------------------------------- SCRAM credentials


def test_scram_credential_requests(brokers):
    def ask(client):
        described = client.request(DescribeUserScramCredentialsRequest(users=[
            DescribeUserScramCredentialsRequest.UserName(name=name) for name in ("bob", "nobody", "bob")]), 0)
        altered = client.request(AlterUserScramCredentialsRequest(
            deletions=[Deletion(name="nobody", mechanism=1), Deletion(name="", mechanism=1)],
            upsertions=[Upsertion(name="carl", mechanism=1, iterations=100, salt=b"s" * 16, salted_password=b"p" * 32),
                        Upsertion(name="dora", mechanism=9, iterations=8192, salt=b"s" * 16, salted_password=b"p" * 32),
                        Upsertion(name="erik", mechanism=2, iterations=20_000, salt=b"s", salted_password=b"p" * 64),
                        Upsertion(name="fay", mechanism=2, iterations=8192, salt=b"s" * 16,
                                  salted_password=b"p" * 64)]), 0)
        after = client.request(DescribeUserScramCredentialsRequest(users=None), 0)
        return (
            (described.error_code, described.error_message),
            [(r.user, r.error_code, r.error_message, [(c.mechanism, c.iterations) for c in r.credential_infos])
             for r in described.results],
            sorted((r.user, r.error_code, r.error_message) for r in altered.results),
            [(r.user, r.error_code, [(c.mechanism, c.iterations) for c in r.credential_infos]) for r in after.results],
        )

    assert_same(on_both(brokers, ask, sasl=False))


# -------------------------------------------------------------------------------- listeners


def test_metadata_answers_with_the_addresses_of_the_listener_asked(brokers):
    observed = {}
    for name, (process, sasl_port) in brokers.items():
        with WireClient(process.bootstrap) as client:
            plain = [(b.host, b.port) for b in client.request(MetadataRequest(topics=[]), 12).brokers]
        with WireClient(f"127.0.0.1:{sasl_port}") as client:
            _handshake(client, "PLAIN")
            _authenticate(client, b"\0alice\0alice-secret")
            sasl = [(b.host, b.port) for b in client.request(MetadataRequest(topics=[]), 12).brokers]
        observed[name] = (plain == [("127.0.0.1", process.port)], sasl == [("127.0.0.1", sasl_port)])
    assert observed == {"kafka": (True, True), "trafka": (True, True)}


# -------------------------------------------------------------------------------- SaslHandshake v0


@pytest.mark.parametrize("password", ["alice-secret", "wrong"])
def test_handshake_v0_carries_the_tokens_in_bare_frames(brokers, password):
    """After SaslHandshake v0 (Kafka's oldest framing, before SaslAuthenticate existed) the token goes
    as a bare size-prefixed frame and so does the answer; a failure closes the connection."""
    def ask(client: WireClient):
        handshake = _handshake(client, "PLAIN", version=0)
        token = b"\0alice\0" + password.encode()
        client.sock.sendall(len(token).to_bytes(4, "big") + token)
        try:
            size = client.sock.recv(4)
            answer = client.sock.recv(int.from_bytes(size, "big")) if len(size) == 4 else None
            if size == b"":
                return handshake, "closed"
            metadata = client.request(MetadataRequest(topics=[]), 12)
            return handshake, answer, len(metadata.brokers)
        except (ConnectionError, OSError):
            return handshake, "closed"

    assert_same(on_both(brokers, ask))
