"""SASL mechanisms, one module each, as sans-I/O server exchanges: PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, OAUTHBEARER."""
