"""Who a connection's client is: its listener's SASL settings, and each connection's authentication state.

A PLAINTEXT or SSL connection is authenticated from the start: ``User:ANONYMOUS``, or on a mutual-TLS
listener the principal its certificate's subject maps to (``trafka.broker.security.principal``). A
SASL_PLAINTEXT or SASL_SSL connection serves nothing but ApiVersions and the SASL APIs until
SaslHandshake has chosen one of the listener's ``sasl.enabled.mechanisms`` and SaslAuthenticate has
carried the exchange (``trafka.broker.security.sasl``) to its end, as Kafka's SaslServerAuthenticator does:

- a request of any other API before that closes the connection (Kafka's IllegalSaslState);
- SaslHandshake v0 asks for Kafka's oldest framing: the exchange's tokens then travel as bare
  size-prefixed frames, without request headers (:attr:`ConnectionSession.raw_tokens`);
- a failed exchange answers SASL_AUTHENTICATION_FAILED with Kafka's message, and the connection is
  closed ``connection.failed.authentication.delay.ms`` later;
- re-authentication (KIP-368): a session lasts ``connections.max.reauth.ms`` at most (less if its
  credential expires sooner), which SaslAuthenticate v1+ tells the client; a client that does not
  authenticate again (SaslHandshake then SaslAuthenticate on the same connection, same principal and
  mechanism) before then has its connection closed at its next request.
"""
from __future__ import annotations

import enum
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from typing import TYPE_CHECKING

from trafka.broker.config import ConfigError, ListenerConfig, listener_settings
from trafka.wire.protocol import ApiKey

if TYPE_CHECKING:  # the SASL machinery is imported when a SASL listener is configured
    from trafka.broker.security.credentials import ScramCredentialStore
    from trafka.broker.security.sasl import SaslServerContext, SaslServerExchange

log = logging.getLogger(__name__)

ANONYMOUS = "User:ANONYMOUS"
#: What a SASL connection may ask before it is authenticated.
_BEFORE_AUTHENTICATION = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})
#: Kafka's JAAS file, named by the JVM's system property (for a server.properties that relies on it).
LOGIN_CONFIG = "java.security.auth.login.config"


@dataclass(frozen=True)
class ListenerSasl:
    """A SASL listener's settings, read once at start."""

    listener: str
    mechanisms: tuple[str, ...]
    context: SaslServerContext
    #: connections.max.reauth.ms (0: sessions do not expire).
    max_reauth_ms: int = 0
    #: connection.failed.authentication.delay.ms.
    failed_authentication_delay_ms: int = 100


def listener_sasl(properties: Mapping[str, str], listener: ListenerConfig,
                  credentials: ScramCredentialStore) -> ListenerSasl:
    """The SASL settings of ``listener`` (``listener.name.<l>.`` prefixed settings over the broker's);
    ConfigError when they cannot be served: a mechanism trafka does not serve (GSSAPI is Kafka's default),
    or PLAIN without its JAAS users."""
    from trafka.broker.security.jaas import JaasConfigError, server_jaas
    from trafka.broker.security.sasl import (
        MECHANISMS,
        OAUTHBEARER,
        PLAIN,
        SaslServerContext,
        UnsecuredValidatorOptions,
    )
    from trafka.broker.security.sasl.plain import users_from_jaas

    settings = {**listener_settings(properties, listener.name, "sasl."),
                **listener_settings(properties, listener.name, "connection")}
    enabled = [m.strip().upper() for m in settings.get("sasl.enabled.mechanisms", "GSSAPI").split(",") if m.strip()]
    unserved = [m for m in enabled if m not in MECHANISMS]
    if unserved or not enabled:
        raise ConfigError(
            f"listener {listener.name}: sasl.enabled.mechanisms={','.join(enabled) or '(none)'}: "
            f"{', '.join(unserved) + ' is' if unserved else 'no mechanism is'} not served; trafka serves "
            f"{', '.join(MECHANISMS)} (set sasl.enabled.mechanisms, or listener.name.{listener.name.lower()}"
            ".sasl.enabled.mechanisms)")
    login_config = properties.get(LOGIN_CONFIG)
    plain_users: dict[str, str] = {}
    oauthbearer = UnsecuredValidatorOptions()
    for mechanism in enabled:
        try:
            jaas = server_jaas(listener.name, mechanism, properties, Path(login_config) if login_config else None)
        except JaasConfigError as exc:
            if mechanism == PLAIN:  # PLAIN's users are its JAAS options: without them nobody logs in
                raise ConfigError(f"listener {listener.name}: {exc}") from None
            continue
        if mechanism == PLAIN:
            plain_users = users_from_jaas(jaas.entries)
        elif mechanism == OAUTHBEARER:
            oauthbearer = UnsecuredValidatorOptions.from_jaas_entries(jaas.entries)
    context = SaslServerContext(plain_users=plain_users, scram_credentials=credentials.get, oauthbearer=oauthbearer)
    return ListenerSasl(
        listener.name, tuple(enabled), context,
        max_reauth_ms=_non_negative(settings, "connections.max.reauth.ms", 0),
        failed_authentication_delay_ms=_non_negative(settings, "connection.failed.authentication.delay.ms", 100),
    )


def _non_negative(settings: Mapping[str, str], name: str, default: int) -> int:
    value = settings.get(name, "").strip()
    if not value:
        return default
    try:
        number = int(value)
    except ValueError:
        raise ConfigError(f"{name}={value!r}: expected an integer") from None
    if number < 0:
        raise ConfigError(f"{name}={value}: must not be negative")
    return number


class AuthState(enum.Enum):
    HANDSHAKE = "waiting for SaslHandshake"
    AUTHENTICATE = "waiting for SaslAuthenticate"
    AUTHENTICATED = "authenticated"
    FAILED = "failed"


@dataclass
class ConnectionSession:
    """One connection's authentication: see the module's docstring."""

    listener: ListenerConfig
    sasl: ListenerSasl | None = None
    principal: str = ANONYMOUS
    state: AuthState = AuthState.AUTHENTICATED
    mechanism: str | None = None
    exchange: SaslServerExchange | None = None
    #: The SaslHandshake version of the exchange under way: 0 means bare token frames.
    handshake_version: int = 1
    #: Whether the client authenticated with SaslAuthenticate v1+, which makes it able to re-authenticate.
    supports_reauthentication: bool = False
    #: When the session ends (time.monotonic() seconds), for KIP-368; None: never.
    expires_at: float | None = None
    authentications: int = field(default=0)

    @classmethod
    def for_listener(cls, listener: ListenerConfig, sasl: ListenerSasl | None,
                     tls_principal: str | None = None) -> ConnectionSession:
        if listener.uses_sasl:
            if sasl is None:
                raise ValueError(f"listener {listener.name} uses SASL but has no SASL settings")
            return cls(listener, sasl, state=AuthState.HANDSHAKE)
        return cls(listener, None, principal=tls_principal or ANONYMOUS)

    @property
    def authenticated(self) -> bool:
        return self.state is AuthState.AUTHENTICATED

    @property
    def answers_refusal(self) -> bool:
        """A refused request gets its error response before the connection closes: during the exchange
        that SaslHandshake v1 started, as Kafka answers it."""
        return self.state is AuthState.AUTHENTICATE and self.handshake_version >= 1

    @property
    def has_failed(self) -> bool:
        """Its authentication failed: the connection closes once the answer is sent."""
        return self.state is AuthState.FAILED

    @property
    def raw_tokens(self) -> bool:
        """The exchange's next token comes as a bare frame (after SaslHandshake v0)."""
        return self.state is AuthState.AUTHENTICATE and self.handshake_version == 0

    def refusal(self, api_key: int) -> str | None:
        """Why a request of ``api_key`` may not be served now (the connection is then closed), or None."""
        if self.state is AuthState.AUTHENTICATED:
            if self.expires_at is not None and time.monotonic() >= self.expires_at and (
                    api_key != ApiKey.SASL_HANDSHAKE):
                return "its SASL session expired (connections.max.reauth.ms) and it did not re-authenticate"
            return None
        if self.state is AuthState.FAILED:
            return "its authentication failed"
        if self.state is AuthState.AUTHENTICATE and api_key != ApiKey.SASL_AUTHENTICATE:
            return f"Unexpected Kafka request of type {_name(api_key)} during SASL authentication."
        if api_key not in _BEFORE_AUTHENTICATION:
            return f"Unexpected Kafka request of type {_name(api_key)} during SASL handshake."
        return None

    def begin(self, mechanism: str, handshake_version: int) -> None:
        """SaslHandshake chose ``mechanism`` (checked by the caller): the exchange starts."""
        from trafka.broker.security.sasl import new_exchange

        assert self.sasl is not None
        reauthenticating = self.state is AuthState.AUTHENTICATED
        self.mechanism = mechanism
        self.handshake_version = handshake_version
        self.exchange = new_exchange(mechanism, self.sasl.context, reauthenticating=reauthenticating)
        self.state = AuthState.AUTHENTICATE

    def authenticated_as(self, principal: str, session_lifetime_ms: int | None) -> int:
        """The exchange is complete: returns the session's lifetime to tell the client (0: unbounded)."""
        assert self.sasl is not None
        self.principal = principal
        self.state = AuthState.AUTHENTICATED
        self.authentications += 1
        lifetimes = [ms for ms in (self.sasl.max_reauth_ms or None, session_lifetime_ms) if ms is not None]
        lifetime = max(min(lifetimes), 0) if lifetimes else 0
        self.expires_at = time.monotonic() + lifetime / 1000 if lifetimes else None
        return lifetime

    def failed(self) -> None:
        self.state = AuthState.FAILED
        self.exchange = None


def _name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return str(api_key)
