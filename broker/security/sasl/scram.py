"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), server side, as
Kafka's ScramSaslServer: two client messages, credentials from the broker's
in-memory cache of the users' entity configs (credential_cache), no channel
binding, only the ``tokenauth`` extension known (and refused here: samsa has
no delegation tokens)."""
from __future__ import annotations

import base64
import binascii
import hmac
import logging
import re
import secrets

from .mechanism import SaslAuthenticationError, SaslError, ScramCredentialLookup
from samsa.client.scram_credential import (HASHES, MIN_ITERATIONS, ScramCredential, digest,
                               hmac_digest)

log = logging.getLogger("broker.sasl")

# The message grammar of Kafka's ScramMessages (RFC 5802 section 7, gs2 header
# without channel binding).
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_VALUE_SAFE = r"[\x01-\x2b\x2d-\x3c\x3e-\x7f]*"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE_SAFE})*"
_BASE64 = r"[A-Za-z0-9+/]*={0,2}"
_CLIENT_FIRST = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,(?P<bare>(?:m={_PRINTABLE},)?n=(?P<saslname>{_SASLNAME}),"
    rf"r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS}))\Z")
_CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS}),"
    rf"p=(?P<proof>{_BASE64})\Z")


def username_of(saslname: str) -> str:
    return saslname.replace("=2C", ",").replace("=3D", "=")


def _extensions(text: str) -> dict[str, str]:
    return dict(item.split("=", 1) for item in text.split(",")[1:]) if text else {}


class ScramServer:
    def __init__(self, mechanism: str, credentials: ScramCredentialLookup) -> None:
        if mechanism not in HASHES:
            raise ValueError(mechanism)
        self.mechanism = mechanism
        self._credentials = credentials
        self._state = "client-first"
        self._user = ""
        self._credential: ScramCredential | None = None
        self._client_first_bare = ""
        self._server_first = ""

    async def evaluate(self, token: bytes) -> bytes:
        try:
            if self._state == "client-first":
                return await self._client_first(bytes(token))
            if self._state == "client-final":
                return self._client_final(bytes(token))
            raise SaslError(f"unexpected SCRAM message in state {self._state}")
        except SaslError:
            self._state = "failed"
            self._credential = None
            raise

    async def _client_first(self, token: bytes) -> bytes:
        m = _CLIENT_FIRST.match(token.decode("utf-8", "replace"))
        if m is None:
            raise SaslError("Invalid SCRAM client first message")
        if _extensions(m["extensions"]).get("tokenauth", "false").lower() == "true":
            raise SaslError("Token Authentication failed: delegation tokens are not supported")
        username = username_of(m["saslname"])
        credential = self._credentials(username, self.mechanism)
        if credential is None:
            raise SaslError("Authentication failed: Invalid user credentials")
        authzid = m["authzid"]
        if authzid and username_of(authzid) != username:
            raise SaslAuthenticationError("Authentication failed: Client requested an "
                                          "authorization id that is different from username")
        if credential.iterations < MIN_ITERATIONS:
            raise SaslError(f"Iterations {credential.iterations} is less than the minimum "
                            f"{MIN_ITERATIONS} for {self.mechanism}")
        nonce = m["nonce"] + secrets.token_urlsafe(24).replace("-", "a").replace("_", "b")
        self._server_first = (f"r={nonce},s={base64.b64encode(credential.salt).decode()},"
                              f"i={credential.iterations}")
        self._client_first_bare = m["bare"]
        self._user = username
        self._credential = credential
        self._state = "client-final"
        return self._server_first.encode()

    def _client_final(self, token: bytes) -> bytes:
        m = _CLIENT_FINAL.match(token.decode("utf-8", "replace"))
        if m is None:
            raise SaslError("Invalid SCRAM client final message")
        if m["nonce"] != self._server_first[2:].split(",", 1)[0]:
            raise SaslError("Invalid client nonce in the final client message.")
        credential = self._credential
        assert credential is not None
        auth_message = ",".join((self._client_first_bare, self._server_first,
                                 m["without_proof"])).encode()
        try:
            proof = base64.b64decode(m["proof"], validate=True)
        except (binascii.Error, ValueError):
            raise SaslError("Invalid client proof") from None
        client_signature = hmac_digest(self.mechanism, credential.stored_key, auth_message)
        if len(proof) != len(client_signature):
            raise SaslError("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature))
        if not hmac.compare_digest(digest(self.mechanism, client_key), credential.stored_key):
            raise SaslError("Invalid client credentials")
        server_signature = hmac_digest(self.mechanism, credential.server_key, auth_message)
        self._credential = None
        self._state = "complete"
        return b"v=" + base64.b64encode(server_signature)

    @property
    def complete(self) -> bool:
        return self._state == "complete"

    @property
    def authorization_id(self) -> str:
        if self._state != "complete":
            raise RuntimeError("SCRAM exchange not complete")
        return self._user
