"""The client side of SASL/PLAIN and SCRAM, for samsa's own tools and for
brokers logging in to brokers: the connection properties a Kafka client takes
(``security.protocol``, ``sasl.mechanism``, ``sasl.jaas.config`` with username
and password, as in a kafka-*.sh ``--command-config`` file), the token
exchange, and when a connection must re-authenticate (KIP-368)."""
from __future__ import annotations

import base64
import hmac
import random
import secrets
import time
from typing import Awaitable, Callable, Generator, Mapping, NamedTuple

from samsa.client.jaas import JaasSyntaxError, parse_jaas_property
from samsa.client.scram_credential import (HASHES, MAX_ITERATIONS, MIN_ITERATIONS, digest, hmac_digest,
                               salted_password)

# The mechanisms samsa speaks, as a client here and as a server (broker/security/sasl/registry.py)
SUPPORTED_MECHANISMS = ("PLAIN", *HASHES)


class SaslClientError(Exception):
    pass


class SaslClientSettings(NamedTuple):
    mechanism: str
    username: str
    password: str


def sasl_client_settings(props: Mapping[str, str]) -> SaslClientSettings | None:
    """None for PLAINTEXT; ValueError for what samsa's tools cannot do or a
    property that is missing or malformed."""
    protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol in ("PLAINTEXT", "SSL"):  # TLS alone: client/tls.py's client_tls
        return None
    if protocol not in ("SASL_PLAINTEXT", "SASL_SSL"):
        raise ValueError(f"security.protocol={protocol} is not supported by samsa's tools "
                         "(PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)")
    mechanism = props.get("sasl.mechanism", "GSSAPI").strip()
    if mechanism not in SUPPORTED_MECHANISMS:
        raise ValueError(f"sasl.mechanism={mechanism} is not supported "
                         f"({', '.join(SUPPORTED_MECHANISMS)})")
    jaas = props.get("sasl.jaas.config")
    if not jaas:
        raise ValueError("sasl.jaas.config is required for SASL")
    try:
        entries = parse_jaas_property(jaas)
    except JaasSyntaxError as e:
        raise ValueError(f"sasl.jaas.config: {e}") from None
    options = entries[0].options
    if "username" not in options or "password" not in options:
        raise ValueError("sasl.jaas.config needs username=\"...\" and password=\"...\"")
    return SaslClientSettings(mechanism, options["username"], options["password"])


def _steps(settings: SaslClientSettings) -> Generator[bytes, bytes, None]:
    """The mechanism as a generator: yields each token to send, is sent the
    broker's answer to it; raises SaslClientError if the broker's proof is wrong."""
    if settings.mechanism == "PLAIN":
        yield b"\0" + settings.username.encode() + b"\0" + settings.password.encode()
        return
    mechanism = settings.mechanism
    saslname = settings.username.replace("=", "=3D").replace(",", "=2C")
    client_nonce = secrets.token_hex(16)
    client_first_bare = f"n={saslname},r={client_nonce}"
    server_first = (yield ("n,," + client_first_bare).encode()).decode()
    fields = dict(item.split("=", 1) for item in server_first.split(",") if "=" in item)
    nonce, salt, iterations = fields.get("r", ""), fields.get("s", ""), fields.get("i", "")
    if not nonce.startswith(client_nonce) or not salt or not iterations.isdigit():
        raise SaslClientError(f"bad SCRAM server first message: {server_first!r}")
    # Kafka's ScramSaslClient refuses fewer iterations than the mechanism's
    # minimum (a rogue server could get a cheaply crackable proof); too many
    # would have us burn CPU on its say-so, so the mechanism's maximum bounds it.
    if int(iterations) < MIN_ITERATIONS:
        raise SaslClientError(f"Requested iterations {iterations} is less than the minimum "
                              f"{MIN_ITERATIONS} for {mechanism}")
    if int(iterations) > MAX_ITERATIONS:
        raise SaslClientError(f"Requested iterations {iterations} is more than the maximum "
                              f"{MAX_ITERATIONS} for {mechanism}")
    salted = salted_password(mechanism, settings.password, base64.b64decode(salt),
                             int(iterations))
    without_proof = f"c=biws,r={nonce}"
    auth_message = f"{client_first_bare},{server_first},{without_proof}".encode()
    client_key = hmac_digest(mechanism, salted, b"Client Key")
    signature = hmac_digest(mechanism, digest(mechanism, client_key), auth_message)
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature))).decode()
    server_final = (yield f"{without_proof},p={proof}".encode()).decode()
    expected = hmac_digest(mechanism, hmac_digest(mechanism, salted, b"Server Key"),
                           auth_message)
    if not (server_final.startswith("v=") and
            hmac.compare_digest(base64.b64decode(server_final[2:]), expected)):
        raise SaslClientError("the broker's SCRAM signature is wrong")


def authenticate(settings: SaslClientSettings, exchange: Callable[[bytes], bytes]) -> None:
    """Run the mechanism; ``exchange(token)`` sends one token and returns the
    broker's answer (raising on a refusal)."""
    steps = _steps(settings)
    try:
        token = next(steps)
        while True:
            token = steps.send(exchange(token))
    except StopIteration:
        pass


async def authenticate_async(settings: SaslClientSettings,
                             exchange: Callable[[bytes], Awaitable[bytes]]) -> None:
    """``authenticate`` for an asyncio connection (brokers talking to brokers)."""
    steps = _steps(settings)
    try:
        token = next(steps)
        while True:
            token = steps.send(await exchange(token))
    except StopIteration:
        pass


# KIP-368, as Kafka's SaslClientAuthenticator schedules it: re-authenticate at
# a random point between 85% and 95% of the session lifetime the broker gave.
# The 15% left at the least covers the answer's trip and the two clocks'
# drift; the spread keeps a client's many connections (authenticated at the
# same moment) from re-authenticating at the same moment ever after.
REAUTH_AT_LEAST = 0.85
REAUTH_SPREAD = 0.10


class ReauthenticationClock:
    """When one connection must re-authenticate. ``authenticated`` is told
    each (re-)authentication's session lifetime (``session_lifetime_ms`` of
    the last SaslAuthenticate answer; 0, or a v0 answer, means the session
    never ends); ``due`` says whether the next request must wait for a
    re-authentication first."""

    def __init__(self, now: Callable[[], float] = time.monotonic,
                 rng: random.Random | None = None) -> None:
        self._now = now
        self._rng = rng or random.Random()
        self._reauthenticate_at: float | None = None
        self.session_lifetime_ms = 0
        self.reauthenticate_after_ms: int | None = None  # for log lines

    def authenticated(self, session_lifetime_ms: int) -> None:
        self.session_lifetime_ms = session_lifetime_ms
        if session_lifetime_ms <= 0:
            self._reauthenticate_at = self.reauthenticate_after_ms = None
            return
        share = REAUTH_AT_LEAST + self._rng.random() * REAUTH_SPREAD
        self.reauthenticate_after_ms = int(session_lifetime_ms * share)
        self._reauthenticate_at = self._now() + self.reauthenticate_after_ms / 1000

    @property
    def due(self) -> bool:
        return self._reauthenticate_at is not None and self._now() >= self._reauthenticate_at
