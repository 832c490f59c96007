"""samsa's own SASL client (its tools, brokers logging in to brokers):
what it refuses from a broker that does not play SCRAM straight, and when it
re-authenticates (KIP-368)."""
from __future__ import annotations

import base64
import random

import pytest

from samsa.client.sasl import (ReauthenticationClock, SaslClientError,
                                         SaslClientSettings, authenticate)
from samsa.client.scram_credential import MAX_ITERATIONS, MIN_ITERATIONS

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


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class _Draw(random.Random):
    """A random source that draws ``value`` every time."""

    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = value

    def random(self) -> float:
        return self.value


@pytest.mark.parametrize("draw,after_ms", [(0.0, 8500), (0.5, 9000), (0.999999, 9499)])
def test_reauthentication_comes_due_between_85_and_95_percent_of_the_lifetime(draw, after_ms):
    clock = _Clock()
    session = ReauthenticationClock(now=clock, rng=_Draw(draw))
    session.authenticated(10_000)
    assert session.reauthenticate_after_ms == after_ms
    clock.now += after_ms / 1000 - 0.001
    assert not session.due
    clock.now += 0.001
    assert session.due
    session.authenticated(10_000)  # re-authenticated: the next session's clock starts
    assert not session.due


def test_a_session_without_lifetime_never_comes_due():
    clock = _Clock()
    session = ReauthenticationClock(now=clock)
    assert not session.due  # not authenticated yet
    session.authenticated(0)  # connections.max.reauth.ms=0, or a v0 answer
    clock.now += 10 ** 9
    assert not session.due and session.reauthenticate_after_ms is None
