"""The principal of a TLS client: its certificate's subject, mapped by rules.

Kafka names a TLS client User:<subject distinguished name>, the DN written
as Java's X500Principal.getName() writes it (RFC 2253: the RDNs from the last
to the first, "CN=alice,OU=eng,O=acme,C=US"), then rewritten by
``ssl.principal.mapping.rules``:

    RULE:<java regex>/<replacement>/[L|U], ..., DEFAULT

A rule applies when its pattern matches the whole DN; its replacement
(``$1`` back references) gives the name, lower- or upper-cased with L / U.
The first rule that applies wins; DEFAULT applies always and keeps the DN as
it is. A DN no rule applies to is refused (the connection is closed), as
Kafka refuses it.
"""
from __future__ import annotations

import re
from typing import NamedTuple, Sequence

from samsa.config.errors import ConfigError

# One rule: DEFAULT, or RULE:pattern/replacement/ with an optional L or U flag
# (slashes inside pattern and replacement are escaped with a backslash).
_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(?:,\s*|$)")
_PARSER = re.compile(_RULE)
_BACK_REFERENCE = re.compile(r"\$(\d+)")

# The attribute keywords Java's RFC 2253 form uses; Python's ssl module
# reports attributes by OpenSSL's long names.
_KEYWORDS = {
    "commonName": "CN", "countryName": "C", "localityName": "L",
    "stateOrProvinceName": "ST", "organizationName": "O",
    "organizationalUnitName": "OU", "streetAddress": "STREET",
    "domainComponent": "DC", "userId": "UID",
}
# Attributes without an RFC 2253 keyword: Java writes them as
# <OID>=#<hex of the value's DER encoding>.
_OIDS = {
    "emailAddress": "1.2.840.113549.1.9.1", "serialNumber": "2.5.4.5",
    "title": "2.5.4.12", "givenName": "2.5.4.42", "surname": "2.5.4.4",
    "initials": "2.5.4.43", "pseudonym": "2.5.4.65", "generationQualifier": "2.5.4.44",
    "dnQualifier": "2.5.4.46", "postalCode": "2.5.4.17", "businessCategory": "2.5.4.15",
}


class MappingRule(NamedTuple):
    pattern: re.Pattern | None  # None: DEFAULT
    replacement: str
    case: str  # "", "L" or "U"

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        name = self.pattern.sub(_python_replacement(self.replacement, self.pattern.groups), dn)
        if self.case == "L":
            return name.lower()
        if self.case == "U":
            return name.upper()
        return name


class NoMatchingRule(Exception):
    """No rule of ssl.principal.mapping.rules applies to a DN."""


def _python_replacement(java: str, groups: int) -> str:
    """A Java replacement string ("$1@$2", backslash escapes) for re.sub.

    A back reference to a group the pattern does not have is kept literally
    (Kafka does the same, shortening $12 to $1 when there are fewer than 12
    groups)."""
    out: list[str] = []
    i = 0
    while i < len(java):
        c = java[i]
        if c == "\\" and i + 1 < len(java):
            out.append(java[i + 1].replace("\\", "\\\\"))
            i += 2
            continue
        m = _BACK_REFERENCE.match(java, i)
        if m is not None:
            digits = m.group(1)
            # Java takes as many digits as still name an existing group.
            n = len(digits)
            while n > 1 and int(digits[:n]) > groups:
                n -= 1
            index = int(digits[:n])
            if index <= groups:
                out.append(f"\\g<{index}>" + digits[n:])
            else:
                out.append("$" + digits)
            i = m.end()
            continue
        out.append("\\\\" if c == "\\" else c)
        i += 1
    return "".join(out)


def parse_rules(text: str, key: str = "ssl.principal.mapping.rules") -> list[MappingRule]:
    """Kafka's rule list; a malformed rule or pattern is a ConfigError naming ``key``."""
    rules: list[MappingRule] = []
    for m in _SPLITTER.finditer(text.strip()):
        rule = m.group(1)
        if not rule and m.start() == m.end():
            break
        p = _PARSER.match(rule)
        if p is None or p.end() != len(rule):
            raise ConfigError(key, text, "RULE:pattern/replacement/[LU] or DEFAULT, comma-separated",
                              message=f"invalid rule {rule!r} in {key}")
        if p.group(1):
            rules.append(MappingRule(None, "", ""))
        elif p.group(2) is not None:
            try:
                pattern = re.compile(p.group(2))
            except re.error as e:
                raise ConfigError(key, text, "rules whose patterns are regular expressions",
                                  message=f"invalid pattern {p.group(2)!r} in {key}: {e}") from None
            rules.append(MappingRule(pattern, p.group(3), p.group(4)))
        elif rule:
            raise ConfigError(key, text, "RULE:pattern/replacement/[LU] or DEFAULT, comma-separated",
                              message=f"invalid rule {rule!r} in {key}")
    return rules


class SslPrincipalMapper:
    """``ssl.principal.mapping.rules`` applied to subject DNs."""

    def __init__(self, rules_text: str = "DEFAULT",
                 key: str = "ssl.principal.mapping.rules") -> None:
        self.rules: Sequence[MappingRule] = parse_rules(rules_text or "DEFAULT", key)

    def name(self, dn: str) -> str:
        for rule in self.rules:
            found = rule.apply(dn)
            if found is not None:
                return found
        raise NoMatchingRule(f"no rule of ssl.principal.mapping.rules applies to {dn!r}")


def _escape(value: str) -> str:
    """An attribute value as RFC 2253 escapes it."""
    out = []
    for i, ch in enumerate(value):
        if ch in ',+"\\<>;' or (ch == "#" and i == 0) or (ch == " " and i in (0, len(value) - 1)):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


# The string type such a value has in a certificate: PKCS#9 makes
# emailAddress an IA5String, X.520 serialNumber and dnQualifier
# PrintableStrings; the rest OpenSSL (and most CAs) write as UTF8String.
_DER_TAGS = {"emailAddress": 0x16, "serialNumber": 0x13, "dnQualifier": 0x13}


def _der_hex(name: str, value: str) -> str:
    data = value.encode("utf-8")
    n = len(data)
    length = bytes([n]) if n < 0x80 else (
        bytes([0x80 | ((n.bit_length() + 7) // 8)]) + n.to_bytes((n.bit_length() + 7) // 8, "big"))
    return "#" + (bytes([_DER_TAGS.get(name, 0x0C)]) + length + data).hex()


def subject_dn(subject: Sequence[Sequence[tuple[str, str]]]) -> str:
    """The RFC 2253 DN of a certificate subject as ``ssl.SSLObject.getpeercert()``
    returns it (RDNs in certificate order, each a tuple of (long name, value)),
    written as Java's X500Principal writes it."""
    rdns = []
    for rdn in reversed(subject):
        parts = []
        for name, value in rdn:
            keyword = _KEYWORDS.get(name)
            if keyword is not None:
                parts.append(f"{keyword}={_escape(value)}")
            else:
                oid = _OIDS.get(name) or name  # unknown attributes arrive as dotted OIDs
                parts.append(f"{oid}={_der_hex(name, value)}")
        rdns.append("+".join(parts))
    return ",".join(rdns)
