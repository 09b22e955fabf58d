"""Security: who a client is, and how that is established (Kafka's listeners and their protocols).

- ``tls``: the TLS contexts of SSL and SASL_SSL listeners and of the broker's own client side, from
  Kafka's ``ssl.*`` settings (PEM files, inline PEM, PKCS12); ``principal``: the principal of a mutual-TLS
  client from its certificate's subject, by ``ssl.principal.mapping.rules``;
- ``sasl``: one module per mechanism (PLAIN, SCRAM-SHA-256/512, OAUTHBEARER), each a sans-I/O exchange;
  ``jaas``: Kafka's JAAS configuration lines; ``credentials``: the SCRAM credential store.
"""
