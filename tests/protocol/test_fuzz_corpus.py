"""Seed corpus and mutators for fuzzing the message decoders (no tests in here).

Shared by tests/protocol/test_fuzz.py (short run) and bench/fuzz_protocol.py
(the >= 1,000,000 frame run).  Plain ``random`` so the long run is cheap.
"""
from __future__ import annotations

import random
import uuid

from samsa.protocol.messages import API_BY_KEY, RequestHeader, encode_request, encode_response

_INTS = {"int8": 7, "int16": 15, "uint16": 16, "int32": 31, "uint32": 32, "int64": 63}


def _value(f, kind, v, rng, depth):
    if kind in _INTS:
        bits = _INTS[kind]
        if kind.startswith("u"):
            return rng.randrange(0, 2 ** bits)
        return rng.choice([0, -1, 1, rng.randrange(-2 ** bits, 2 ** bits)])
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "float64":
        return rng.uniform(-1e9, 1e9)
    if kind == "uuid":
        return uuid.UUID(int=rng.getrandbits(128))
    if kind == "string":
        return "".join(rng.choice("abcxyz-_.é") for _ in range(rng.randrange(0, 10)))
    if kind in ("bytes", "records"):
        return rng.randbytes(rng.randrange(0, 40))
    raise AssertionError(kind)


def random_struct(spec, v, rng, depth=0):
    kw = {}
    for f in spec.fields:
        if not f.present(v) or rng.random() < 0.2:
            continue
        if f.is_nullable(v) and rng.random() < 0.15:
            kw[f.attr] = None
        elif f.kind == "struct":
            kw[f.attr] = random_struct(f.struct, v, rng, depth + 1)
        elif f.kind == "array":
            n = rng.randrange(0, 4 if depth < 3 else 1)
            if f.elem == "struct":
                kw[f.attr] = [random_struct(f.struct, v, rng, depth + 1) for _ in range(n)]
            else:
                kw[f.attr] = [_value(f, f.elem, v, rng, depth) for _ in range(n)]
        else:
            kw[f.attr] = _value(f, f.kind, v, rng, depth)
    return spec.cls(**kw)


def seed_frames(rng: random.Random, per_version: int = 2):
    """[(kind, api_key, version, frame_without_size)] for every served API/version."""
    seeds = []
    for spec in API_BY_KEY.values():
        for v in range(spec.min_version, spec.max_version + 1):
            for _ in range(per_version):
                req = random_struct(spec.request_cls._message.root, v, rng)
                seeds.append(("req", spec.key, v,
                              encode_request(RequestHeader(spec.key, v, rng.randrange(2**31), "fz"), req)[4:]))
                resp = random_struct(spec.response_cls._message.root, v, rng)
                parts = encode_response(RequestHeader(spec.key, v, rng.randrange(2**31), None), resp)
                seeds.append(("resp", spec.key, v, parts[0][4:]))
    return seeds


_MAGIC = [b"\x00", b"\xff", b"\x7f", b"\x80", b"\xff\xff\xff\xff", b"\x7f\xff\xff\xff",
          b"\x80\x80\x80\x80\x80", b"\xff\xff\xff\xff\x0f", b"\x00\x00\x00\x00"]


def mutate(frame: bytes, rng: random.Random) -> bytes:
    b = bytearray(frame)
    for _ in range(rng.choice((1, 1, 1, 2, 3, 8))):
        op = rng.randrange(8)
        if op == 0 and b:  # flip a bit
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
        elif op == 1 and b:  # random byte
            b[rng.randrange(len(b))] = rng.randrange(256)
        elif op == 2:  # interesting value (lengths, counts, varints)
            i = rng.randrange(len(b) + 1)
            m = rng.choice(_MAGIC)
            b[i:i + len(m)] = m
        elif op == 3 and b:  # truncate
            del b[rng.randrange(len(b)):]
        elif op == 4:  # append garbage
            b += rng.randbytes(rng.randrange(1, 16))
        elif op == 5 and b:  # delete a slice
            i = rng.randrange(len(b))
            del b[i:i + rng.randrange(1, 8)]
        elif op == 6 and b:  # duplicate a slice
            i = rng.randrange(len(b))
            b[i:i] = b[i:i + rng.randrange(1, 16)]
        elif op == 7:  # insert random bytes
            i = rng.randrange(len(b) + 1)
            b[i:i] = rng.randbytes(rng.randrange(1, 8))
    return bytes(b)


def random_frame(rng: random.Random, keys) -> bytes:
    """A well-formed header for a served key/version followed by random bytes."""
    key = rng.choice(keys)
    spec = API_BY_KEY[key]
    v = rng.randrange(spec.min_version, spec.max_version + 1)
    import struct
    return struct.pack(">hhi", key, v, rng.randrange(2**31)) + rng.randbytes(rng.randrange(0, 64))
