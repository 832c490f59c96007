"""Java `.properties` parsing, following java.util.Properties.load.

Kafka reads server.properties with `Properties.load`, so an operator's file may
use any of its features: `#`/`!` comments, `=`, `:` or whitespace separators,
backslash line continuations and escapes.  We follow the Java rules exactly
(including their quirks, e.g. trailing whitespace of a value is kept and a
comment line never continues) so a file means the same thing to both.
"""
from __future__ import annotations

import os
from typing import Iterator

from .errors import ConfigError

_WHITESPACE = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """Yield (line_number, logical_line) with continuations joined.

    A natural line ending in an odd number of backslashes continues onto the
    next one; the backslash and line terminator are dropped and the leading
    whitespace of the continuation line is skipped.  Blank lines and comment
    lines are skipped (only at the start of a logical line: a continuation line
    starting with `#` is part of the value).
    """
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    i = 0
    n = len(lines)
    while i < n:
        start = i
        line = lines[i].lstrip(_WHITESPACE)
        i += 1
        if not line or line[0] in "#!":
            continue
        parts = []
        while True:
            trailing = len(line) - len(line.rstrip("\\"))
            if trailing % 2 == 1:
                parts.append(line[:-1])
                if i >= n:  # backslash at end of input: Java drops it
                    break
                line = lines[i].lstrip(_WHITESPACE)
                i += 1
                continue
            parts.append(line)
            break
        yield start + 1, "".join(parts)


def _unescape(s: str, key_for_errors: str, line_no: int) -> str:
    if "\\" not in s:
        return s
    out = []
    i = 0
    n = len(s)
    while i < n:
        c = s[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        i += 1
        if i >= n:
            break
        c = s[i]
        i += 1
        if c == "u":
            digits = s[i:i + 4]
            if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise ConfigError(
                    key_for_errors, "\\u" + digits, "a \\uXXXX escape with 4 hex digits",
                    message=(f"malformed \\uXXXX escape '\\u{digits}' on line {line_no} "
                             f"(key {key_for_errors!r}): expected 4 hex digits"))
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_ESCAPES.get(c, c))  # any other escaped char stands for itself
    result = "".join(out)
    if any("\ud800" <= ch <= "\udfff" for ch in result):
        # \uXXXX escapes are UTF-16 code units (Java strings): join surrogate pairs.
        result = result.encode("utf-16-be", "surrogatepass").decode("utf-16-be", "surrogatepass")
    return result


def _split_key_value(line: str) -> tuple[str, str]:
    """Split a logical line at the first unescaped `=`, `:` or whitespace."""
    i = 0
    n = len(line)
    while i < n:
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in "=:" or c in _WHITESPACE:
            break
        i += 1
    key = line[:min(i, n)]
    # Skip whitespace, then at most one `=` or `:`, then whitespace again.
    j = i
    while j < n and line[j] in _WHITESPACE:
        j += 1
    if j < n and line[j] in "=:":
        j += 1
        while j < n and line[j] in _WHITESPACE:
            j += 1
    return key, line[j:]


def parse_properties(text: str) -> dict[str, str]:
    """Parse .properties text into an ordered dict (a repeated key: last wins)."""
    result: dict[str, str] = {}
    for line_no, line in _logical_lines(text):
        raw_key, raw_value = _split_key_value(line)
        key = _unescape(raw_key, raw_key, line_no)
        result[key] = _unescape(raw_value, key, line_no)
    return result


def load_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    """Read a .properties file.

    Java reads these as ISO-8859-1; we read UTF-8 (identical for ASCII, and
    what editors write today) and fall back to ISO-8859-1 for old files.
    """
    with open(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("iso-8859-1")
    if text.startswith("\ufeff"):
        text = text[1:]
    return parse_properties(text)


def _escape(s: str, is_key: bool) -> str:
    out = []
    for i, c in enumerate(s):
        if c == "\\":
            out.append("\\\\")
        elif c == "\t":
            out.append("\\t")
        elif c == "\n":
            out.append("\\n")
        elif c == "\r":
            out.append("\\r")
        elif c == "\f":
            out.append("\\f")
        elif c in "=:#!" or (c == " " and (is_key or i == 0)):
            out.append("\\" + c)
        elif ord(c) < 0x20 or ord(c) > 0x7e:
            b = c.encode("utf-16-be", "surrogatepass")  # astral chars: a surrogate pair, as Java
            out.append("".join(f"\\u{int.from_bytes(b[j:j + 2], 'big'):04x}"
                               for j in range(0, len(b), 2)))
        else:
            out.append(c)
    return "".join(out)


def format_properties(props: dict[str, str]) -> str:
    """Render a dict as .properties text that parse_properties (and Java) read back exactly."""
    return "".join(f"{_escape(k, True)}={_escape(v, False)}\n" for k, v in props.items())
