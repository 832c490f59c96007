"""Who a connection is and what it may do: listeners' security protocols, TLS,
SASL, ACLs and quotas, with Kafka's keys and semantics (issue 16)."""
