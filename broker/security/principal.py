"""KafkaPrincipal: the identity every authorization and quota decision is about.

Kafka names a principal "<type>:<name>", the type being "User" for every
built-in authentication (TLS subject, SASL user name). A connection that did
not authenticate (PLAINTEXT, or TLS without a client certificate) is
User:ANONYMOUS, as in Kafka.
"""
from __future__ import annotations

from typing import NamedTuple

USER_TYPE = "User"


class KafkaPrincipal(NamedTuple):
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> "KafkaPrincipal":
        """"User:alice" -> KafkaPrincipal("User", "alice"); ValueError without a type."""
        principal_type, sep, name = text.partition(":")
        if not sep or not principal_type:
            raise ValueError(f"a principal is <type>:<name>, e.g. User:alice, not {text!r}")
        return cls(principal_type, name)


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")


def user(name: str) -> KafkaPrincipal:
    return KafkaPrincipal(USER_TYPE, name)
