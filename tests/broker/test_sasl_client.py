"""samsa's own SASL client (its tools, brokers logging in to brokers):
what it refuses from a broker that does not play SCRAM straight."""
from __future__ import annotations

import base64

import pytest

from broker.security.sasl.client import SaslClientError, SaslClientSettings, authenticate
from broker.security.sasl.scram_credential import MAX_ITERATIONS, MIN_ITERATIONS

SETTINGS = SaslClientSettings("SCRAM-SHA-256", "user", "pencil")


def server_first_with(iterations: int):
    """An exchange whose server first message names ``iterations``; the
    client must never get as far as sending its proof when it refuses."""
    sent = []

    def exchange(token: bytes) -> bytes:
        sent.append(token)
        if len(sent) > 1:
            raise AssertionError(f"client sent a proof for i={iterations}")
        nonce = token.decode().split("r=", 1)[1]
        salt = base64.b64encode(b"salt").decode()
        return f"r={nonce}server,s={salt},i={iterations}".encode()
    return exchange


@pytest.mark.parametrize("iterations", [1, MIN_ITERATIONS - 1, MAX_ITERATIONS + 1])
def test_scram_client_refuses_iterations_out_of_the_mechanism_bounds(iterations):
    with pytest.raises(SaslClientError, match=f"Requested iterations {iterations} is"):
        authenticate(SETTINGS, server_first_with(iterations))


def test_scram_client_takes_the_minimum_iterations():
    # within bounds the client goes on to send its proof (the fake then stops it)
    with pytest.raises(AssertionError, match="client sent a proof"):
        authenticate(SETTINGS, server_first_with(MIN_ITERATIONS))
