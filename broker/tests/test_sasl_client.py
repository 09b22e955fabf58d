"""The client's side of SASL (broker.security.sasl.client) against the broker's own server exchanges, and
RFC 7677's SCRAM-SHA-256 example from the client's side."""
from __future__ import annotations

import pytest

from trafka.broker.security.credentials import from_password
from trafka.broker.security.sasl import SaslServerContext, new_exchange
from trafka.broker.security.sasl.client import PlainClient, SaslClientError, ScramClient, client_exchange


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_client_and_server_agree(mechanism):
    credential = from_password(mechanism, "pencil", 4096)
    server = new_exchange(mechanism, SaslServerContext(
        scram_credentials=lambda user, m: credential if (user, m) == ("us,er=", mechanism) else None))
    client = ScramClient(mechanism, "us,er=", "pencil")
    final = client.respond(server.respond(client.first()))
    client.respond(server.respond(final))
    assert server.complete and client.complete and server.principal == "User:us,er="


def test_rfc_7677_example_from_the_clients_side():
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    assert client.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    final = client.respond(b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    assert final == (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    client.respond(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
    assert client.complete


def test_a_server_that_does_not_know_the_credential_is_not_believed():
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce="abc")
    client.respond(b"r=abcdef,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    with pytest.raises(SaslClientError, match="signature does not match"):
        client.respond(b"v=AAAA")
    refused = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce="abc")
    refused.respond(b"r=abcdef,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    with pytest.raises(SaslClientError, match="invalid-proof"):
        refused.respond(b"e=invalid-proof")
    with pytest.raises(SaslClientError, match="not a SCRAM server-first message"):
        ScramClient("SCRAM-SHA-256", "user", "pencil", nonce="abc").respond(b"r=other,s=AA==,i=4096")
    with pytest.raises(SaslClientError, match="Requested iterations 1000 is less than the minimum 4096"):
        ScramClient("SCRAM-SHA-256", "user", "pencil", nonce="abc").respond(b"r=abcdef,s=AA==,i=1000")


def test_plain_and_the_registry():
    server = new_exchange("PLAIN", SaslServerContext(plain_users={"alice": "secret"}))
    client = client_exchange("PLAIN", "alice", "secret")
    assert isinstance(client, PlainClient)
    server.respond(client.first())
    assert server.principal == "User:alice"
    with pytest.raises(ValueError, match="GSSAPI has no client here"):
        client_exchange("GSSAPI", "a", "b")
