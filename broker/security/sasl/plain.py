"""SASL/PLAIN (RFC 4616) against the users of the listener's JAAS entry
(``user_<name>="<password>"`` options), as Kafka's PlainSaslServer with its
default PlainServerCallbackHandler."""
from __future__ import annotations

import hmac
from typing import Mapping

from .mechanism import SaslAuthenticationError, SaslError

MECHANISM = "PLAIN"


class PlainServer:
    mechanism = MECHANISM

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self._user: str | None = None

    async def evaluate(self, token: bytes) -> bytes:
        if self._user is not None:
            raise SaslError("PLAIN takes one token")
        # authzid NUL authcid NUL passwd; Kafka splits on NUL and wants exactly 3.
        try:
            parts = bytes(token).decode("utf-8").split("\0")
        except UnicodeDecodeError:
            raise SaslError("Invalid SASL/PLAIN response: not UTF-8") from None
        if len(parts) != 3:
            raise SaslError(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
        authorization_id, username, password = parts
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        expected = self._users.get(username)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authorization_id and authorization_id != username:
            raise SaslAuthenticationError("Authentication failed: Client requested an "
                                          "authorization id that is different from username")
        self._user = username
        return b""

    @property
    def complete(self) -> bool:
        return self._user is not None

    @property
    def authorization_id(self) -> str:
        if self._user is None:
            raise RuntimeError("PLAIN exchange not complete")
        return self._user
