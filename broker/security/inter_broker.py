"""How this broker connects to the other brokers (replica fetchers,
transaction markers and verification, controlled shutdown): over TLS when the
inter-broker listener is SSL or SASL_SSL, logging in with SASL when it is
SASL_PLAINTEXT or SASL_SSL, as Kafka's brokers do."""
from __future__ import annotations

import dataclasses
import ssl

from samsa.client.sasl import SaslClientSettings


@dataclasses.dataclass(frozen=True)
class InterBrokerSecurity:
    tls: ssl.SSLContext | None = None      # None: plaintext
    sasl: SaslClientSettings | None = None  # None: no SASL login


PLAINTEXT = InterBrokerSecurity()
