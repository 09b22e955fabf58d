"""SASL server exchanges (broker/security/sasl/): PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER driven by real clients'
SASL code (kafka-python's kafka.net.sasl mechanisms, aiokafka's authenticators) and by hand-written tokens for
RFC 7677's example and the failures, with the exact messages Kafka's broker gives clients."""
from __future__ import annotations

import base64
import json

import pytest
from kafka.net.sasl.oauth import AbstractTokenProvider, SaslMechanismOAuth
from kafka.net.sasl.plain import SaslMechanismPlain
from kafka.net.sasl.scram import SaslMechanismScram

from trafka.broker.security import credentials
from trafka.broker.security.credentials import DelegationTokenCredential, ScramCredentialStore
from trafka.broker.security.jaas import JaasConfigError, JaasEntry, parse_jaas_config, parse_jaas_entries
from trafka.broker.security.sasl import (
    AUTHENTICATE_AFTER_AUTHENTICATION,
    MECHANISMS,
    IllegalSaslState,
    SaslAuthenticationError,
    SaslServerContext,
    UnsecuredValidatorOptions,
    UnsupportedSaslMechanism,
    invalid_credentials_message,
    new_exchange,
    reauthentication_mechanism_changed_message,
    reauthentication_principal_changed_message,
    unexpected_request_message,
)
from trafka.broker.security.sasl.oauthbearer import IllegalToken, UnsecuredJws, validate_unsecured_token
from trafka.broker.security.sasl.plain import users_from_jaas
from trafka.broker.security.sasl.scram import random_nonce, saslname, username


def drive(client, exchange):
    """A kafka-python SASL mechanism against a server exchange, token by token, as its connection would."""
    while not client.is_done():
        client.receive(exchange.respond(client.auth_bytes()))


def failure(exchange, *tokens):
    """The SaslAuthenticationError the exchange raises on the last of ``tokens``."""
    for token in tokens[:-1]:
        exchange.respond(token)
    with pytest.raises(SaslAuthenticationError) as e:
        exchange.respond(tokens[-1])
    return e.value


def generic(mechanism, reauthenticating=False):
    return invalid_credentials_message(mechanism, reauthenticating)


# -- the registry and the messages around the exchange ----------------------------------------------------------------

def test_mechanisms_and_unknown_ones():
    assert MECHANISMS == ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
    for mechanism in MECHANISMS:
        exchange = new_exchange(mechanism, SaslServerContext())
        assert exchange.mechanism == mechanism and not exchange.complete and exchange.principal is None
    with pytest.raises(UnsupportedSaslMechanism, match="^Unsupported SASL mechanism GSSAPI$"):
        new_exchange("GSSAPI", SaslServerContext())


def test_kafkas_messages():
    assert generic("PLAIN") == (
        "Authentication failed during authentication due to invalid credentials with SASL mechanism PLAIN")
    assert generic("SCRAM-SHA-256", True) == (
        "Authentication failed during re-authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256")
    assert AUTHENTICATE_AFTER_AUTHENTICATION == "SaslAuthenticate request received after successful authentication"
    assert unexpected_request_message("METADATA", during_handshake=True) == (
        "Unexpected Kafka request of type METADATA during SASL handshake.")
    assert unexpected_request_message("PRODUCE", during_handshake=False) == (
        "Unexpected Kafka request of type PRODUCE during SASL authentication.")
    assert reauthentication_principal_changed_message("User:alice", "User:bob") == (
        "Cannot change principals during re-authentication from User.alice: User.bob")
    assert reauthentication_mechanism_changed_message("PLAIN", "SCRAM-SHA-256") == (
        "SASL mechanism 'PLAIN' requested by client is not supported for re-authentication "
        "of mechanism 'SCRAM-SHA-256'")


# -- PLAIN ------------------------------------------------------------------------------------------------------------

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret" user_bob="";')


@pytest.fixture
def plain_context():
    return SaslServerContext(plain_users=users_from_jaas([parse_jaas_config(PLAIN_JAAS)]))


def test_users_from_jaas_only_from_plain_login_module():
    entries = parse_jaas_entries(
        PLAIN_JAAS + ' org.apache.kafka.common.security.scram.ScramLoginModule required user_mallory="m";'
        ' org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="other";')
    assert users_from_jaas(entries) == {"admin": "admin-secret", "alice": "alice-secret", "bob": ""}


def test_plain_with_kafka_python(plain_context):
    client = SaslMechanismPlain(sasl_plain_username="alice", sasl_plain_password="alice-secret")
    exchange = new_exchange("PLAIN", plain_context)
    drive(client, exchange)
    assert client.is_authenticated()
    assert exchange.complete and exchange.principal == "User:alice" and exchange.authorization_id == "alice"
    assert exchange.session_lifetime_ms is None and exchange.credential_expiration_ms is None


def test_plain_with_aiokafka(plain_context):
    from aiokafka.conn import SaslPlainAuthenticator
    authenticator = SaslPlainAuthenticator(loop=None, sasl_plain_username="admin", sasl_plain_password="admin-secret")
    steps = authenticator._authenticator
    token, _ = steps.send(None)
    exchange = new_exchange("PLAIN", plain_context)
    with pytest.raises(StopIteration):
        steps.send(exchange.respond(token))
    assert exchange.principal == "User:admin"


@pytest.mark.parametrize(("token", "principal"), [
    (b"\0alice\0alice-secret", "User:alice"),                   # no authzid
    (b"alice\0alice\0alice-secret", "User:alice"),              # authzid = authcid
])
def test_plain_accepts(plain_context, token, principal):
    exchange = new_exchange("PLAIN", plain_context)
    assert exchange.respond(token) == b"" and exchange.principal == principal


@pytest.mark.parametrize(("token", "message", "detail"), [
    (b"\0alice\0wrong", "Authentication failed: Invalid username or password", None),
    (b"\0alice\0alice-secreT", "Authentication failed: Invalid username or password", None),
    (b"\0mallory\0alice-secret", "Authentication failed: Invalid username or password", None),
    (b"\0ALICE\0alice-secret", "Authentication failed: Invalid username or password", None),
    (b"\0bob\0x", "Authentication failed: Invalid username or password", None),       # an empty JAAS password
    (b"admin\0alice\0alice-secret",
     "Authentication failed: Client requested an authorization id that is different from username", None),
    # Kafka's SaslException: the client sees the message for invalid credentials, the log the reason.
    # As Apache Kafka 4.4 answers them (compat_tests/test_differential_security.py compares them side by side).
    (b"\0\0alice-secret", "Authentication failed: username not specified", None),
    (b"\0alice\0", "Authentication failed: password not specified", None),
    (b"\0alice", "Invalid SASL/PLAIN response: expected 3 tokens, got 2", None),
    (b"alice", "Invalid SASL/PLAIN response: expected 3 tokens, got 1", None),
    (b"", "Invalid SASL/PLAIN response: expected 3 tokens, got 1", None),
    (b"\0alice\0alice-secret\0ignored", "Invalid SASL/PLAIN response: expected 3 tokens, got 4", None),
])
def test_plain_failures(plain_context, token, message, detail):
    error = failure(new_exchange("PLAIN", plain_context), token)
    assert error.message == message and error.detail == detail
    assert str(error) == message            # never the detail: str() may end up on the wire


def test_plain_wrong_password_is_not_mistaken_for_unknown_user_or_not(plain_context):
    # Unknown user and wrong password read the same to the client.
    wrong = failure(new_exchange("PLAIN", plain_context), b"\0alice\0nope")
    unknown = failure(new_exchange("PLAIN", plain_context), b"\0nobody\0nope")
    assert wrong.message == unknown.message


def test_plain_invalid_utf8_is_replaced_not_fatal(plain_context):
    error = failure(new_exchange("PLAIN", plain_context), b"\0alice\0\xff\xfe")
    assert error.message == "Authentication failed: Invalid username or password"


def test_plain_reauthentication_wording(plain_context):
    # PLAIN's refusals all carry their own message, re-authenticating or not.
    exchange = new_exchange("PLAIN", plain_context, reauthenticating=True)
    assert failure(exchange, b"\0\0x").message == "Authentication failed: username not specified"


def test_plain_after_completion_or_failure_is_an_illegal_state(plain_context):
    exchange = new_exchange("PLAIN", plain_context)
    exchange.respond(b"\0alice\0alice-secret")
    with pytest.raises(IllegalSaslState, match="^Unexpected challenge in Sasl server state COMPLETE$"):
        exchange.respond(b"\0alice\0alice-secret")
    exchange = new_exchange("PLAIN", plain_context)
    failure(exchange, b"\0alice\0wrong")
    with pytest.raises(IllegalSaslState, match="^Unexpected challenge in Sasl server state FAILED$"):
        exchange.respond(b"\0alice\0alice-secret")


# -- SCRAM ------------------------------------------------------------------------------------------------------------

RFC_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")


@pytest.fixture(scope="module")
def scram_store():
    store = ScramCredentialStore()
    for mechanism in credentials.SCRAM_MECHANISMS:
        store.set("alice", mechanism, credentials.from_password(mechanism, "alice-secret", 4096))
        store.set("a,b=c", mechanism, credentials.from_password(mechanism, "odd-secret", 4096))
    store.set("only256", "SCRAM-SHA-256", credentials.from_password("SCRAM-SHA-256", "pw", 8192))
    store.set("user", "SCRAM-SHA-256", credentials.from_password("SCRAM-SHA-256", "pencil", 4096, salt=RFC_SALT))
    # What a broker could hold if its store were written by other means: below Kafka's minimum.
    store._credentials["weak"] = {"SCRAM-SHA-256": credentials.from_password("SCRAM-SHA-256", "pw", 1000)}
    return store


@pytest.fixture
def scram_context(scram_store):
    return SaslServerContext(scram_credentials=scram_store.get, scram_nonce=lambda: RFC_SERVER_NONCE)


def test_scram_sha_256_rfc_7677_example(scram_context):
    exchange = new_exchange("SCRAM-SHA-256", scram_context)
    assert exchange.respond(b"n,,n=user,r=" + RFC_NONCE.encode()) == (
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    assert not exchange.complete
    final = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
             b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert exchange.respond(final) == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert exchange.complete and exchange.principal == "User:user"
    assert exchange.session_lifetime_ms is None and not exchange.token_authenticated and exchange.extensions == {}


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_with_kafka_python(scram_store, mechanism):
    # The real server nonce, and kafka-python checks the ServerSignature itself.
    client = SaslMechanismScram(
        sasl_plain_username="alice", sasl_plain_password="alice-secret", sasl_mechanism=mechanism)
    exchange = new_exchange(mechanism, SaslServerContext(scram_credentials=scram_store.get))
    drive(client, exchange)
    assert client.is_authenticated() and exchange.complete and exchange.principal == "User:alice"


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_with_aiokafka_and_a_name_to_escape(scram_store, mechanism):
    # aiokafka escapes ',' and '=' in the name as RFC 5802 asks (=2C, =3D).
    from aiokafka.conn import ScramAuthenticator
    steps = ScramAuthenticator(loop=None, sasl_plain_username="a,b=c", sasl_plain_password="odd-secret",
                               sasl_mechanism=mechanism)._authenticator
    first, _ = steps.send(None)
    assert b"n=a=2Cb=3Dc," in first
    exchange = new_exchange(mechanism, SaslServerContext(scram_credentials=scram_store.get))
    final, _ = steps.send(exchange.respond(first))
    with pytest.raises(StopIteration):
        steps.send(exchange.respond(final))
    assert exchange.principal == "User:a,b=c"


def test_saslname_coding():
    assert username("a=2Cb=3Dc=3D2C") == "a,b=c=2C"
    assert saslname("a,b=c") == "a=2Cb=3Dc"
    assert len(random_nonce()) >= 20 and random_nonce() != random_nonce()


def scram_client_final(
    store, mechanism, user, password, first_bare, server_first, channel=b"biws", nonce=None, extra=b"",
):
    """The client-final message for ``password`` (as a client computes it), with overridable parts."""
    import hashlib
    import hmac
    fields = dict(p.split(b"=", 1) for p in server_first.split(b","))
    nonce = fields[b"r"] if nonce is None else nonce
    hash_name = credentials.HASHES[mechanism]
    salted = hashlib.pbkdf2_hmac(hash_name, password.encode(), base64.b64decode(fields[b"s"]), int(fields[b"i"]))
    client_key = hmac.new(salted, b"Client Key", hash_name).digest()
    without_proof = b"c=" + channel + b",r=" + nonce + extra
    auth_message = first_bare + b"," + server_first + b"," + without_proof
    signature = hmac.new(hashlib.new(hash_name, client_key).digest(), auth_message, hash_name).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature))
    return without_proof + b",p=" + base64.b64encode(proof)


def scram_failure(context, first, final_for=None, mechanism="SCRAM-SHA-256"):
    exchange = new_exchange(mechanism, context)
    if final_for is None:
        return failure(exchange, first)
    server_first = exchange.respond(first)
    return failure(exchange, final_for(server_first))


def test_scram_wrong_password_fails_on_the_final_message(scram_context, scram_store):
    first_bare = b"n=alice,r=abc"
    error = scram_failure(scram_context, b"n,," + first_bare, lambda sf: scram_client_final(
        scram_store, "SCRAM-SHA-256", "alice", "wrong", first_bare, sf))
    assert error.message == generic("SCRAM-SHA-256") and error.detail == "Invalid client credentials"


@pytest.mark.parametrize(("first", "detail"), [
    (b"n,,n=mallory,r=abc", "Authentication failed: Invalid user credentials"),
    (b"n,,n=only256,r=abc", "Authentication failed: Invalid user credentials"),   # no SCRAM-SHA-512 credential
])
def test_scram_unknown_user_fails_on_the_first_message_with_the_same_message(scram_context, first, detail):
    error = scram_failure(scram_context, first, mechanism="SCRAM-SHA-512")
    assert error.message == generic("SCRAM-SHA-512") and error.detail == detail


@pytest.mark.parametrize("first", [
    b"",
    b"garbage",
    b"y,,n=alice,r=abc",                    # client supports channel binding: not served
    b"p=tls-unique,,n=alice,r=abc",         # client requires channel binding
    b"n,,n=alice",                          # no nonce
    b"n,,n=alice,r=",                       # empty nonce
    b"n,,n=,r=abc",                         # empty name
    b"n,,n=al=ice,r=abc",                   # '=' not escaped
    b"n,,n=alice,r=ab c",                   # nonce not printable
    b"n,,n=alice,r=abc,1x=y",               # extension name not letters
    b"n,,m=ext,n=al\xffice,r=abc",          # not ASCII
])
def test_scram_malformed_first_messages(scram_context, first):
    error = scram_failure(scram_context, first)
    assert error.message == generic("SCRAM-SHA-256")
    assert error.detail.startswith("Invalid SCRAM client first message format")


def test_scram_authzid(scram_context, scram_store):
    first_bare = b"n=alice,r=abc"
    exchange = new_exchange("SCRAM-SHA-256", scram_context)
    server_first = exchange.respond(b"n,a=alice," + first_bare)
    exchange.respond(scram_client_final(scram_store, "SCRAM-SHA-256", "alice", "alice-secret", first_bare, server_first,
                                        channel=base64.b64encode(b"n,a=alice,")))
    assert exchange.principal == "User:alice"

    error = scram_failure(scram_context, b"n,a=admin," + first_bare)
    assert error.message == (
        "Authentication failed: Client requested an authorization id that is different from username")
    assert error.detail is None
    # An unknown user is unknown before its authzid is looked at.
    assert scram_failure(scram_context, b"n,a=admin,n=mallory,r=abc").message == generic("SCRAM-SHA-256")


def test_scram_reserved_m_and_unknown_extensions_are_accepted_and_ignored(scram_context, scram_store):
    first_bare = b"n=alice,r=abc,foo=bar,baz=q=x"
    exchange = new_exchange("SCRAM-SHA-256", scram_context)
    server_first = exchange.respond(b"n,,m=reserved," + first_bare)
    exchange.respond(scram_client_final(scram_store, "SCRAM-SHA-256", "alice", "alice-secret", first_bare, server_first,
                                        extra=b",ext=v"))
    assert exchange.complete and exchange.extensions == {} and not exchange.token_authenticated


@pytest.mark.parametrize(("tamper", "detail"), [
    (dict(nonce=b"abc"), "Invalid client nonce in the final client message."),
    (dict(nonce=b"xx" + b"abc" + RFC_SERVER_NONCE.encode()), "Invalid client nonce in the final client message."),
    (dict(channel=base64.b64encode(b"y,,")),
     "Invalid channel binding in the final client message: channel binding is not supported"),
    (dict(channel=base64.b64encode(b"p=tls-unique,,")),
     "Invalid channel binding in the final client message: channel binding is not supported"),
])
def test_scram_final_message_checks(scram_context, scram_store, tamper, detail):
    first_bare = b"n=alice,r=abc"
    error = scram_failure(scram_context, b"n,," + first_bare, lambda sf: scram_client_final(
        scram_store, "SCRAM-SHA-256", "alice", "alice-secret", first_bare, sf, **tamper))
    assert error.message == generic("SCRAM-SHA-256") and error.detail == detail


@pytest.mark.parametrize("final", [
    b"",
    b"c=biws,r=abc" + RFC_SERVER_NONCE.encode(),                                   # no proof
    b"c=biws,r=abc" + RFC_SERVER_NONCE.encode() + b",p=not base64!",
    b"c=b!ws,r=abc" + RFC_SERVER_NONCE.encode() + b",p=AAAA",
])
def test_scram_malformed_final_messages(scram_context, final):
    error = scram_failure(scram_context, b"n,,n=alice,r=abc", lambda sf: final)
    assert error.message == generic("SCRAM-SHA-256")
    assert error.detail.startswith("Invalid SCRAM client final message format")


def test_scram_proof_of_the_wrong_length_is_invalid_credentials(scram_context):
    final = b"c=biws,r=abc" + RFC_SERVER_NONCE.encode() + b",p=" + base64.b64encode(b"\0" * 20)
    error = scram_failure(scram_context, b"n,,n=alice,r=abc", lambda sf: final)
    assert error.message == generic("SCRAM-SHA-256") and error.detail == "Invalid client credentials"


def test_scram_credential_below_minimum_iterations(scram_context):
    error = scram_failure(scram_context, b"n,,n=weak,r=abc")
    assert error.message == generic("SCRAM-SHA-256")
    assert error.detail == "Iterations 1000 is less than the minimum 4096 for SCRAM-SHA-256"


def test_scram_states(scram_context, scram_store):
    client = SaslMechanismScram(
        sasl_plain_username="alice", sasl_plain_password="alice-secret", sasl_mechanism="SCRAM-SHA-256")
    exchange = new_exchange("SCRAM-SHA-256", SaslServerContext(scram_credentials=scram_store.get))
    drive(client, exchange)
    with pytest.raises(IllegalSaslState, match="state COMPLETE"):
        exchange.respond(b"n,,n=alice,r=abc")
    exchange = new_exchange("SCRAM-SHA-256", scram_context)
    failure(exchange, b"n,,n=mallory,r=abc")
    with pytest.raises(IllegalSaslState, match="state FAILED"):
        exchange.respond(b"n,,n=alice,r=abc")


def test_scram_delegation_token(scram_store):
    token_credential = credentials.from_password("SCRAM-SHA-512", "token-hmac", 4096)
    tokens = {"tokenid1": DelegationTokenCredential("alice", token_credential, expiry_timestamp_ms=1_000_000)}
    context = SaslServerContext(
        scram_credentials=scram_store.get, delegation_tokens=lambda token_id, mechanism: tokens.get(token_id),
        clock_ms=lambda: 400_000,
    )
    for flag in (b"true", b"TRUE"):
        first_bare = b"n=tokenid1,r=abc,tokenauth=" + flag
        exchange = new_exchange("SCRAM-SHA-512", context)
        server_first = exchange.respond(b"n,," + first_bare)
        exchange.respond(scram_client_final(
            scram_store, "SCRAM-SHA-512", "tokenid1", "token-hmac", first_bare, server_first))
        assert exchange.principal == "User:alice" and exchange.token_authenticated
        assert exchange.extensions == {"tokenauth": flag.decode()}
        assert exchange.credential_expiration_ms == 1_000_000 and exchange.session_lifetime_ms == 600_000

    error = failure(new_exchange("SCRAM-SHA-512", context), b"n,,n=nosuchtoken,r=abc,tokenauth=true")
    assert error.message == generic("SCRAM-SHA-512")
    assert error.detail == "Token Authentication failed: Invalid tokenId : nosuchtoken"
    # tokenauth=false is a user's login.
    exchange = new_exchange("SCRAM-SHA-512", context)
    exchange.respond(b"n,,n=alice,r=abc,tokenauth=false")
    assert not exchange.token_authenticated


# -- OAUTHBEARER ------------------------------------------------------------------------------------------------------

NOW_MS = 1_700_000_000_000
NOW = NOW_MS // 1000


def b64url(obj) -> str:
    raw = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def jws(claims, header=None, signature=""):
    return f"{b64url(header or {'alg': 'none'})}.{b64url(claims)}.{signature}"


def valid_claims(**overrides):
    claims = {"sub": "alice", "iat": NOW - 10, "exp": NOW + 3600, "scope": "test"}
    claims.update(overrides)
    return {k: v for k, v in claims.items() if v is not None}


def initial_response(token, authzid="", extensions=""):
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}{extensions}\x01\x01".encode()


class Provider(AbstractTokenProvider):
    def __init__(self, token, extensions=None):
        self._token = token
        self._extensions = extensions or {}

    def token(self):
        return self._token

    def extensions(self):
        return self._extensions


def oauth_context(**options):
    return SaslServerContext(oauthbearer=UnsecuredValidatorOptions(**options), clock_ms=lambda: NOW_MS)


def test_oauthbearer_with_kafka_python():
    client = SaslMechanismOAuth(sasl_oauth_token_provider=Provider(jws(valid_claims()), {"traceId": "abc 123"}))
    exchange = new_exchange("OAUTHBEARER", oauth_context())
    drive(client, exchange)
    assert client.is_authenticated()
    assert exchange.principal == "User:alice" and exchange.extensions == {"traceId": "abc 123"}
    assert exchange.credential_expiration_ms == (NOW + 3600) * 1000
    assert exchange.session_lifetime_ms == (NOW + 3600) * 1000 - NOW_MS
    assert exchange.token.scope == frozenset({"test"}) and exchange.token.start_time_ms == (NOW - 10) * 1000


def test_oauthbearer_with_aiokafkas_initial_response():
    from aiokafka.conn import OAuthAuthenticator
    authenticator = OAuthAuthenticator(sasl_oauth_token_provider=None)
    token = authenticator._build_oauth_client_request(jws(valid_claims()), "\x01ext=v").encode()
    exchange = new_exchange("OAUTHBEARER", oauth_context())
    assert exchange.respond(token) == b"" and exchange.extensions == {"ext": "v"}


def test_oauthbearer_expired_token_with_kafka_python():
    # The server answers with its JSON error token; kafka-python answers \x01; the exchange fails with the JSON.
    client = SaslMechanismOAuth(sasl_oauth_token_provider=Provider(jws(valid_claims(iat=NOW - 7200, exp=NOW - 3600))))
    exchange = new_exchange("OAUTHBEARER", oauth_context())
    assert exchange.respond(client.auth_bytes()) == b'{"status":"invalid_token"}'
    assert not exchange.complete
    client.receive(b'{"status":"invalid_token"}')
    assert client.auth_bytes() == b"\x01"
    with pytest.raises(SaslAuthenticationError) as e:
        exchange.respond(client.auth_bytes())
    assert e.value.message == '{"status":"invalid_token"}'
    assert e.value.detail == (f"The indicated time ({NOW_MS} ms) minus allowable clock skew (0 ms) was on or after "
                              f"the Expiration Time value ({NOW - 3600}.000000 seconds)")
    with pytest.raises(IllegalSaslState):
        exchange.respond(b"\x01")


NAN_CLAIMS = b'{"sub": "alice", "exp": NaN}'
INVALID_TOKENS = [
    # (token, the reason Kafka logs; the client sees {"status":"invalid_token"})
    (jws(valid_claims(), header={"alg": "HS256", "typ": "JWT"}, signature="c2lnbmF0dXJl"),
     "Unsecured JWS must have 'none' for an algorithm"),
    (jws(valid_claims(), header={"alg": "RS256"}), "Unsecured JWS must have 'none' for an algorithm"),
    (jws(valid_claims(), signature="c2lnbmF0dXJl"), "Unsecured JWS must not contain a digital signature"),
    (jws(valid_claims(), header={"typ": "JWT"}), "JWS header must have an Algorithm value"),
    (jws(valid_claims(sub=None)), "No principal name in JWT claim: sub"),
    (jws(valid_claims(sub="  ")), "No principal name in JWT claim: sub"),
    (jws(valid_claims(sub=42)), "The 'sub' claim was not of type String: Integer"),
    (jws(valid_claims(exp=None)), "No expiration time in JWT"),
    (jws(valid_claims(exp="tomorrow")), "The 'exp' claim was not of type Number: String"),
    (jws(valid_claims(exp=True)), "The 'exp' claim was not of type Number: String"),
    (jws(valid_claims(iat="yesterday")), "The 'iat' claim was not of type Number: String"),
    (jws(valid_claims(scope=5)), "The 'scope' claim was not of type List: Integer"),
    (jws(valid_claims(exp=NOW)), f"The indicated time ({NOW_MS} ms) minus allowable clock skew (0 ms) was on or "
                                 f"after the Expiration Time value ({NOW}.000000 seconds)"),
    (jws(valid_claims(iat=NOW + 1)), f"The Issued At value ({NOW + 1}.000000 seconds) was after the indicated time "
                                     f"({NOW_MS} ms) plus allowable clock skew (0 ms)"),
    (jws(valid_claims(iat=NOW, exp=NOW - 0.5)), f"The indicated time ({NOW_MS} ms) minus allowable clock skew (0 ms) "
                                                f"was on or after the Expiration Time value ({NOW - 0.5:f} seconds)"),
    ("abc.def", "Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values"),
    ("a.b.c.d", "Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values"),
    ("abc..", "Malformed compact serialization contains '..'"),
    (f"{b64url({'alg': 'none'})}.a.", "malformed Base64 URL encoded value"),
    (f"{b64url({'alg': 'none'})}.{b64url(b'not json')}.", "malformed JSON"),
    (f"{b64url({'alg': 'none'})}.{b64url(NAN_CLAIMS)}.", "malformed JSON"),
    (f"{b64url(b'[1]')}.{b64url(valid_claims())}.", "JWS header must have an Algorithm value"),
]


@pytest.mark.parametrize(("token", "detail"), INVALID_TOKENS)
def test_oauthbearer_invalid_tokens(token, detail):
    exchange = new_exchange("OAUTHBEARER", oauth_context())
    assert exchange.respond(initial_response(token)) == b'{"status":"invalid_token"}'
    assert exchange.failure_detail == detail
    error = failure(exchange, b"\x01")
    assert error.message == '{"status":"invalid_token"}' and error.detail == detail


def test_oauthbearer_time_consistency():
    exchange = new_exchange("OAUTHBEARER", oauth_context(allowable_clock_skew_ms=10_000_000))
    exchange.respond(initial_response(jws(valid_claims(iat=NOW + 100, exp=NOW + 50))))
    assert exchange.failure_detail == (
        f"The Expiration Time time ({NOW + 50}.000000 seconds) was not after the Issued At time "
        f"({NOW + 100}.000000 seconds)")


def test_oauthbearer_clock_skew():
    issued_ahead = initial_response(jws(valid_claims(iat=NOW + 2, exp=NOW + 60)))
    expired = initial_response(jws(valid_claims(iat=NOW - 60, exp=NOW - 2)))
    for token in (issued_ahead, expired):
        assert new_exchange("OAUTHBEARER", oauth_context(allowable_clock_skew_ms=1000)).respond(token) != b""
        assert new_exchange("OAUTHBEARER", oauth_context(allowable_clock_skew_ms=3000)).respond(token) == b""
    # Expired by the broker's clock but within the skew: the session has no time left.
    exchange = new_exchange("OAUTHBEARER", oauth_context(allowable_clock_skew_ms=3000))
    exchange.respond(expired)
    assert exchange.complete and exchange.session_lifetime_ms == 0


@pytest.mark.parametrize(("claims", "required", "response"), [
    (valid_claims(scope="a"), ("a",), b""),
    (valid_claims(scope=["a", " b ", ""]), ("a", "b"), b""),
    (valid_claims(scope="a b"), ("a",), b'{"status":"insufficient_scope", "scope":"[a]"}'),   # one item: "a b"
    (valid_claims(scope=["a"]), ("a", "b"), b'{"status":"insufficient_scope", "scope":"[a, b]"}'),
    (valid_claims(scope=None), ("a",), b'{"status":"insufficient_scope", "scope":"[a]"}'),
])
def test_oauthbearer_required_scope(claims, required, response):
    exchange = new_exchange("OAUTHBEARER", oauth_context(required_scope=required))
    assert exchange.respond(initial_response(jws(claims))) == response
    if response:
        assert failure(exchange, b"\x01").message == response.decode()
        assert "was missing a required scope" in exchange.failure_detail


def test_oauthbearer_custom_claim_names():
    context = oauth_context(principal_claim_name="client_id", scope_claim_name="scp", required_scope=("kafka",))
    exchange = new_exchange("OAUTHBEARER", context)
    assert exchange.respond(initial_response(jws(valid_claims(sub=None, client_id="svc", scp=["kafka"])))) == b""
    assert exchange.principal == "User:svc"
    exchange = new_exchange("OAUTHBEARER", context)
    exchange.respond(initial_response(jws(valid_claims(scp=["kafka"]))))
    assert exchange.failure_detail == "No principal name in JWT claim: client_id"


def test_oauthbearer_fractional_times_and_base64_alphabets():
    # exp with fractions; claims whose base64 has '-' and '_' (base64url) or '+' and '/' (standard).
    claims = valid_claims(exp=NOW + 100.4996, note="?>?>~~~")
    url = jws(claims)
    assert "-" in url or "_" in url
    header, body, _ = url.split(".")
    standard = f"{header}.{body.replace('-', '+').replace('_', '/')}."
    for token in (url, standard):
        exchange = new_exchange("OAUTHBEARER", oauth_context())
        assert exchange.respond(initial_response(token)) == b""
        assert exchange.credential_expiration_ms == (NOW + 100) * 1000 + 500


def test_oauthbearer_authzid():
    exchange = new_exchange("OAUTHBEARER", oauth_context())
    assert exchange.respond(initial_response(jws(valid_claims()), authzid="alice")) == b""
    token = initial_response(jws(valid_claims()), authzid="admin")
    error = failure(new_exchange("OAUTHBEARER", oauth_context()), token)
    assert error.message == ("Authentication failed: Client requested an authorization id (admin) that is different "
                             "from the token's principal name (alice)")


@pytest.mark.parametrize(("token", "detail"), [
    (b"", "Invalid OAUTHBEARER client first message"),
    (b"\x01", "Invalid OAUTHBEARER client first message"),                     # \x01 with no error sent
    (b"n,,auth=Bearer x\x01\x01", "Invalid OAUTHBEARER client first message"),
    (b"y,,\x01auth=Bearer x\x01\x01", "Invalid OAUTHBEARER client first message"),
    (b"n,,\x01auth=Bearer x\x01", "Invalid OAUTHBEARER client first message"),
    (b"n,,\x01auth=Bearer x\x011bad=v\x01\x01", "Invalid OAUTHBEARER client first message"),
    (b"n,,\x01auth=Bearer x\x01key=\x01\x01", "Invalid OAUTHBEARER client first message"),
    (b"n,,\x01\x01", "Invalid OAUTHBEARER client first message: 'auth' not specified"),
    (b"n,,\x01ext=v\x01\x01", "Invalid OAUTHBEARER client first message: 'auth' not specified"),
    (b"n,,\x01auth=Bearer\x01\x01", "Invalid OAUTHBEARER client first message: invalid 'auth' format"),
    (b"n,,\x01auth=Bearer a b\x01\x01", "Invalid OAUTHBEARER client first message: invalid 'auth' format"),
    (b"n,,\x01auth=Basic YWxpY2U6cHc=\x01\x01", "Invalid scheme in OAUTHBEARER client first message: Basic"),
])
def test_oauthbearer_malformed_initial_responses(token, detail):
    error = failure(new_exchange("OAUTHBEARER", oauth_context()), token)
    assert error.message == generic("OAUTHBEARER") and error.detail == detail


def test_oauthbearer_scheme_is_case_insensitive_and_extensions_pass():
    exchange = new_exchange("OAUTHBEARER", oauth_context())
    alice, bob = jws(valid_claims()), jws(valid_claims(sub="bob"))
    token = f"n,,\x01auth=bEaReR {alice}\x01a=1 2\x01B=x\ty\x01auth=Bearer {bob}\x01\x01"
    assert exchange.respond(token.encode()) == b""
    assert exchange.principal == "User:bob"                     # the last auth wins, as Kafka's map does
    assert exchange.extensions == {"a": "1 2", "B": "x\ty"}


def test_oauthbearer_another_initial_response_after_an_error_is_evaluated_afresh():
    exchange = new_exchange("OAUTHBEARER", oauth_context())
    assert exchange.respond(initial_response(jws(valid_claims(exp=NOW - 1)))) == b'{"status":"invalid_token"}'
    assert exchange.respond(initial_response(jws(valid_claims()))) == b""
    assert exchange.complete and exchange.failure_detail is None


def test_unsecured_jws_parse_directly():
    claims = valid_claims(scope=["x", "y"], extra={"nested": 1}, flag=False, arr=[1, True, None, {}])
    token = jws(dict(claims, nothing=None))
    parsed = UnsecuredJws.parse(token)
    assert parsed.principal_name == "alice" and parsed.scope == frozenset({"x", "y"})
    # As Kafka reads claims with Jackson: numbers stay, arrays become their elements' text, the rest its text.
    assert parsed.claims["flag"] == "false" and parsed.claims["nothing"] == "null" and parsed.claims["extra"] == ""
    assert parsed.claims["arr"] == ["1", "true", "null", ""]
    with pytest.raises(IllegalToken) as e:
        options = UnsecuredValidatorOptions(required_scope=("y",))
        validate_unsecured_token(jws(valid_claims(scope=["x"])), options, NOW_MS)
    assert e.value.scope == "[y]" and e.value.description == (
        "The provided scope ([x]) was missing a required scope (y).  All required scope elements: [y]")


# -- OAUTHBEARER's options from JAAS ------------------------------------------------------------------------------

OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


def test_validator_options_from_jaas():
    entry = parse_jaas_config(
        f'{OAUTH_MODULE} required unsecuredLoginStringClaim_sub="admin" unsecuredValidatorPrincipalClaimName=" azp "'
        ' unsecuredValidatorScopeClaimName="scp" unsecuredValidatorRequiredScope="  read  write "'
        ' unsecuredValidatorAllowableClockSkewMs=" 3000 ";')
    assert UnsecuredValidatorOptions.from_jaas_entries([entry]) == UnsecuredValidatorOptions(
        principal_claim_name="azp", scope_claim_name="scp", required_scope=("read", "write"),
        allowable_clock_skew_ms=3000)
    blank = {"unsecuredValidatorPrincipalClaimName": "  "}
    assert UnsecuredValidatorOptions.from_jaas(blank) == UnsecuredValidatorOptions()


@pytest.mark.parametrize(("options", "message"), [
    ({"unsecuredValidatorAllowableClockSkewMs": "-1"},
     "unsecuredValidatorAllowableClockSkewMs: Allowable clock skew millis must not be negative: -1"),
    ({"unsecuredValidatorAllowableClockSkewMs": "soon"},
     "unsecuredValidatorAllowableClockSkewMs: not an integer: 'soon'"),
    ({"unsecuredValidatorAllowableClockSkewMs": "99999999999"}, "not an integer"),
    ({"unsecuredValidatorRequiredScope": 'a "b"'}, 'unsecuredValidatorRequiredScope: Invalid scope value: "b"'),
])
def test_validator_options_errors(options, message):
    with pytest.raises(JaasConfigError) as e:
        UnsecuredValidatorOptions.from_jaas(options)
    assert message in str(e.value)


def test_validator_needs_exactly_one_oauthbearer_entry():
    entry = JaasEntry(OAUTH_MODULE, "REQUIRED", {})
    message = r"^Must supply exactly 1 non-null JAAS mechanism configuration \(size was 2\)$"
    with pytest.raises(JaasConfigError, match=message):
        UnsecuredValidatorOptions.from_jaas_entries([entry, entry])
    with pytest.raises(JaasConfigError, match=r"\(size was 0\)"):
        UnsecuredValidatorOptions.from_jaas_entries([])
