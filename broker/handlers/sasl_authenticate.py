"""SaslAuthenticate (key 36), versions 0-2.

Carries the SASL exchange that SaslHandshake started, one token each way per request. When the
exchange completes the connection is authenticated as its principal, and v1+ tells the client how long
its session lasts (``connections.max.reauth.ms``, or less if its credential expires sooner; 0: no
limit), after which it must re-authenticate (KIP-368). A failure answers SASL_AUTHENTICATION_FAILED with
Kafka's message, and the connection is closed ``connection.failed.authentication.delay.ms`` later. Sent
with no exchange under way (after authentication, or on a listener without SASL) it is
ILLEGAL_SASL_STATE, as Kafka's request handler answers it.
"""
from __future__ import annotations

import logging

from trafka.broker.handlers.registry import CloseConnection, RequestContext, handles
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import SaslAuthenticateRequest, SaslAuthenticateResponse
from trafka.wire.protocol import ApiKey

log = logging.getLogger(__name__)


@handles(ApiKey.SASL_AUTHENTICATE, 0, 2)
async def handle_sasl_authenticate(ctx: RequestContext, request: SaslAuthenticateRequest) -> SaslAuthenticateResponse:
    # The SASL machinery is loaded with the first SASL listener (never, on a broker without one).
    from trafka.broker.security.sasl import (
        AUTHENTICATE_AFTER_AUTHENTICATION,
        IllegalSaslState,
        SaslAuthenticationError,
        reauthentication_principal_changed_message,
    )

    session = ctx.session
    if session is None or session.exchange is None or session.raw_tokens or session.authenticated:
        return SaslAuthenticateResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE,
                                        error_message=AUTHENTICATE_AFTER_AUTHENTICATION, auth_bytes=b"",
                                        session_lifetime_ms=0)
    exchange = session.exchange
    try:
        token = exchange.respond(bytes(request.auth_bytes))
    except SaslAuthenticationError as exc:
        return _failed(ctx, str(exc), exc.detail)
    except IllegalSaslState as exc:
        raise CloseConnection(f"SASL {session.mechanism}: {exc}") from None
    lifetime = 0
    if exchange.complete:
        principal = exchange.principal
        if session.authentications and principal != session.principal:
            return _failed(ctx, reauthentication_principal_changed_message(session.principal, principal), None)
        lifetime = session.authenticated_as(principal, exchange.session_lifetime_ms)
        session.supports_reauthentication = ctx.api_version >= 1
        log.debug("connection %d from %s on listener %s: authenticated as %s with %s", ctx.connection_id, ctx.peer,
                  ctx.listener, principal, session.mechanism)
        if ctx.broker.metrics is not None:
            ctx.broker.metrics.authentication(ctx.listener, session.mechanism, succeeded=True)
    # ("" rather than null, as Kafka answers: compat_tests/test_differential_security.py compares them)
    return SaslAuthenticateResponse(error_code=ErrorCode.NONE, error_message="", auth_bytes=token,
                                    session_lifetime_ms=lifetime)


def _failed(ctx: RequestContext, message: str, detail: str | None) -> SaslAuthenticateResponse:
    session = ctx.session
    log.info("connection %d from %s on listener %s: SASL %s authentication failed: %s", ctx.connection_id, ctx.peer,
             ctx.listener, session.mechanism, detail or message)
    if ctx.broker.metrics is not None:
        ctx.broker.metrics.authentication(ctx.listener, session.mechanism, succeeded=False)
    session.failed()
    return SaslAuthenticateResponse(error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=message,
                                    auth_bytes=b"", session_lifetime_ms=0)
