"""The subscribed topic regex (KIP-848): Kafka compiles it with RE2/J and a topic
matches when the whole name matches. RE2 (google-re2) is used here too: it refuses
the constructs RE2/J refuses (lookaround, backreferences, atomic groups, possessive
quantifiers: INVALID_REGULAR_EXPRESSION), and it matches in time linear in the
topic name. Python's backtracking ``re`` would let one heartbeat's ``(.+)+Z`` hold
the coordinator's event loop for minutes against an ordinary long topic name."""
from __future__ import annotations

import functools

import re2

# A refused pattern is the client's error, answered with an error code: not worth a
# line on the broker's stderr (RE2 logs every parse error by default).
_OPTIONS = re2.Options()
_OPTIONS.log_errors = False


class InvalidRegex(ValueError):
    pass


@functools.lru_cache(maxsize=256)
def compile_regex(pattern: str) -> re2._Regexp:
    """The compiled pattern; InvalidRegex when Kafka would refuse it."""
    try:
        return re2.compile(pattern, options=_OPTIONS)
    except re2.error as e:
        message = e.args[0] if e.args else e
        raise InvalidRegex(message.decode() if isinstance(message, bytes) else str(message)) from None


def matches(pattern: str, topic: str) -> bool:
    try:
        return compile_regex(pattern).fullmatch(topic) is not None
    except InvalidRegex:
        return False
