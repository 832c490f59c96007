"""Short fuzz run: mutated valid frames and random frames must only ever raise
ProtocolError (UnsupportedVersionError is a subclass) -- never anything else,
never hang, never allocate from an untrusted length.  The long run is
bench/fuzz_protocol.py."""
from __future__ import annotations

import random

from samsa.protocol.errors import ProtocolError
from samsa.protocol.messages import API_BY_KEY, decode_request, decode_response
from tests.protocol.test_fuzz_corpus import mutate, random_frame, seed_frames

N_FRAMES = 20_000


def _decode(kind, key, v, frame):
    if kind == "req":
        decode_request(frame)
    else:
        decode_response(frame, key, v)


def test_fuzz_only_protocol_errors_escape():
    rng = random.Random(20261122)
    seeds = seed_frames(rng, per_version=1)
    keys = sorted(API_BY_KEY)
    ok = errors = 0
    for i in range(N_FRAMES):
        if i % 10 == 0:
            kind, key, v, frame = "req", None, None, random_frame(rng, keys)
        else:
            kind, key, v, seed = rng.choice(seeds)
            frame = mutate(seed, rng)
        try:
            _decode(kind, key, v, frame)
            ok += 1
        except ProtocolError:
            errors += 1
    # Both outcomes must actually occur, or the mutator is not exercising anything.
    assert ok > 100 and errors > 100


def test_seeds_decode_cleanly():
    rng = random.Random(1)
    for kind, key, v, frame in seed_frames(rng, per_version=1):
        _decode(kind, key, v, frame)
