"""SASL/PLAIN (RFC 4616) as Kafka's PlainSaslServer serves it.

One token, ``[authzid] NUL authcid NUL passwd`` in UTF-8, answered with an empty token. The users and their
passwords are the JAAS options ``user_<name>="<password>"`` of the listener's PlainLoginModule entry
(:func:`users_from_jaas`). The authzid must be empty or the user name itself; the principal is
``User:<name>``. Passwords are compared in constant time (and an unknown user costs the same comparison).

What the client is told (SaslAuthenticate's error_message):

- wrong password or unknown user: ``Authentication failed: Invalid username or password``;
- an authzid other than the user: ``Authentication failed: Client requested an authorization id that is
  different from username``;
- a token that is not three NUL-separated fields: ``Invalid SASL/PLAIN response: expected 3 tokens, got
  <n>`` (as Kafka counts them: at most four, the fourth whatever follows a third NUL);
- an empty user name or password: ``Authentication failed: username not specified`` (``password``).
"""
from __future__ import annotations

import hmac
from collections.abc import Iterable, Mapping

from trafka.broker.security.jaas import PLAIN_LOGIN_MODULE, JaasEntry
from trafka.broker.security.sasl.exchange import SaslAuthenticationError, SaslServerExchange

MECHANISM = "PLAIN"
_USER_PREFIX = "user_"

INVALID_USERNAME_OR_PASSWORD = "Authentication failed: Invalid username or password"
AUTHORIZATION_ID_DIFFERS = "Authentication failed: Client requested an authorization id that is different from username"


def users_from_jaas(entries: Iterable[JaasEntry]) -> dict[str, str]:
    """The ``user_<name>`` options of the PlainLoginModule entries, by user name (the first entry naming a
    user wins, as in Kafka; entries of other login modules are not PLAIN's users)."""
    users: dict[str, str] = {}
    for entry in entries:
        if entry.login_module != PLAIN_LOGIN_MODULE:
            continue
        for key, value in entry.options.items():
            if key.startswith(_USER_PREFIX):
                users.setdefault(key[len(_USER_PREFIX):], value)
    return users


def _split(message: str) -> tuple[str, str, str]:
    # Kafka's split: up to four fields (the fourth, whatever follows a third NUL); three are expected.
    fields = message.split("\0", 3)
    if len(fields) != 3:
        raise SaslAuthenticationError(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(fields)}")
    return fields[0], fields[1], fields[2]


class PlainExchange(SaslServerExchange):
    mechanism = MECHANISM

    def __init__(self, users: Mapping[str, str], *, reauthenticating: bool = False) -> None:
        super().__init__(reauthenticating=reauthenticating)
        self._users = users

    def _evaluate(self, token: bytes) -> bytes:
        authzid, username, password = _split(token.decode("utf-8", errors="replace"))
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        expected = self._users.get(username)
        # The same comparison for an unknown user: its time says nothing about which users exist.
        reference = expected if expected is not None else "\0" + password
        matches = hmac.compare_digest(password.encode("utf-8"), reference.encode("utf-8"))
        if expected is None or not matches:
            raise SaslAuthenticationError(INVALID_USERNAME_OR_PASSWORD)
        if authzid and authzid != username:
            raise SaslAuthenticationError(AUTHORIZATION_ID_DIFFERS)
        self._succeed(username)
        return b""
