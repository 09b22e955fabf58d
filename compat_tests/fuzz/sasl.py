"""The SASL_PLAINTEXT listener of the brokers the fuzz corpus is captured from and fuzzed on.

Both brokers serve the same users, so that a golden SaslAuthenticate frame captured from a real client
(a PLAIN token of alice's) authenticates on the broker under fuzzing too:

- PLAIN: the JAAS users ``admin`` and ``alice``;
- SCRAM-SHA-256 and SCRAM-SHA-512: ``bob``, written into the data directory before the broker starts
  (``write_scram_users``);
- OAUTHBEARER: Kafka's unsecured-token validator (any principal with an unsecured token,
  ``unsecured_token``).

``sasl_overrides`` gives the broker's settings for a PLAINTEXT listener and a SASL_PLAINTEXT one (with
advertised addresses of their own where a proxy stands in front of them); ``client_logins`` the logins
each client makes.
"""

from __future__ import annotations

from pathlib import Path

from compat_tests.fuzz.corpus import GoldenFrame
from compat_tests.harness import BIND_HOST
from compat_tests.security import add_scram_users, unsecured_token  # noqa: F401  (unsecured_token: the capture's)

LISTENER = "SASL_PLAINTEXT"
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
PLAIN_USERS = {"admin": "admin-secret", "alice": "alice-secret"}
PLAIN_JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required username=\"admin\" "
              "password=\"admin-secret\" "
              + " ".join(f'user_{user}="{password}"' for user, password in PLAIN_USERS.items()) + ";")
OAUTH_JAAS = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
SCRAM_USERS = {"bob": "bob-secret"}
#: (mechanism, user, password) of the logins a client makes, one per mechanism; the OAUTHBEARER user is
#: the token's subject.
LOGINS = (("PLAIN", "alice", "alice-secret"), ("SCRAM-SHA-256", "bob", "bob-secret"),
          ("SCRAM-SHA-512", "bob", "bob-secret"), ("OAUTHBEARER", "carol", ""))
#: The login of the admin clients that create and delete SCRAM users.
ADMIN_LOGIN = ("PLAIN", "admin", "admin-secret")


def sasl_overrides(plain_port: int, sasl_port: int, *, advertised: tuple[int, int] | None = None) -> dict[str, str]:
    """Broker settings: a PLAINTEXT listener on `plain_port` and a SASL_PLAINTEXT one on `sasl_port`
    (advertised on the ports of `advertised` when given), with the users above."""
    name = LISTENER.lower()
    overrides = {
        "listeners": f"PLAINTEXT://{BIND_HOST}:{plain_port},{LISTENER}://{BIND_HOST}:{sasl_port}",
        f"listener.name.{name}.sasl.enabled.mechanisms": ",".join(MECHANISMS),
        f"listener.name.{name}.plain.sasl.jaas.config": PLAIN_JAAS,
        f"listener.name.{name}.oauthbearer.sasl.jaas.config": OAUTH_JAAS,
    }
    if advertised is not None:
        overrides["advertised.listeners"] = (f"PLAINTEXT://{BIND_HOST}:{advertised[0]},"
                                             f"{LISTENER}://{BIND_HOST}:{advertised[1]}")
    return overrides


def write_scram_users(data_dir: Path, users: dict[str, str] = SCRAM_USERS, iterations: int = 4096) -> None:
    """SCRAM-SHA-256 and SCRAM-SHA-512 credentials of `users` in `data_dir`, where the broker finds them."""
    add_scram_users(data_dir, users, iterations)


def confluent_settings(bootstrap: str, mechanism: str, user: str, password: str) -> dict[str, str]:
    """librdkafka's settings for a SASL_PLAINTEXT login."""
    settings = {"bootstrap.servers": bootstrap, "security.protocol": LISTENER, "sasl.mechanism": mechanism}
    if mechanism == "OAUTHBEARER":
        settings.update({"enable.sasl.oauthbearer.unsecure.jwt": "true",
                         "sasl.oauthbearer.config": f"principal={user}"})
    else:
        settings.update({"sasl.username": user, "sasl.password": password})
    return settings


# --------------------------------------------------------------------------------------- golden SASL frames

def sasl_request(frame: GoldenFrame) -> object | None:
    """The SaslHandshake or SaslAuthenticate request a golden frame holds (None for other APIs, or when it
    does not decode)."""
    if frame.api_key not in (17, 36):
        return None
    from trafka.wire.messages import REQUESTS
    from trafka.wire.protocol import decode_request_header

    try:
        header, body_start = decode_request_header(memoryview(frame.frame))
        return REQUESTS[header.api_key].decode(memoryview(frame.frame)[body_start:], header.api_version, exact=False)
    except Exception:  # noqa: BLE001  (any decoding failure: not a request)
        return None


def token_kind(token: bytes) -> str:
    """The step of an exchange a client's SASL token is: ``plain``, ``scram-first``, ``scram-final-44`` or
    ``scram-final-88`` (the length of its base64 proof: SHA-256 or SHA-512), ``oauthbearer``, ``other``."""
    if token.startswith(b"c=") and b",p=" in token:
        return f"scram-final-{len(token.rpartition(b',p=')[2])}"
    if b"\x01auth=" in token:
        return "oauthbearer"
    if token.startswith((b"n,", b"y,", b"p=")):
        return "scram-first"
    if token.count(b"\0") == 2:
        return "plain"
    return "other"


#: The mechanisms a token of each kind belongs to.
TOKEN_MECHANISMS = {"plain": ("PLAIN",), "scram-first": ("SCRAM-SHA-256", "SCRAM-SHA-512"),
                    "scram-final-44": ("SCRAM-SHA-256",), "scram-final-88": ("SCRAM-SHA-512",),
                    "oauthbearer": ("OAUTHBEARER",), "other": MECHANISMS}


def sasl_kind(frame: GoldenFrame) -> str:
    """What sets a SASL frame apart beyond its API and version: a SaslHandshake's mechanism, the kind of
    token a SaslAuthenticate carries (`token_kind`); "" for other APIs."""
    request = sasl_request(frame)
    if request is None:
        return "" if frame.api_key not in (17, 36) else "undecodable"
    if frame.api_key == 17:
        return str(request.mechanism)
    return token_kind(bytes(request.auth_bytes))
