"""Config value types and validators, with Kafka's parsing rules.

Kafka's ConfigDef trims numbers and booleans before parsing, accepts booleans
in any case, and keeps strings verbatim; we do the same so a value that Kafka
accepts is accepted here.  Each validator can describe what it allows: that
text goes into ConfigError so the operator sees the accepted range.
"""
from __future__ import annotations

import enum
import math
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Callable, Sequence

from .errors import ConfigError

INT_MIN, INT_MAX = -(2 ** 31), 2 ** 31 - 1
LONG_MIN, LONG_MAX = -(2 ** 63), 2 ** 63 - 1
SHORT_MIN, SHORT_MAX = -(2 ** 15), 2 ** 15 - 1


class ConfigType(enum.IntEnum):
    """Kafka's config type ids, as sent in DescribeConfigs v3+ (ConfigType)."""
    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


_INT_BOUNDS = {
    ConfigType.INT: (INT_MIN, INT_MAX),
    ConfigType.SHORT: (SHORT_MIN, SHORT_MAX),
    ConfigType.LONG: (LONG_MIN, LONG_MAX),
}
# Java's Integer.parseInt / Long.parseLong: optional sign, ASCII digits only
# (Python's int() would also take '1_000' and non-ASCII digits).
_INTEGER_RE = re.compile(r"[+-]?[0-9]+\Z")
# Java's Double.parseDouble for plain decimal notation (optional d/f suffix).
_DOUBLE_RE = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[dDfF]?\Z")


# ---------------------------------------------------------------- validators

class Validator:
    """Checks a parsed value; `describe()` says what is allowed."""

    def check(self, value: Any) -> bool:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class Range(Validator):
    """Numeric range (Kafka's atLeast / between); None = unbounded."""
    min: float | None = None
    max: float | None = None

    def check(self, value: Any) -> bool:
        if value is None:
            return True
        if isinstance(value, float) and math.isnan(value):
            return False
        return ((self.min is None or value >= self.min)
                and (self.max is None or value <= self.max))

    def describe(self) -> str:
        if self.min is not None and self.max is not None:
            return f"in [{_num(self.min)}, {_num(self.max)}]"
        if self.min is not None:
            return f">= {_num(self.min)}"
        if self.max is not None:
            return f"<= {_num(self.max)}"
        return ""


def at_least(n: float) -> Range:
    return Range(min=n)


def between(lo: float, hi: float) -> Range:
    return Range(min=lo, max=hi)


@dataclass(frozen=True)
class OneOf(Validator):
    """String out of a fixed set (Kafka's ValidString.in; case-sensitive like Kafka)."""
    choices: tuple[str, ...]
    allow_none: bool = False

    def check(self, value: Any) -> bool:
        return (value is None and self.allow_none) or value in self.choices

    def describe(self) -> str:
        return "one of " + ", ".join(self.choices)


@dataclass(frozen=True)
class SubsetOf(Validator):
    """List whose items come from a fixed set (Kafka's ValidList.in)."""
    choices: tuple[str, ...]
    allow_empty: bool = False

    def check(self, value: Any) -> bool:
        if not value:
            return self.allow_empty
        return all(v in self.choices for v in value)

    def describe(self) -> str:
        what = "a comma-separated list" if self.allow_empty else "a non-empty comma-separated list"
        return f"{what} of {', '.join(self.choices)}"


@dataclass(frozen=True)
class Predicate(Validator):
    """Arbitrary check with its own description (listeners, ports ...)."""
    fn: Callable[[Any], bool]
    text: str

    def check(self, value: Any) -> bool:
        return self.fn(value)

    def describe(self) -> str:
        return self.text


def _num(x: float) -> str:
    if isinstance(x, float) and x.is_integer():
        return str(int(x))
    return str(x)


# --------------------------------------------------------------- definitions

@dataclass(frozen=True)
class ConfigKey:
    """One config key: name, type, default (already parsed), validator, doc."""
    name: str
    type: ConfigType
    default: Any
    validator: Validator | None = None
    doc: str = ""
    sensitive: bool = False

    def type_description(self) -> str:
        return _TYPE_TEXT[self.type]

    def allowed(self) -> str:
        """What ConfigError says is allowed for this key."""
        v = self.validator
        if isinstance(v, (OneOf, SubsetOf, Predicate)):
            return v.describe()
        text = self.type_description()
        if v is not None and v.describe():
            text += " " + v.describe()
        return text

    def parse(self, raw: Any) -> Any:
        """Parse a raw (string) value and validate it; ConfigError if bad."""
        value = parse_typed(self.name, self.type, raw, self)
        if self.validator is not None and not self.validator.check(value):
            raise ConfigError(self.name, raw, self.allowed())
        return value


_TYPE_TEXT = {
    ConfigType.BOOLEAN: "true or false",
    ConfigType.STRING: "a string",
    ConfigType.INT: "an integer",
    ConfigType.SHORT: "an integer",
    ConfigType.LONG: "an integer",
    ConfigType.DOUBLE: "a number",
    ConfigType.LIST: "a comma-separated list",
    ConfigType.CLASS: "a class name",
    ConfigType.PASSWORD: "a string",
}


def parse_typed(name: str, type_: ConfigType, raw: Any, key: ConfigKey | None = None) -> Any:
    """Turn a raw string into a typed value as Kafka's ConfigDef.parseType does."""
    if raw is None:
        return None
    if not isinstance(raw, str):  # already typed (defaults, programmatic use)
        return raw
    allowed = key.allowed() if key is not None else _TYPE_TEXT[type_]
    if type_ is ConfigType.BOOLEAN:
        t = raw.strip().lower()
        if t == "true":
            return True
        if t == "false":
            return False
        raise ConfigError(name, raw, "true or false")
    if type_ in _INT_BOUNDS:
        t = raw.strip()
        if not _INTEGER_RE.match(t):
            raise ConfigError(name, raw, allowed)
        n = int(t)
        lo, hi = _INT_BOUNDS[type_]
        if not lo <= n <= hi:
            v = key.validator if key is not None else None
            shown: tuple[float, float] = (lo, hi)
            if isinstance(v, Range):
                shown = (lo if v.min is None else max(lo, v.min), hi if v.max is None else min(hi, v.max))
            raise ConfigError(name, raw, f"an integer in [{_num(shown[0])}, {_num(shown[1])}]")
        return n
    if type_ is ConfigType.DOUBLE:
        t = raw.strip()
        if not _DOUBLE_RE.match(t):
            raise ConfigError(name, raw, allowed)
        return float(t.rstrip("dDfF"))
    if type_ is ConfigType.LIST:
        t = raw.strip()
        if not t:
            return []
        return [item.strip() for item in t.split(",")]
    return raw  # STRING, CLASS, PASSWORD: verbatim, as Kafka keeps them


# ------------------------------------------------------------------ rendering

def render(type_: ConfigType, value: Any) -> str | None:
    """Render a typed value as Kafka does in DescribeConfigs (ConfigDef.convertToString)."""
    if value is None:
        return None
    if type_ is ConfigType.BOOLEAN or isinstance(value, bool):
        return "true" if value else "false"
    if type_ is ConfigType.LIST:
        if isinstance(value, str):
            return value
        return ",".join(str(v) for v in value)
    if type_ is ConfigType.DOUBLE:
        return java_double(float(value))
    return str(value)


def java_double(x: float) -> str:
    """Double.toString: plain decimal in [1e-3, 1e7), else 'd.dddE<n>'."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0 or 1e-3 <= abs(x) < 1e7:
        s = repr(x)
        if "e" in s:
            s = f"{x:f}"
        return s if "." in s else s + ".0"
    d = Decimal(repr(x))  # shortest round-tripping digits, as Java prints
    sign, digits, _ = d.as_tuple()
    ds = "".join(map(str, digits)).rstrip("0") or "0"
    return f"{'-' if sign else ''}{ds[0]}.{ds[1:] or '0'}E{d.adjusted()}"


def split_list(value: str) -> list[str]:
    t = value.strip()
    return [] if not t else [item.strip() for item in t.split(",")]


__all__: Sequence[str] = [
    "ConfigType", "ConfigKey", "Validator", "Range", "OneOf", "SubsetOf", "Predicate",
    "at_least", "between", "parse_typed", "render", "java_double",
    "INT_MAX", "LONG_MAX", "SHORT_MAX",
]
