"""OAUTHBEARER on the client side of trafka's tools: Kafka's unsecured login token, the client's exchange against
the broker's (both validators), and ``--command-config`` settings with Kafka's login options, including a
client-credentials grant at a token endpoint served on loopback."""
from __future__ import annotations

import base64
import http.server
import json
import threading
import urllib.parse
from collections.abc import Iterator

import pytest

from trafka.broker.security.sasl import SaslAuthenticationError, SaslServerContext, new_exchange
from trafka.broker.security.sasl.client import OAuthBearerClient, SaslClientError, unsecured_login_token
from trafka.broker.security.sasl.oauthbearer import UnsecuredValidatorOptions, validate_unsecured_token
from trafka.broker.tools.client_security import ClientConfigError, ClientSecurity

NOW_MS = 1_800_000_000_123
MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"


def _claims(token: str) -> dict:
    part = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


def test_unsecured_login_token_as_kafkas_login_makes_it():
    token, extensions = unsecured_login_token({
        "unsecuredLoginStringClaim_sub": "alice", "unsecuredLoginListClaim_scope": ",read,write",
        "unsecuredLoginNumberClaim_level": "3", "unsecuredLoginLifetimeSeconds": "60",
        "unsecuredLoginExtension_traceId": "42"}, NOW_MS)
    assert token.endswith(".") and extensions == {"traceId": "42"}
    assert _claims(token) == {"iat": 1_800_000_000.123, "exp": 1_800_000_060.123, "sub": "alice",
                              "scope": ["read", "write"], "level": 3}
    jws = validate_unsecured_token(token, UnsecuredValidatorOptions(), NOW_MS)  # the broker's validator takes it
    assert (jws.principal_name, jws.scope) == ("alice", {"read", "write"})


@pytest.mark.parametrize("options, message", [
    ({}, "unsecuredLoginStringClaim_sub is needed"),
    ({"unsecuredLoginStringClaim_sub": "a", "unsecuredLoginStringClaim_exp": "1"}, "the exp claim is set by"),
    ({"unsecuredLoginStringClaim_sub": "a", "unsecuredLoginNumberClaim_n": "x"}, "not a number"),
    ({"unsecuredLoginStringClaim_sub": "a", "unsecuredLoginLifetimeSeconds": "soon"}, "not a whole number"),
    ({"unsecuredLoginStringClaim_uid": "a", "unsecuredLoginPrincipalClaimName": "sub"}, "StringClaim_sub is needed"),
])
def test_unsecured_login_options_refused(options, message):
    with pytest.raises(ValueError, match=message):
        unsecured_login_token(options, NOW_MS)


def test_the_client_exchange_against_the_brokers():
    token, _ = unsecured_login_token({"unsecuredLoginStringClaim_sub": "alice"}, NOW_MS)
    server = new_exchange("OAUTHBEARER", SaslServerContext(clock_ms=lambda: NOW_MS))
    client = OAuthBearerClient(token, extensions={"traceId": "7"})
    assert client.respond(server.respond(client.first())) == b""
    assert client.complete and server.principal == "User:alice" and server.extensions == {"traceId": "7"}


def test_a_refused_token_is_acknowledged_then_the_server_fails():
    token, _ = unsecured_login_token({"unsecuredLoginStringClaim_sub": "alice"}, NOW_MS - 7_200_000)
    server = new_exchange("OAUTHBEARER", SaslServerContext(clock_ms=lambda: NOW_MS))
    client = OAuthBearerClient(token)
    answer = client.respond(server.respond(client.first()))
    assert (answer, client.error, client.complete) == (b"\x01", '{"status":"invalid_token"}', False)
    with pytest.raises(SaslAuthenticationError, match="invalid_token"):
        server.respond(answer)
    with pytest.raises(SaslClientError):
        client.respond(b"again")


def test_authorization_id():
    assert OAuthBearerClient("t.t.", authorization_id="alice").first() == b"n,a=alice,\x01auth=Bearer t.t.\x01\x01"


# -- --command-config -------------------------------------------------------------------------------------------


def _security(**props: str) -> ClientSecurity:
    return ClientSecurity.from_properties({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
                                           **props})


def test_command_config_with_the_unsecured_login():
    security = _security(**{"sasl.jaas.config": f'{MODULE} required unsecuredLoginStringClaim_sub="alice" '
                                                'unsecuredLoginExtension_team="blue";'})
    assert security.principal == "alice with OAUTHBEARER"
    first = security.sasl_exchange().first().decode()
    assert first.startswith("n,,\x01auth=Bearer ") and first.endswith("\x01team=blue\x01\x01")
    assert _claims(first.split("Bearer ")[1].split("\x01")[0])["sub"] == "alice"


class TokenEndpoint:
    """A token endpoint on loopback: client-credentials grants of client "app" (secret "s3 cret:") get a token."""

    def __init__(self) -> None:
        self.requests: list[tuple[dict, str]] = []
        endpoint = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"])).decode()
                form = dict(urllib.parse.parse_qsl(body))
                authorization = self.headers.get("Authorization", "")
                endpoint.requests.append((form, authorization))
                user, _, secret = base64.b64decode(authorization.removeprefix("Basic ")).decode().partition(":")
                ok = (urllib.parse.unquote(user), urllib.parse.unquote(secret)) == ("app", "s3 cret:")
                data = json.dumps({"access_token": "a.b.c", "token_type": "bearer"} if ok
                                  else {"error": "invalid_client"}).encode()
                self.send_response(200 if ok else 401)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/token"


@pytest.fixture
def endpoint() -> Iterator[TokenEndpoint]:
    served = TokenEndpoint()
    yield served
    served.server.shutdown()
    served.server.server_close()


def test_command_config_with_a_token_endpoint(endpoint):
    security = _security(**{"sasl.login.callback.handler.class": HANDLER,
                            "sasl.oauthbearer.token.endpoint.url": endpoint.url,
                            "sasl.jaas.config": f'{MODULE} required clientId="app" clientSecret="s3 cret:" '
                                                'scope="kafka";'})
    assert security.principal == "app with OAUTHBEARER"
    assert security.sasl_exchange().first() == b"n,,\x01auth=Bearer a.b.c\x01\x01"
    form, authorization = endpoint.requests[0]
    assert form == {"grant_type": "client_credentials", "scope": "kafka"}
    assert authorization == "Basic " + base64.b64encode(b"app:s3%20cret%3A").decode()
    wrong = _security(**{"sasl.login.callback.handler.class": HANDLER,
                         "sasl.oauthbearer.token.endpoint.url": endpoint.url,
                         "sasl.oauthbearer.client.credentials.client.id": "app",
                         "sasl.oauthbearer.client.credentials.client.secret": "wrong"})
    with pytest.raises(ClientConfigError, match="answered 401 Unauthorized: .*invalid_client"):
        wrong.sasl_exchange()


def test_command_config_with_a_token_file(tmp_path):
    (tmp_path / "token").write_text("x.y.z\n")
    security = _security(**{"sasl.login.callback.handler.class": HANDLER,
                            "sasl.oauthbearer.token.endpoint.url": (tmp_path / "token").as_uri(),
                            "sasl.jaas.config": f"{MODULE} required;"})
    assert security.sasl_exchange().first() == b"n,,\x01auth=Bearer x.y.z\x01\x01"


@pytest.mark.parametrize("props, message", [
    ({}, "unsecuredLoginStringClaim_sub is needed"),
    ({"sasl.login.callback.handler.class": HANDLER}, "needs sasl.oauthbearer.token.endpoint.url"),
    ({"sasl.login.callback.handler.class": HANDLER, "sasl.oauthbearer.token.endpoint.url": "http://idp/token"},
     "client credentials are needed"),
    ({"sasl.login.callback.handler.class": "com.example.Login"}, "com.example.Login: trafka's tools log in"),
])
def test_command_config_refused(props, message):
    with pytest.raises(ClientConfigError, match=message):
        _security(**props)


def test_an_unreachable_token_endpoint():
    security = _security(**{"sasl.login.callback.handler.class": HANDLER,
                            "sasl.oauthbearer.token.endpoint.url": "http://127.0.0.1:1/token",
                            "sasl.jaas.config": f'{MODULE} required clientId="a" clientSecret="b";'})
    with pytest.raises(ClientConfigError, match="cannot be reached"):
        security.oauthbearer_token()
