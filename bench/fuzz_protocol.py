"""Long fuzz run of the message decoders (not a test).

Feeds >= 1,000,000 frames -- valid frames of every served API/version mutated
(bit flips, interesting lengths/varints, truncation, insertion, deletion,
duplication) plus random bodies behind valid headers -- to decode_request /
decode_response and checks that nothing but ProtocolError escapes.  Prints the
frame count, seconds, outcome counts and peak RSS (resource.getrusage).

    python bench/fuzz_protocol.py [frames] [seed]
"""
from __future__ import annotations

import os
import random
import resource
import sys
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from samsa.protocol.errors import ProtocolError
from samsa.protocol.messages import API_BY_KEY, decode_request, decode_response
from tests.protocol.test_fuzz_corpus import mutate, random_frame, seed_frames


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 1122
    rng = random.Random(seed)
    seeds = seed_frames(rng, per_version=3)
    keys = sorted(API_BY_KEY)
    ok = perr = 0
    bad = []
    t0 = time.perf_counter()
    for i in range(n):
        if i % 10 == 0:
            kind, key, v, frame = "req", None, None, random_frame(rng, keys)
        else:
            kind, key, v, s = rng.choice(seeds)
            frame = mutate(s, rng)
        try:
            if kind == "req":
                decode_request(frame)
            else:
                decode_response(frame, key, v)
            ok += 1
        except ProtocolError:
            perr += 1
        except Exception:  # the bug we are looking for
            bad.append((kind, key, v, frame.hex(), traceback.format_exc()))
    secs = time.perf_counter() - t0
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"frames={n} seeds={len(seeds)} seconds={secs:.1f} rate={n / secs:,.0f}/s")
    print(f"decoded_ok={ok} protocol_errors={perr} other_exceptions={len(bad)}")
    print(f"peak_rss={rss_mib:.1f} MiB")
    for b in bad[:5]:
        print(b[:4])
        print(b[4])
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
