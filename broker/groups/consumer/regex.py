"""The subscribed topic regex (KIP-848): Kafka compiles it with RE2/J and a
topic matches when the whole name matches. Python's ``re`` is used, with the
constructs RE2 does not have (lookaround, backreferences, atomic groups,
possessive quantifiers, conditionals) refused, as Kafka refuses them:
INVALID_REGULAR_EXPRESSION."""
from __future__ import annotations

import functools
import re

_UNSUPPORTED_GROUPS = ("(?=", "(?!", "(?<=", "(?<!", "(?>", "(?P=", "(?(")


class InvalidRegex(ValueError):
    pass


def _check_re2(pattern: str) -> None:
    i = 0
    in_class = False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            nxt = pattern[i + 1:i + 2]
            if not in_class and nxt.isdigit() and nxt != "0":
                raise InvalidRegex("backreferences are not supported")
            if nxt == "Z":
                raise InvalidRegex(r"\Z is not supported")
            i += 2
            continue
        if in_class:
            if c == "]":
                in_class = False
        elif c == "[":
            in_class = True
            if pattern[i + 1:i + 2] == "]":
                i += 1
        elif c == "(":
            for construct in _UNSUPPORTED_GROUPS:
                if pattern.startswith(construct, i):
                    raise InvalidRegex(f"{construct} is not supported")
        elif c == "+" and i > 0 and pattern[i - 1] in "*+?}" and \
                (i < 2 or pattern[i - 2] != "\\"):
            raise InvalidRegex("possessive quantifiers are not supported")
        i += 1


@functools.lru_cache(maxsize=256)
def compile_regex(pattern: str) -> re.Pattern[str]:
    """The compiled pattern; InvalidRegex when Kafka would refuse it."""
    _check_re2(pattern)
    try:
        return re.compile(pattern)
    except re.error as e:
        raise InvalidRegex(str(e)) from None


def matches(pattern: str, topic: str) -> bool:
    try:
        return compile_regex(pattern).fullmatch(topic) is not None
    except InvalidRegex:
        return False
