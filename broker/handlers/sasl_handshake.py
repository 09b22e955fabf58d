"""SaslHandshake (key 17), versions 0-1.

On a SASL listener, before authentication (or to re-authenticate, KIP-368), the client names its
mechanism: NONE and the listener's enabled mechanisms when it is one of them, and the exchange starts
(SaslAuthenticate carries it; after v0, bare token frames do); UNSUPPORTED_SASL_MECHANISM with the enabled
mechanisms otherwise, and the connection is closed. Anywhere else (a listener without SASL, or a client
that cannot re-authenticate) the answer is ILLEGAL_SASL_STATE, as Kafka's request handler gives it.
See ``trafka.broker.security.authentication``.
"""
from __future__ import annotations

import logging

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import SaslHandshakeRequest, SaslHandshakeResponse
from trafka.wire.protocol import ApiKey

log = logging.getLogger(__name__)


@handles(ApiKey.SASL_HANDSHAKE, 0, 1)
async def handle_sasl_handshake(ctx: RequestContext, request: SaslHandshakeRequest) -> SaslHandshakeResponse:
    session = ctx.session
    exchange_under_way = session is not None and session.exchange is not None and not session.authenticated
    if session is None or session.sasl is None or exchange_under_way or (
            session.authenticated and not session.supports_reauthentication):
        return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
    enabled = list(session.sasl.mechanisms)
    mechanism = request.mechanism
    if mechanism not in enabled or (session.authenticated and mechanism != session.mechanism):
        log.info("connection %d from %s on listener %s: SASL mechanism %s refused (enabled: %s)", ctx.connection_id,
                 ctx.peer, ctx.listener, mechanism, ", ".join(enabled))
        session.failed()
        return SaslHandshakeResponse(error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled)
    session.begin(mechanism, ctx.api_version)
    return SaslHandshakeResponse(error_code=ErrorCode.NONE, mechanisms=enabled)
