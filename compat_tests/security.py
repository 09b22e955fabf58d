"""What the security tests share: free ports for extra listeners, the brokers' JAAS settings, SCRAM users
written into a data directory before a broker starts, unsecured OAUTHBEARER tokens as Kafka's own client
makes them, the Java client's ``sasl.jaas.config`` for each mechanism, a confluent-kafka round trip over a
secured listener, and kafkajs and the Java client with security settings of their own."""
from __future__ import annotations

import base64
import json
import time
from collections.abc import Mapping
from pathlib import Path

from compat_tests.clients import JavaClient, KafkajsClient

#: The broker's PLAIN users (admin, alice) as Kafka's PlainLoginModule lists them.
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
#: Kafka's unsecured OAUTHBEARER validator, the broker's default (no options).
OAUTH_JAAS = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
MECHANISMS = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER"
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def add_scram_users(data_dir: Path, users: Mapping[str, str], iterations: int = 4096) -> None:
    """Store SCRAM-SHA-256 and SCRAM-SHA-512 credentials of ``users`` (name -> password) in ``data_dir``,
    where a broker started on it finds them."""
    from trafka.broker.security.credentials import ScramCredentialStore, from_password

    Path(data_dir).mkdir(parents=True, exist_ok=True)
    store = ScramCredentialStore.load(Path(data_dir))
    for user, password in users.items():
        for mechanism in SCRAM_MECHANISMS:
            store.set(user, mechanism, from_password(mechanism, password, iterations))


def _b64url(data: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(data, separators=(",", ":")).encode()).rstrip(b"=").decode()


def unsecured_token(principal: str, lifetime_s: float = 3600, **claims: object) -> str:
    """An unsecured JWS for ``principal`` as Kafka's OAuthBearerUnsecuredLoginCallbackHandler makes it:
    ``{"alg":"none"}``, the claims ``sub``, ``iat`` and ``exp`` (plus ``claims``) in seconds with millisecond
    precision, base64url without padding, and an empty signature. (A finer ``iat`` can be a fraction of a
    millisecond after the broker's clock, which Kafka's validator reads in whole milliseconds, and is refused.)"""
    now = time.time_ns() // 1_000_000 / 1000
    body = {"sub": principal, "iat": now, "exp": round(now + lifetime_s, 3), **claims}
    return f"{_b64url({'alg': 'none'})}.{_b64url(body)}."


def java_jaas(mechanism: str, user: str, password: str = "") -> str:
    """The Java client's ``sasl.jaas.config`` for ``mechanism``: PlainLoginModule or ScramLoginModule with a
    username and password, or OAuthBearerLoginModule making unsecured tokens whose subject is ``user``."""
    if mechanism == "OAUTHBEARER":
        return ('org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
                f'unsecuredLoginStringClaim_sub="{user}";')
    module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if mechanism == "PLAIN"
              else "org.apache.kafka.common.security.scram.ScramLoginModule")
    return f'{module} required username="{user}" password="{password}";'


def round_trip(config: Mapping[str, str], topic: str, count: int = 10,
               consumer_config: Mapping[str, str] | None = None) -> list[bytes]:
    """``count`` records produced to ``topic`` with confluent-kafka's ``config``, then read back from the
    start by a consumer group (``consumer_config``, by default the same settings): the values read."""
    from confluent_kafka import Consumer, Producer

    producer = Producer(dict(config))
    for i in range(count):
        producer.produce(topic, value=b"%d" % i)
    assert producer.flush(20) == 0
    consumer = Consumer({**(consumer_config if consumer_config is not None else config),
                         "group.id": f"{topic}-group", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values: list[bytes] = []
    try:
        deadline = time.monotonic() + 30
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
    finally:
        consumer.close()
    return values


# -- OAUTHBEARER with signed tokens: keys, JWKS documents, tokens, and an identity provider on loopback ----------

def jwk_of(private_key, kid: str, alg: str) -> dict:
    """The public JWK of ``private_key`` (RSA or EC, made with ``cryptography``), as an identity provider lists
    it in its JWKS."""
    import jwt

    algorithm = jwt.get_algorithm_by_name(alg)
    return {**json.loads(algorithm.to_jwk(private_key.public_key())), "kid": kid, "alg": alg, "use": "sig"}


def jwks_json(*jwks: dict) -> str:
    return json.dumps({"keys": list(jwks)})


def signed_token(private_key, kid: str | None, alg: str = "RS256", *, subject: str | None = "alice",
                 lifetime_s: float = 3600, **claims: object) -> str:
    """A JWT signed with ``private_key`` (``alg``, header ``kid``): ``sub``, ``iat`` and ``exp`` in whole
    seconds (``subject=None`` leaves ``sub`` out), then ``claims`` (a claim set to None is left out)."""
    import jwt

    now = int(time.time())
    body = {"sub": subject, "iat": now, "exp": int(now + lifetime_s), **claims}
    body = {name: value for name, value in body.items() if value is not None}
    headers = {"kid": kid} if kid is not None else {}
    return jwt.api_jws.encode(json.dumps(body).encode(), private_key, algorithm=alg, headers=headers)


class IdentityProvider:
    """A tiny OAuth identity provider on loopback, in a thread: ``GET /jwks`` serves :attr:`jwks` (replace it to
    rotate keys), ``POST /token`` answers a client-credentials grant of a known client with a token that
    :attr:`issue` makes (``issue(client_id, scope) -> token``). It counts the JWKS fetches."""

    def __init__(self, jwks: str, issue, clients: Mapping[str, str]) -> None:
        import http.server
        import threading
        import urllib.parse

        self.jwks = jwks
        self.issue = issue
        self.clients = dict(clients)
        self.jwks_fetches = 0
        self.token_requests: list[dict[str, str]] = []
        provider = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _answer(self, status: int, body: str) -> None:
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path.split("?")[0] != "/jwks":
                    return self._answer(404, "{}")
                provider.jwks_fetches += 1
                self._answer(200, provider.jwks)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
                client_id, secret = form.get("client_id"), form.get("client_secret")
                authorization = self.headers.get("Authorization") or ""
                if authorization.startswith("Basic "):
                    decoded = base64.b64decode(authorization[6:]).decode()
                    client_id, _, secret = (urllib.parse.unquote(p) for p in decoded.partition(":"))
                provider.token_requests.append({**form, "client_id": client_id or ""})
                if self.path != "/token" or form.get("grant_type") != "client_credentials" or (
                        provider.clients.get(client_id or "") != secret):
                    return self._answer(401, '{"error":"invalid_client"}')
                token = provider.issue(client_id, form.get("scope"))
                self._answer(200, json.dumps({"access_token": token, "token_type": "bearer", "expires_in": 3600}))

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def jwks_url(self) -> str:
        return f"{self.url}/jwks"

    @property
    def token_url(self) -> str:
        return f"{self.url}/token"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


async def aiokafka_round_trip(settings: dict, topic: str, values: list[bytes]) -> list[bytes]:
    """``values`` produced to ``topic`` with aiokafka's ``settings``, then read back from the start by a consumer
    group (its offsets committed): the values read."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    producer = AIOKafkaProducer(**settings)
    await producer.start()
    try:
        for value in values:
            await producer.send(topic, value)
        await producer.flush()
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(topic, group_id=f"{topic}-group", auto_offset_reset="earliest", **settings)
    await consumer.start()
    received: list[bytes] = []
    try:
        deadline = time.monotonic() + 30
        while len(received) < len(values) and time.monotonic() < deadline:
            for batch in (await consumer.getmany(timeout_ms=200)).values():
                received += [record.value for record in batch]
        await consumer.commit()
    finally:
        await consumer.stop()
    return received


class SecureKafkajs(KafkajsClient):
    """kafkajs through driver.js with `ssl` and `sasl` settings (driver.js passes them to kafkajs)."""

    def __init__(self, bootstrap: str, security: dict):
        super().__init__(bootstrap)
        self.security = security

    def call(self, op, timeout=60.0, **arguments):
        return super().call(op, timeout, **self.security, **arguments)


class SecureJava(JavaClient):
    """The Java client (the session's driver JVM) with client properties of its own (security settings)."""

    def __init__(self, bootstrap: str, properties: dict[str, str]):
        super().__init__(bootstrap)
        self.properties = properties

    def call(self, op, timeout=60.0, **arguments):
        return super().call(op, timeout, properties=self.properties, **arguments)
