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

OAUTHBEARER takes Kafka's unsecured tokens unless the listener names Kafka's validator of signed tokens,
``listener.name.<l>.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.
OAuthBearerValidatorCallbackHandler`` (the only handler class served): its ``sasl.oauthbearer.*`` settings are
read as Kafka's broker hands them to the handler, ``listener.name.<l>.oauthbearer.<setting>`` over
``listener.name.<l>.<setting>`` over ``<setting>``, and its keys come from ``trafka.broker.security.jwks``.
A JWKS URL is fetched before the broker serves (:func:`fetch_verification_keys`) and refreshed by a task of
the broker's (:func:`refresh_verification_keys`).
"""
from __future__ import annotations

import enum
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from typing import TYPE_CHECKING

from trafka.broker.config import LISTENER_PREFIX, ConfigError, ListenerConfig, broker_setting, listener_settings
from trafka.wire.protocol import ApiKey

if TYPE_CHECKING:  # the SASL machinery is imported when a SASL listener is configured
    import trio

    from trafka.broker.security.credentials import ScramCredentialStore
    from trafka.broker.security.jwks import RefreshingJwks
    from trafka.broker.security.sasl import SaslServerContext, SaslServerExchange
    from trafka.broker.security.sasl.oidc import OidcValidator

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
    #: The JWKS URLs whose keys OAUTHBEARER tokens are verified with: fetched at start, then refreshed.
    jwks_refreshers: tuple[RefreshingJwks, ...] = ()


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
    oauthbearer: UnsecuredValidatorOptions | OidcValidator = UnsecuredValidatorOptions()
    refreshers: tuple[RefreshingJwks, ...] = ()
    for mechanism in enabled:
        handler_key = f"{LISTENER_PREFIX}{listener.name.lower()}.{mechanism.lower()}.{_CALLBACK_HANDLER_CLASS}"
        if mechanism != OAUTHBEARER and (properties.get(handler_key) or "").strip():
            raise ConfigError(f"{handler_key}={properties[handler_key].strip()}: not served; trafka validates "
                              f"{mechanism} itself (leave the setting out)")
    if OAUTHBEARER in enabled:
        validator = oidc_validator(properties, listener.name)
        if validator is not None:
            oauthbearer, refreshers = validator
    for mechanism in enabled:
        try:
            jaas = server_jaas(listener.name, mechanism, properties, Path(login_config) if login_config else None)
        except JaasConfigError as exc:
            if mechanism == PLAIN:  # PLAIN's users are its JAAS options: without them nobody logs in
                raise ConfigError(f"listener {listener.name}: {exc}") from None
            continue
        if mechanism == PLAIN:
            plain_users = users_from_jaas(jaas.entries)
        elif mechanism == OAUTHBEARER and isinstance(oauthbearer, UnsecuredValidatorOptions):
            oauthbearer = UnsecuredValidatorOptions.from_jaas_entries(jaas.entries)
        elif mechanism == OAUTHBEARER and len(jaas.entries) != 1:
            raise ConfigError(f"listener {listener.name}: Must supply exactly 1 non-null JAAS mechanism "
                              f"configuration (size was {len(jaas.entries)})")
    context = SaslServerContext(plain_users=plain_users, scram_credentials=credentials.get, oauthbearer=oauthbearer)
    return ListenerSasl(
        listener.name, tuple(enabled), context,
        max_reauth_ms=broker_setting(settings, "connections.max.reauth.ms"),
        failed_authentication_delay_ms=broker_setting(settings, "connection.failed.authentication.delay.ms"),
        jwks_refreshers=refreshers,
    )


#: Kafka's validator of signed OAUTHBEARER tokens, under its name and its older one (Kafka 3.1 to 3.x).
OIDC_VALIDATOR_CLASSES = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",
)
_CALLBACK_HANDLER_CLASS = "sasl.server.callback.handler.class"
#: Kafka 4's validator behind that handler (sasl.oauthbearer.jwt.validator.class), by default and by name.
JWT_VALIDATOR_CLASSES = (
    "org.apache.kafka.common.security.oauthbearer.DefaultJwtValidator",
    "org.apache.kafka.common.security.oauthbearer.BrokerJwtValidator",
)


def oauthbearer_setting(properties: Mapping[str, str], listener: str, name: str) -> str | None:
    """An OAUTHBEARER handler's setting as Kafka's broker hands it over: per listener and mechanism, per
    listener, then for the whole broker."""
    own = f"{LISTENER_PREFIX}{listener.lower()}."
    for key in (f"{own}oauthbearer.{name}", f"{own}{name}", name):
        if key in properties:
            return properties[key]
    return None


def oidc_validator(properties: Mapping[str, str], listener: str
                   ) -> tuple[OidcValidator, tuple[RefreshingJwks, ...]] | None:
    """The listener's validator of signed OAUTHBEARER tokens and the JWKS URL to refresh (if its keys come
    from one), or None when it keeps Kafka's unsecured validator. ConfigError for another handler class or
    settings Kafka refuses; a JWKS file is read here."""
    from trafka.broker.security.jwks import JwksUnavailable, RefreshingJwks, read_jwks_file
    from trafka.broker.security.sasl.oidc import OidcValidator, OidcValidatorSettings

    handler_key = f"{LISTENER_PREFIX}{listener.lower()}.oauthbearer.{_CALLBACK_HANDLER_CLASS}"
    handler = (properties.get(handler_key) or "").strip()
    if not handler:
        return None
    if handler not in OIDC_VALIDATOR_CLASSES:
        raise ConfigError(f"{handler_key}={handler}: not served; trafka serves OAUTHBEARER with Kafka's "
                          f"unsecured validator (leave the setting out) or with {OIDC_VALIDATOR_CLASSES[0]}")

    def setting(name: str, default: str | None = None) -> str | None:
        value = oauthbearer_setting(properties, listener, name)
        return default if value is None else value

    def number(name: str, default: int, minimum: int | None = None) -> int:
        text = (setting(name) or "").strip()
        if not text:
            return default
        try:
            value = int(text)
        except ValueError:
            raise ConfigError(f"listener {listener}: {name}={text!r}: expected an integer") from None
        if minimum is not None and value < minimum:
            raise ConfigError(f"listener {listener}: The OAuth configuration option {name} value must be at "
                              f"least {minimum}")
        return value

    def flag(name: str) -> bool:
        text = (setting(name) or "false").strip().lower()
        if text not in ("true", "false"):
            raise ConfigError(f"listener {listener}: {name}={text!r}: expected true or false")
        return text == "true"

    def claim_name(name: str, default: str) -> str:
        value = setting(name, default)
        assert value is not None
        if not value.strip():
            raise ConfigError(f"listener {listener}: {name} value must "
                              f"{'be non-empty' if not value else 'not contain only whitespace'}")
        return value.strip()

    validator_class = (setting("sasl.oauthbearer.jwt.validator.class") or "").strip()
    if validator_class and validator_class not in JWT_VALIDATOR_CLASSES:
        raise ConfigError(f"listener {listener}: sasl.oauthbearer.jwt.validator.class={validator_class}: not served; "
                          f"trafka serves {JWT_VALIDATOR_CLASSES[0]} (leave the setting out)")
    url_name = "sasl.oauthbearer.jwks.endpoint.url"
    url = (setting(url_name) or "").strip()
    if not url:
        raise ConfigError(
            f'listener {listener}: The OAuth validator for the broker requires "{url_name}" to be configured so '
            f'that JWT signatures can be verified, but it was not set. Set "{url_name}" to the OAuth/OIDC '
            "provider's JWKS endpoint URL for this listener")
    protocol = url.partition(":")[0].lower() if ":" in url else ""
    if protocol not in ("http", "https", "file"):
        raise ConfigError(f"listener {listener}: The OAuth configuration option {url_name} contains a URL ({url}) "
                          f"that contains an invalid protocol ({protocol}); only \"http\", \"https\", and \"file\" "
                          "protocol are supported" if protocol else
                          f"listener {listener}: The OAuth configuration option {url_name} contains a URL ({url}) "
                          "that is malformed: no protocol")
    audience = frozenset(a.strip() for a in (setting("sasl.oauthbearer.expected.audience") or "").split(",")
                         if a.strip())
    issuer = (setting("sasl.oauthbearer.expected.issuer") or "").strip() or None
    unverified_audience = flag("sasl.oauthbearer.allow.unverified.audience")
    for name, unset, claim, value_doc in (
            ("audience", not audience, "audience (\"aud\")", "the audience(s) that identify this cluster"),
            ("issuer", issuer is None, "issuer (\"iss\")",
             "the issuer URL of the OAuth/OIDC provider that signs the tokens")):
        if unset and not flag(f"sasl.oauthbearer.allow.unverified.{name}"):
            expected, allow = f"sasl.oauthbearer.expected.{name}", f"sasl.oauthbearer.allow.unverified.{name}"
            raise ConfigError(
                f'listener {listener}: The OAuth validator for the broker requires "{expected}" to be configured so '
                f"that the token's {claim} claim can be verified, but it was not set. Set \"{expected}\" to "
                f'{value_doc}, or set "{allow}" to true to accept tokens regardless of their {name}.')
    validator_settings = OidcValidatorSettings(
        expected_audience=audience,
        expected_issuer=issuer,
        allow_unverified_audience=unverified_audience,
        clock_skew_seconds=number("sasl.oauthbearer.clock.skew.seconds", 30),
        scope_claim_name=claim_name("sasl.oauthbearer.scope.claim.name", "scope"),
        sub_claim_name=claim_name("sasl.oauthbearer.sub.claim.name", "sub"),
    )
    if protocol == "file":
        try:
            return OidcValidator(validator_settings, read_jwks_file(url)), ()
        except JwksUnavailable as exc:
            raise ConfigError(f"listener {listener}: {exc}") from None
    refresh_ms = number("sasl.oauthbearer.jwks.endpoint.refresh.ms", 3_600_000, minimum=0)
    if refresh_ms == 0:
        raise ConfigError(f"listener {listener}: sasl.oauthbearer.jwks.endpoint.refresh.ms=0: the JWKS URL must be "
                          "refreshed at some interval (milliseconds, more than 0)")
    refresher = RefreshingJwks(
        url, refresh_ms=refresh_ms,
        retry_backoff_ms=number("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", 100),
        retry_backoff_max_ms=number("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", 10_000),
    )
    return OidcValidator(validator_settings, refresher), (refresher,)


async def fetch_verification_keys(settings: Mapping[str, ListenerSasl]) -> None:
    """Fetch the JWKS URL of every listener that validates tokens against one, before the broker serves;
    ConfigError naming the listener and the reason when one cannot be fetched."""
    from trafka.broker.security.jwks import JwksUnavailable

    for listener_sasl_settings in settings.values():
        for refresher in listener_sasl_settings.jwks_refreshers:
            try:
                await refresher.load()
            except JwksUnavailable as exc:
                raise ConfigError(f"listener {listener_sasl_settings.listener}: The OAuth validator configuration "
                                  f"encountered an error when initializing the VerificationKeyResolver: Could not "
                                  f"refresh JWKS: {exc}") from None


def refresh_verification_keys(settings: Mapping[str, ListenerSasl], nursery: trio.Nursery) -> None:
    """Keep every JWKS URL refreshed by a task in ``nursery`` (the broker's)."""
    for listener_sasl_settings in settings.values():
        for refresher in listener_sasl_settings.jwks_refreshers:
            nursery.start_soon(refresher.run)


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
