"""JAAS configuration text, as Kafka reads it for SASL servers.

Two forms carry the same login-module entries:

- the ``sasl.jaas.config`` property value (``listener.name.<l>.<mech>.sasl.jaas.config``):
  ``<LoginModule class> <flag> key="value" ...;`` (Kafka's JaasConfig);
- a JAAS file (``java.security.auth.login.config``) with named sections,
  ``KafkaServer { <entry>; ... };``, ``//`` and ``/* */`` comments.

Parsing is strict: anything that is not exactly that grammar raises
``JaasSyntaxError`` with what was expected, so a typo (a missing ``;`` or
quote) refuses start-up instead of silently dropping users.
"""
from __future__ import annotations

import re
from typing import NamedTuple

FLAGS = ("required", "requisite", "sufficient", "optional")


class JaasSyntaxError(ValueError):
    pass


class LoginModuleEntry(NamedTuple):
    login_module: str
    flag: str
    options: dict[str, str]


# One token: a quoted string (backslash escapes), a punctuation mark, or a bare word.
_TOKEN = re.compile(r'''\s*(?:"((?:[^"\\]|\\.)*)"|([{};=])|([^\s{};="]+))''', re.S)
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


class _Tokens:
    def __init__(self, text: str) -> None:
        self.items: list[tuple[str, str]] = []  # (kind, text): kind is q(uoted), p(unct), w(ord)
        pos = 0
        text = text.rstrip()
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None or m.end() == pos:
                raise JaasSyntaxError(f"unexpected character {text[pos:pos + 1]!r} at {pos}")
            quoted, punct, word = m.groups()
            if quoted is not None:
                self.items.append(("q", re.sub(r"\\(.)", r"\1", quoted)))
            elif punct is not None:
                self.items.append(("p", punct))
            elif word is not None:
                self.items.append(("w", word))
            pos = m.end()
        self.pos = 0

    def peek(self) -> tuple[str, str] | None:
        return self.items[self.pos] if self.pos < len(self.items) else None

    def take(self, what: str) -> tuple[str, str]:
        tok = self.peek()
        if tok is None:
            raise JaasSyntaxError(f"expected {what}, found the end of the text")
        self.pos += 1
        return tok

    def expect_punct(self, mark: str) -> None:
        kind, text = self.take(f"'{mark}'")
        if kind != "p" or text != mark:
            raise JaasSyntaxError(f"expected '{mark}', found {text!r}")


def _entry(tokens: _Tokens) -> LoginModuleEntry:
    kind, module = tokens.take("a login module class name")
    if kind != "w":
        raise JaasSyntaxError(f"expected a login module class name, found {module!r}")
    kind, flag = tokens.take("a control flag")
    if kind != "w" or flag.lower() not in FLAGS:
        raise JaasSyntaxError(f"expected a control flag ({', '.join(FLAGS)}) after {module}, "
                              f"found {flag!r}")
    options: dict[str, str] = {}
    while True:
        kind, text = tokens.take("an option or ';'")
        if kind == "p" and text == ";":
            return LoginModuleEntry(module, flag.lower(), options)
        if kind != "w":
            raise JaasSyntaxError(f"expected an option name or ';', found {text!r}")
        tokens.expect_punct("=")
        vkind, value = tokens.take(f"a value for {text}")
        if vkind == "p":
            raise JaasSyntaxError(f"expected a value for {text}, found {value!r}")
        options[text] = value


def parse_jaas_property(text: str) -> list[LoginModuleEntry]:
    """The entries of a ``sasl.jaas.config`` value (at least one)."""
    tokens = _Tokens(text)
    entries = []
    while tokens.peek() is not None:
        entries.append(_entry(tokens))
    if not entries:
        raise JaasSyntaxError("no login module entry")
    return entries


def parse_jaas_file(text: str) -> dict[str, list[LoginModuleEntry]]:
    """Section name -> entries of a JAAS file."""
    tokens = _Tokens(_COMMENTS.sub(" ", text))
    sections: dict[str, list[LoginModuleEntry]] = {}
    while tokens.peek() is not None:
        kind, name = tokens.take("a section name")
        if kind != "w":
            raise JaasSyntaxError(f"expected a section name, found {name!r}")
        tokens.expect_punct("{")
        entries = []
        while tokens.peek() != ("p", "}"):
            entries.append(_entry(tokens))
        tokens.expect_punct("}")
        tokens.expect_punct(";")
        if name in sections:
            raise JaasSyntaxError(f"section {name} appears twice")
        sections[name] = entries
    return sections
