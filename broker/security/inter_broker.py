"""How this broker reaches and authenticates to the other brokers of its cluster: the security of the
inter-broker listener (``inter.broker.listener.name``), as Kafka's brokers use it.

- TLS (SSL, SASL_SSL): the listener's ``ssl.*`` settings make the client context (its trust store; its key
  store too, presented when the other brokers require client certificates; ``ssl.endpoint.identification.
  algorithm`` for the host name check).
- SASL (SASL_PLAINTEXT, SASL_SSL): the mechanism ``sasl.mechanism.inter.broker.protocol`` (PLAIN,
  SCRAM-SHA-256 or SCRAM-SHA-512 here), with the ``username`` and ``password`` of the listener's JAAS entry
  for that mechanism (``listener.name.<l>.<mechanism>.sasl.jaas.config``), as Kafka's broker logs in.
"""
from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

from trafka.broker.config import BrokerConfig, ConfigError, listener_settings

#: The mechanisms a broker authenticates to another with (the client half trafka has).
CLIENT_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass(frozen=True)
class PeerSecurity:
    """What a connection to another broker needs: a TLS context and/or SASL credentials."""

    tls: ssl.SSLContext | None = None
    sasl_mechanism: str | None = None
    username: str = ""
    password: str = ""

    def __repr__(self) -> str:
        return f"PeerSecurity(tls={self.tls is not None}, sasl_mechanism={self.sasl_mechanism!r})"


def inter_broker_security(config: BrokerConfig) -> PeerSecurity | None:
    """The security of connections to the other brokers; None over PLAINTEXT. ConfigError when the
    inter-broker listener's settings cannot make it (a mechanism trafka has no client for, missing
    credentials, unusable TLS settings)."""
    listener = config.inter_broker_listener
    if listener.security_protocol == "PLAINTEXT":
        return None
    properties = config.properties
    context = None
    if listener.uses_tls:
        from trafka.broker.security.tls import TlsConfigError, client_context

        try:
            context = client_context(listener_settings(properties, listener.name, "ssl."))
        except TlsConfigError as exc:
            raise ConfigError(f"inter-broker listener {listener.name}: {exc}") from None
    if not listener.uses_sasl:
        return PeerSecurity(tls=context)
    from trafka.broker.security.jaas import JaasConfigError, option, server_jaas

    mechanism = listener_settings(properties, listener.name, "sasl.").get(
        "sasl.mechanism.inter.broker.protocol", "GSSAPI").strip().upper()
    if mechanism not in CLIENT_MECHANISMS:
        raise ConfigError(f"sasl.mechanism.inter.broker.protocol={mechanism}: brokers authenticate to each other "
                          f"with {', '.join(CLIENT_MECHANISMS)} here")
    login_config = properties.get("java.security.auth.login.config")
    try:
        jaas = server_jaas(listener.name, mechanism, properties, Path(login_config) if login_config else None)
    except JaasConfigError as exc:
        raise ConfigError(f"inter-broker listener {listener.name}: {exc}") from None
    username, password = option(jaas.entries, "username"), option(jaas.entries, "password")
    if not username or password is None:
        raise ConfigError(f"inter-broker listener {listener.name}: the JAAS entry for {mechanism} ({jaas.source}) "
                          "needs the username and password this broker logs in to the others with")
    return PeerSecurity(tls=context, sasl_mechanism=mechanism, username=username, password=password)
