"""The SASL mechanisms samsa serves, by name, and how a connection gets a
server for one (one module per mechanism)."""
from __future__ import annotations

from typing import Mapping

from .mechanism import SaslServer, ScramCredentialLookup
from .plain import MECHANISM as PLAIN, PlainServer
from .scram import ScramServer
from samsa.client.sasl import SUPPORTED_MECHANISMS
from samsa.client.scram_credential import HASHES

SCRAM_MECHANISMS = tuple(HASHES)
# The client side (client/sasl.py) names what samsa speaks; the server serves the same.
assert set(SUPPORTED_MECHANISMS) == {PLAIN, *SCRAM_MECHANISMS}


def new_server(mechanism: str, plain_users: Mapping[str, str],
               credentials: ScramCredentialLookup) -> SaslServer:
    if mechanism == PLAIN:
        return PlainServer(plain_users)
    if mechanism in HASHES:
        return ScramServer(mechanism, credentials)
    raise ValueError(f"unsupported SASL mechanism {mechanism}")
