"""SCRAM credentials (RFC 5802) in Kafka's stored form.

A user's entity config holds, per mechanism, the text Kafka's
ScramCredentialUtils writes: ``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=N``.
The password itself is never stored: only what a server needs to check a
client proof (StoredKey) and to prove itself (ServerKey).
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import os
from typing import NamedTuple

# Mechanism -> hash name; Kafka's ScramMechanism with its iteration bounds.
HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# Kafka's ScramMechanism type ids, as AlterUserScramCredentials and
# DescribeUserScramCredentials carry them (0 is UNKNOWN).
MECHANISM_TYPES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
TYPE_OF_MECHANISM = {name: t for t, name in MECHANISM_TYPES.items()}
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384  # what AlterUserScramCredentials accepts (Kafka's maxIterations)


class ScramCredential(NamedTuple):
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_config(self) -> str:
        b64 = base64.b64encode
        return (f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
                f"server_key={b64(self.server_key).decode()},iterations={self.iterations}")

    @classmethod
    def from_config(cls, text: str) -> "ScramCredential":
        """ValueError when the text is not a credential."""
        fields = dict(item.split("=", 1) for item in text.split(",") if "=" in item)
        try:
            return cls(base64.b64decode(fields["salt"], validate=True),
                       base64.b64decode(fields["stored_key"], validate=True),
                       base64.b64decode(fields["server_key"], validate=True),
                       int(fields["iterations"]))
        except (KeyError, ValueError) as e:
            raise ValueError(f"not a SCRAM credential: {e}") from None


def hmac_digest(mechanism: str, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, HASHES[mechanism]).digest()


def digest(mechanism: str, data: bytes) -> bytes:
    return hashlib.new(HASHES[mechanism], data).digest()


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    # Hi() of RFC 5802 is PBKDF2 with HMAC; Kafka applies no SASLprep normalisation.
    return hashlib.pbkdf2_hmac(HASHES[mechanism], password.encode("utf-8"), salt, iterations)


def credential_from_salted(mechanism: str, salted: bytes, salt: bytes,
                           iterations: int) -> ScramCredential:
    client_key = hmac_digest(mechanism, salted, b"Client Key")
    return ScramCredential(salt, digest(mechanism, client_key),
                           hmac_digest(mechanism, salted, b"Server Key"), iterations)


def credential_from_password(mechanism: str, password: str, iterations: int,
                             salt: bytes | None = None) -> ScramCredential:
    salt = salt if salt is not None else os.urandom(32)
    return credential_from_salted(mechanism, salted_password(mechanism, password, salt,
                                                             iterations), salt, iterations)
