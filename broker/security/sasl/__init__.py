"""SASL mechanisms as sans-I/O server exchanges, the way Kafka's broker authenticates SASL_PLAINTEXT and
SASL_SSL clients: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER (with Kafka's unsecured-token
validator, or its validator of signed tokens against a JWKS).

The SaslHandshake/SaslAuthenticate handlers drive one exchange per connection::

    exchange = new_exchange(mechanism, context)          # after SaslHandshake chose the mechanism
    try:
        server_token = exchange.respond(client_token)    # per SaslAuthenticate (or raw v0 frame)
    except SaslAuthenticationError as e:                  # SASL_AUTHENTICATION_FAILED, e.message, then close
        ...
    except IllegalSaslState:                              # Kafka closes without a response
        ...
    if exchange.complete:
        exchange.principal                                # "User:alice"
        exchange.session_lifetime_ms                      # None, or the credential's time left (KIP-368)

Everything here is synchronous and cheap (no PBKDF2 at authentication time: SCRAM stores derived keys), so
exchanges may run on the event loop. The pieces:

- ``exchange``: the exchange's interface, its errors and Kafka's messages around it;
- ``plain``, ``scram``, ``oauthbearer``: one module per mechanism, each saying what the client is told when;
- :class:`SaslServerContext` and :func:`new_exchange` here: what each mechanism needs from the listener
  (PLAIN: the JAAS users; SCRAM: a credential lookup, and a delegation token lookup; OAUTHBEARER: the
  validator — the unsecured one's options, or ``oidc.OidcValidator`` with its settings and keys — and a clock).

The JAAS configuration is read by ``trafka.broker.security.jaas``; SCRAM credentials are kept by
``trafka.broker.security.credentials``.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from trafka.broker.security.credentials import DelegationTokenCredential, ScramCredential
from trafka.broker.security.sasl.exchange import (
    AUTHENTICATE_AFTER_AUTHENTICATION,
    IllegalSaslState,
    SaslAuthenticationError,
    SaslError,
    SaslServerExchange,
    UnsupportedSaslMechanism,
    invalid_credentials_message,
    reauthentication_mechanism_changed_message,
    reauthentication_principal_changed_message,
    unexpected_request_message,
    unsupported_mechanism_message,
    user_principal,
)
from trafka.broker.security.sasl.oauthbearer import OAuthBearerExchange, UnsecuredValidatorOptions
from trafka.broker.security.sasl.oidc import OidcValidator
from trafka.broker.security.sasl.plain import PlainExchange
from trafka.broker.security.sasl.scram import ScramExchange, random_nonce

PLAIN = "PLAIN"
SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
OAUTHBEARER = "OAUTHBEARER"
#: The mechanisms trafka serves (Kafka's GSSAPI is not among them).
MECHANISMS: tuple[str, ...] = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512, OAUTHBEARER)

__all__ = [
    "AUTHENTICATE_AFTER_AUTHENTICATION", "MECHANISMS", "OAUTHBEARER", "PLAIN", "SCRAM_SHA_256", "SCRAM_SHA_512",
    "IllegalSaslState", "OidcValidator", "SaslAuthenticationError", "SaslError", "SaslServerContext", "SaslServerExchange",
    "UnsecuredValidatorOptions", "UnsupportedSaslMechanism", "invalid_credentials_message", "new_exchange",
    "reauthentication_mechanism_changed_message", "reauthentication_principal_changed_message",
    "unexpected_request_message", "unsupported_mechanism_message", "user_principal",
]


def _no_credential(user: str, mechanism: str) -> ScramCredential | None:
    return None


def _no_token(token_id: str, mechanism: str) -> DelegationTokenCredential | None:
    return None


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class SaslServerContext:
    """What a listener gives its exchanges; every field has a default that authenticates nobody (but
    OAUTHBEARER's defaults, which are Kafka's: ``sub``, ``scope``, no required scope, no skew)."""
    #: PLAIN: user name -> password, from the JAAS ``user_<name>`` options (plain.users_from_jaas).
    plain_users: Mapping[str, str] = field(default_factory=dict)
    #: SCRAM: (user, mechanism) -> credential or None (ScramCredentialStore.get).
    scram_credentials: Callable[[str, str], ScramCredential | None] = _no_credential
    #: SCRAM with ``tokenauth=true``: (token id, mechanism) -> the token's credential, owner and expiry.
    delegation_tokens: Callable[[str, str], DelegationTokenCredential | None] = _no_token
    #: OAUTHBEARER: the unsecured validator's JAAS options (UnsecuredValidatorOptions.from_jaas_entries), or
    #: the validator of signed tokens (OAuthBearerValidatorCallbackHandler).
    oauthbearer: UnsecuredValidatorOptions | OidcValidator = field(default_factory=UnsecuredValidatorOptions)
    #: Wall-clock milliseconds: token expiry checks and session lifetimes.
    clock_ms: Callable[[], int] = _wall_clock_ms
    #: SCRAM's server nonce (tests fix it).
    scram_nonce: Callable[[], str] = random_nonce


def new_exchange(mechanism: str, context: SaslServerContext, *, reauthenticating: bool = False) -> SaslServerExchange:
    """A fresh server exchange for ``mechanism`` (a name of :data:`MECHANISMS`, as SaslHandshake carries it).
    ``reauthenticating`` (KIP-368) only changes the wording of Kafka's invalid-credentials message.
    UnsupportedSaslMechanism for any other name."""
    if mechanism == PLAIN:
        return PlainExchange(context.plain_users, reauthenticating=reauthenticating)
    if mechanism in (SCRAM_SHA_256, SCRAM_SHA_512):
        return ScramExchange(
            mechanism, context.scram_credentials, delegation_tokens=context.delegation_tokens,
            nonce=context.scram_nonce, clock_ms=context.clock_ms, reauthenticating=reauthenticating,
        )
    if mechanism == OAUTHBEARER:
        return OAuthBearerExchange(context.oauthbearer, clock_ms=context.clock_ms, reauthenticating=reauthenticating)
    raise UnsupportedSaslMechanism(unsupported_mechanism_message(mechanism))
