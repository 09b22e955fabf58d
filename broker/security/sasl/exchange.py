"""What every SASL mechanism shares: the server side of one exchange, its errors, and the messages Kafka's
broker sends around it.

An exchange is sans-I/O and synchronous: ``respond(token)`` takes the client's next token (the auth_bytes of
a SaslAuthenticate request, or a raw frame for a v0 SaslHandshake client) and returns the server's next
token, until ``complete``. It never blocks and never touches trio; nothing in it costs more than a few
HMACs.

Failures are two exceptions, as Kafka's SaslServerAuthenticator treats them:

- :class:`SaslAuthenticationError`: the client gets SaslAuthenticate with SASL_AUTHENTICATION_FAILED and
  ``error_message = e.message`` (exactly the text Kafka's broker sends), then the connection closes. Where
  Kafka's mechanism fails with a plain SaslException (malformed tokens, unknown users, wrong passwords),
  Kafka hides the reason from the client behind :func:`invalid_credentials_message`; so does ``message``
  here, and the reason is in ``e.detail``, for the broker's log only.
- :class:`IllegalSaslState`: a token the exchange cannot take in its state (after it completed or failed).
  Kafka sends nothing and closes the connection.
"""
from __future__ import annotations

import enum

#: The text after which the principal's type and name follow in Kafka's principals: ``User:alice``.
USER_TYPE = "User"


def user_principal(name: str) -> str:
    """Kafka's principal for a SASL authorization id (DefaultKafkaPrincipalBuilder): ``User:<name>``."""
    return f"{USER_TYPE}:{name}"


def invalid_credentials_message(mechanism: str, reauthenticating: bool = False) -> str:
    """What Kafka's broker tells a client whose mechanism failed without a message meant for clients."""
    during = "re-authentication" if reauthenticating else "authentication"
    return f"Authentication failed during {during} due to invalid credentials with SASL mechanism {mechanism}"


# -- messages of Kafka's broker around the exchange, for the SaslHandshake/SaslAuthenticate handlers -------------

#: SaslAuthenticate on a connection that has authenticated (ILLEGAL_SASL_STATE).
AUTHENTICATE_AFTER_AUTHENTICATION = "SaslAuthenticate request received after successful authentication"


def unsupported_mechanism_message(mechanism: str) -> str:
    """The reason Kafka logs when SaslHandshake names a mechanism the listener does not enable (the response
    carries UNSUPPORTED_SASL_MECHANISM and the enabled mechanisms, no message)."""
    return f"Unsupported SASL mechanism {mechanism}"


def unexpected_request_message(api_name: str, during_handshake: bool) -> str:
    """ILLEGAL_SASL_STATE's message for a request other than ApiVersions/SaslHandshake before the handshake, or
    other than SaslAuthenticate during the exchange. ``api_name`` is Kafka's ApiKeys constant (``METADATA``)."""
    during = "handshake" if during_handshake else "authentication"
    return f"Unexpected Kafka request of type {api_name} during SASL {during}."


def reauthentication_mechanism_changed_message(requested: str, previous: str) -> str:
    return (f"SASL mechanism '{requested}' requested by client is not supported for re-authentication "
            f"of mechanism '{previous}'")


def reauthentication_principal_changed_message(previous: str, current: str) -> str:
    """Kafka's message when re-authentication yields another principal (both ``Type:name``)."""
    def dotted(principal: str) -> str:
        kind, _, name = principal.partition(":")
        return f"{kind}.{name}"
    return f"Cannot change principals during re-authentication from {dotted(previous)}: {dotted(current)}"


# -- errors ----------------------------------------------------------------------------------------------------------

class SaslError(Exception):
    """A failed exchange; ``message`` is what the broker may say about it."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class SaslAuthenticationError(SaslError):
    """SASL_AUTHENTICATION_FAILED with ``message`` as the response's error_message; ``detail`` is the reason
    Kafka logs but keeps from the client (None when ``message`` is the whole story)."""

    def __init__(self, message: str, *, detail: str | None = None) -> None:
        super().__init__(message)
        self.detail = detail

    # str() is ``message`` alone, what may go on the wire; log ``detail`` explicitly.


class IllegalSaslState(SaslError):
    """A token the exchange cannot take in its state; Kafka closes the connection without a response."""


class UnsupportedSaslMechanism(SaslError, ValueError):
    """``new_exchange`` for a mechanism trafka does not implement."""


class Rejected(Exception):
    """Inside a mechanism: Kafka's plain SaslException, whose reason the client does not see."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class State(enum.Enum):
    IN_PROGRESS = "IN_PROGRESS"
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"


class SaslServerExchange:
    """The server side of one SASL exchange on one connection.

    After ``complete``: ``principal`` (``User:<name>``), ``authorization_id`` (the name),
    ``credential_expiration_ms`` (the wall-clock time at which the credential expires: an OAUTHBEARER
    token's ``exp``, a delegation token's expiry; None for passwords) and ``session_lifetime_ms`` (the time
    left until then, measured when the exchange completed; None without an expiring credential). The
    broker bounds the session by the smaller of it and ``connections.max.reauth.ms`` (KIP-368), and answers
    SaslAuthenticate v1+ with that as session_lifetime_ms. ``extensions`` are the SASL extensions the
    mechanism accepted (SCRAM's ``tokenauth``; OAUTHBEARER's validated extensions).
    """

    mechanism: str

    def __init__(self, *, reauthenticating: bool = False) -> None:
        self.reauthenticating = reauthenticating
        self.state = State.IN_PROGRESS
        self.authorization_id: str | None = None
        self.credential_expiration_ms: int | None = None
        self.session_lifetime_ms: int | None = None
        self.extensions: dict[str, str] = {}
        self.token_authenticated = False

    @property
    def complete(self) -> bool:
        return self.state is State.COMPLETE

    @property
    def principal(self) -> str | None:
        return None if self.authorization_id is None else user_principal(self.authorization_id)

    def respond(self, token: bytes) -> bytes:
        """The server's answer to the client's ``token``. Raises SaslAuthenticationError or IllegalSaslState."""
        if self.state is not State.IN_PROGRESS:
            raise IllegalSaslState(f"Unexpected challenge in Sasl server state {self.state.value}")
        try:
            return self._evaluate(bytes(token))
        except Rejected as e:
            self.state = State.FAILED
            raise SaslAuthenticationError(
                invalid_credentials_message(self.mechanism, self.reauthenticating), detail=e.detail,
            ) from None
        except SaslAuthenticationError:
            self.state = State.FAILED
            raise

    def _evaluate(self, token: bytes) -> bytes:
        raise NotImplementedError

    def _succeed(self, authorization_id: str, now_ms: int | None = None) -> None:
        self.authorization_id = authorization_id
        if self.credential_expiration_ms is not None and now_ms is not None:
            self.session_lifetime_ms = max(0, self.credential_expiration_ms - now_ms)
        self.state = State.COMPLETE

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.mechanism} {self.state.value} principal={self.principal!r}>"
