"""What every SASL mechanism's server side is, and how it fails.

A mechanism server is a small state machine fed the client's tokens one at a
time (Kafka's javax.security.sasl.SaslServer, minus what Kafka never uses).
Two kinds of failure, as in Kafka's SaslServerAuthenticator:

- ``SaslAuthenticationError``: its message is safe to show the client and is
  sent verbatim (e.g. "Authentication failed: Invalid username or password");
- ``SaslError``: the reason stays in the broker's log; the client is told only
  "Authentication failed during authentication due to invalid credentials
  with SASL mechanism <M>", so an unauthenticated peer learns nothing about
  which users exist.
"""
from __future__ import annotations

from typing import Callable, Protocol

from samsa.client.scram_credential import ScramCredential


class SaslError(Exception):
    """Authentication failed; the reason is for the broker's log only."""


class SaslAuthenticationError(SaslError):
    """Authentication failed with a message meant for the client."""


def client_message(mechanism: str, error: SaslError) -> str:
    if isinstance(error, SaslAuthenticationError):
        return str(error)
    return ("Authentication failed during authentication due to invalid credentials "
            f"with SASL mechanism {mechanism}")


class SaslServer(Protocol):
    mechanism: str

    async def evaluate(self, token: bytes) -> bytes:
        """The answer to one client token; raises SaslError on failure."""

    @property
    def complete(self) -> bool:
        """True once the exchange succeeded."""

    @property
    def authorization_id(self) -> str:
        """The authenticated user name (valid once complete)."""


# A user's SCRAM credential for a mechanism, None if it has none (an
# in-memory lookup: credential_cache.ScramCredentialCache.credential).
ScramCredentialLookup = Callable[[str, str], ScramCredential | None]
