"""Certificates made on the spot: the test kit's (samsa.testing.certs)."""
from samsa.testing.certs import CLIENT_SUBJECT, Certs, make_certs

__all__ = ["CLIENT_SUBJECT", "Certs", "make_certs"]
