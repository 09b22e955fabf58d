"""The principal of a mutual-TLS client: its certificate's subject, mapped by ``ssl.principal.mapping.rules``.

As Kafka's DefaultKafkaPrincipalBuilder does for SSL listeners: a client that presented a certificate
is ``User:<name>``, where ``<name>`` is the certificate's subject distinguished name as Java's
``X500Principal.getName()`` writes it, passed through the mapping rules; a client that presented none
(``ssl.client.auth`` none, or requested and not given) is ``User:ANONYMOUS``.

The distinguished name is RFC 2253 as Java writes it, so that rules written for Kafka match the same
strings here: the relative names last-to-first, no spaces after commas, the keywords CN, C, L, ST, O, OU,
STREET, DC and UID, every other attribute as its dotted OID with ``#`` and the hex of the value's DER
encoding (``1.2.840.113549.1.9.1=#16...`` for emailAddress), ``+`` between the parts of a multi-valued
name in their encoded order, and a backslash before each of ``, = + < > # ; " \\`` and before leading or
trailing spaces.

The rules (Kafka's syntax, KIP-371): ``DEFAULT`` (the distinguished name as it is) or
``RULE:pattern/replacement/`` with an optional ``L`` or ``U`` after the last slash to lower- or
upper-case the result; a ``/`` or ``\\`` inside the pattern or replacement is escaped with ``\\``. A rule
applies when its pattern matches the whole distinguished name; the name is then the distinguished
name with every match of the pattern replaced (``$1``, ``${name}``; a ``$n`` beyond the pattern's groups
is literal, as Kafka makes it). The first rule that applies wins; when none does, the client is refused
(:class:`NoMatchingRule`). Rules are separated by commas and, unlike Kafka (which silently keeps only
the last of rules separated by line breaks alone), by line breaks too. Patterns are Java regular
expressions as far as Python's ``re`` reads them the same way (named groups ``(?<name>...)`` are
translated; ``\\p{...}`` classes are refused when the rules are read).
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from trafka.broker.security.tls import TlsConfigError

__all__ = ["ANONYMOUS", "NoMatchingRule", "SslPrincipalMapper", "distinguished_name", "principal_name"]

#: The principal of a client that presented no certificate.
ANONYMOUS = "User:ANONYMOUS"
DEFAULT_RULES = "DEFAULT"


class NoMatchingRule(LookupError):
    """No mapping rule applies to a client's distinguished name: the client is refused."""


# -- the rules ------------------------------------------------------------------------------------------

# Kafka's grammar: DEFAULT, or RULE:pattern/replacement/[LU] with \-escapes, or anything else (refused
# when parsed); the splitter takes each rule up to a comma or, here also, a line break.
_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(?:,\s*|\n\s*|$)", re.ASCII)
_PARSER = re.compile(_RULE, re.ASCII)
_BACK_REFERENCE = re.compile(r"\$(\d+)")


@dataclass(frozen=True)
class _Group:
    """A reference to a group of the pattern in a replacement: its number or its name."""

    ref: int | str


@dataclass(frozen=True)
class Rule:
    """One mapping rule: DEFAULT (``pattern`` None) or RULE:pattern/replacement/[LU]."""

    pattern: re.Pattern[str] | None
    replacement: str = ""
    lower: bool = False
    upper: bool = False
    source: str = "DEFAULT"
    parts: tuple[str | _Group, ...] = ()

    def apply(self, distinguished_name: str) -> str | None:
        """The mapped name, or None when this rule does not apply."""
        if self.pattern is None:
            return distinguished_name
        if self.pattern.fullmatch(distinguished_name) is None:
            return None
        result = self.pattern.sub(self._expand, distinguished_name)
        if self.lower:
            return result.lower()
        if self.upper:
            return result.upper()
        return result

    def _expand(self, match: re.Match[str]) -> str:
        return "".join(part if isinstance(part, str) else (match.group(part.ref) or "") for part in self.parts)

    def __str__(self) -> str:
        """As Kafka prints a rule (its pattern and replacement without their escapes undone)."""
        if self.pattern is None:
            return "DEFAULT"
        flag = "/L" if self.lower else "/U" if self.upper else ""
        return f"RULE:{self.source}/{self.replacement}{flag}"


@dataclass(frozen=True)
class SslPrincipalMapper:
    """Parsed ``ssl.principal.mapping.rules``; :meth:`name` maps a distinguished name."""

    rules: tuple[Rule, ...]

    @classmethod
    def from_rules(cls, rules: str | None) -> SslPrincipalMapper:
        """Parse the rules (None: ``DEFAULT``); a wrong rule raises :class:`TlsConfigError` naming it."""
        return _parse(DEFAULT_RULES if rules is None else rules)

    def name(self, distinguished_name: str) -> str:
        """The short name of a distinguished name: the first rule that applies."""
        for rule in self.rules:
            name = rule.apply(distinguished_name)
            if name is not None:
                return name
        raise NoMatchingRule(f"No rules apply to {distinguished_name}, rules {self}")

    def __str__(self) -> str:
        return "[" + ", ".join(str(rule) for rule in self.rules) + "]"


@functools.lru_cache(maxsize=64)
def _parse(text: str) -> SslPrincipalMapper:
    rules = []
    for match in _SPLITTER.finditer(text.strip()):
        rule = match.group(1)
        parsed = _PARSER.match(rule)
        assert parsed is not None  # the last alternative matches anything
        if parsed.end() != len(rule):
            raise TlsConfigError(f"ssl.principal.mapping.rules: Invalid rule: `{rule}`, unmatched substring: "
                                 f"`{rule[parsed.end():]}`")
        if parsed.group(1) is not None:
            rules.append(Rule(None))
        elif parsed.group(2) is not None:
            rules.append(_rule(parsed.group(2), parsed.group(3), parsed.group(4)))
    return SslPrincipalMapper(tuple(rules))


def _rule(source: str, replacement: str, flag: str) -> Rule:
    try:
        pattern = re.compile(_python_regex(source))
    except re.error as e:
        raise TlsConfigError(f"ssl.principal.mapping.rules: Invalid rule: RULE:{source}/{replacement}/{flag}: "
                             f"the pattern is not a regular expression trafka reads ({e})") from None
    parts = _replacement_parts(_escape_literal_back_references(replacement, pattern.groups), pattern, source)
    return Rule(pattern, replacement, flag == "L", flag == "U", source, parts)


def _python_regex(java: str) -> str:
    """A Java pattern in Python's syntax: named groups and their back references; ``\\p{...}`` refused."""
    if re.search(r"(?<!\\)\\[pP]\{", java):
        raise re.error("Unicode classes \\p{...} are not supported")
    python = re.sub(r"\(\?<([A-Za-z][A-Za-z0-9]*)>", r"(?P<\1>", java)
    return re.sub(r"\\k<([A-Za-z][A-Za-z0-9]*)>", r"(?P=\1)", python)


def _escape_literal_back_references(replacement: str, groups: int) -> str:
    """Kafka's treatment of ``$n`` beyond the pattern's groups: the longest leading digits naming a group
    are the reference, and a reference to no group at all becomes a literal ``$`` (Kafka's offsets
    included, which are those of the unescaped text)."""
    if groups == 0:
        return replacement
    value = replacement
    for match in _BACK_REFERENCE.finditer(replacement):
        digits = match.group(1)
        if digits.startswith("0"):
            continue
        index = int(digits)
        while index > groups and index >= 10:
            index //= 10
        if index > groups:
            start = match.start(1)
            value = value[:start - 1] + "\\" + value[start - 1:]
    return value


def _replacement_parts(replacement: str, pattern: re.Pattern[str], source: str) -> tuple[str | _Group, ...]:
    """A replacement as Java's ``Matcher.appendReplacement`` reads it: ``\\x`` is x, ``$n`` (as many digits
    as still name a group) and ``${name}`` are groups. Checked once here, where Kafka fails per client."""
    def invalid(why: str) -> TlsConfigError:
        return TlsConfigError(f"ssl.principal.mapping.rules: Invalid rule: RULE:{source}/{replacement}/: "
                              f"the replacement {why}")

    parts: list[str | _Group] = []
    literal: list[str] = []
    i = 0
    while i < len(replacement):
        char = replacement[i]
        if char == "\\":
            if i + 1 == len(replacement):
                raise invalid("ends with a lone backslash")
            literal.append(replacement[i + 1])
            i += 2
            continue
        if char != "$":
            literal.append(char)
            i += 1
            continue
        i += 1
        if i == len(replacement):
            raise invalid("ends with '$' (a group reference without its group)")
        if replacement[i] == "{":
            end = replacement.find("}", i)
            name = replacement[i + 1:end] if end > 0 else ""
            if end < 0 or not re.fullmatch(r"[A-Za-z][A-Za-z0-9]*", name):
                raise invalid("has a '${' without a group name and '}'")
            if name not in pattern.groupindex:
                raise invalid(f"names a group the pattern does not have: {name}")
            ref: int | str = name
            i = end + 1
        else:
            if not replacement[i].isdigit() or not replacement[i].isascii():
                raise invalid(f"has '$' before {replacement[i]!r} (escape it as \\$)")
            number = int(replacement[i])
            i += 1
            while i < len(replacement) and replacement[i].isascii() and replacement[i].isdigit():
                longer = number * 10 + int(replacement[i])
                if longer > pattern.groups:
                    break
                number = longer
                i += 1
            if number > pattern.groups:
                raise invalid(f"refers to group {number}, but the pattern has {pattern.groups}")
            ref = number
        if literal:
            parts.append("".join(literal))
            literal = []
        parts.append(_Group(ref))
    if literal:
        parts.append("".join(literal))
    return tuple(parts)


# -- the distinguished name ---------------------------------------------------------------------------

#: Java's RFC 2253 keywords; any other attribute is written as its OID.
_KEYWORDS = {
    "2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O", "2.5.4.11": "OU",
    "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC", "0.9.2342.19200300.100.1.1": "UID",
}
#: The value types Java writes as a string (PrintableString, T61String, IA5String, GeneralString,
#: BMPString, UTF8String); any other is written as # and hex.
_STRING_TAGS = {0x13, 0x14, 0x16, 0x1B, 0x1E, 0x0C}
_ESCAPED = frozenset(',=+<>#;"\\')


def distinguished_name(certificate_der: bytes) -> str:
    """The subject of a DER certificate as Java's ``X500Principal.getName()`` writes it."""
    return _rfc2253(_subject(certificate_der))


def principal_name(peer_certificate_der: bytes | None, rules: SslPrincipalMapper | str | None = None) -> str:
    """``User:<name>`` for a client's verified certificate (DER, as ``getpeercert(binary_form=True)``
    gives it), ``User:ANONYMOUS`` for none. ``rules`` is the parsed mapper or the setting's text
    (``DEFAULT`` when None). Raises :class:`NoMatchingRule` when no rule applies."""
    if peer_certificate_der is None:
        return ANONYMOUS
    mapper = rules if isinstance(rules, SslPrincipalMapper) else SslPrincipalMapper.from_rules(rules)
    return "User:" + mapper.name(distinguished_name(peer_certificate_der))


def _read_tlv(data: bytes, offset: int) -> tuple[int, bytes, bytes, int]:
    """One DER element at ``offset``: its tag, its content, its whole encoding, and the offset after it."""
    tag = data[offset]
    length = data[offset + 1]
    start = offset + 2
    if length & 0x80:
        count = length & 0x7F
        if not 1 <= count <= 4:
            raise ValueError("unsupported DER length")
        length = int.from_bytes(data[start:start + count], "big")
        start += count
    end = start + length
    if end > len(data):
        raise ValueError("truncated DER")
    return tag, data[start:end], data[offset:end], end


def _children(content: bytes) -> list[tuple[int, bytes, bytes]]:
    children = []
    offset = 0
    while offset < len(content):
        tag, body, whole, offset = _read_tlv(content, offset)
        children.append((tag, body, whole))
    return children


def _subject(certificate_der: bytes) -> bytes:
    """The content of a certificate's subject Name (a SEQUENCE OF RelativeDistinguishedName)."""
    _, certificate, _, _ = _read_tlv(certificate_der, 0)
    tbs = _children(_children(certificate)[0][1])
    index = 1 if tbs[0][0] == 0xA0 else 0  # an explicit version comes first
    # serialNumber, signature, issuer, validity, subject
    return tbs[index + 4][1]


def _oid(content: bytes) -> str:
    arcs: list[int] = []
    value = 0
    for byte in content:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            arcs.append(value)
            value = 0
    first = min(arcs[0] // 40, 2)
    return ".".join(str(arc) for arc in [first, arcs[0] - 40 * first] + arcs[1:])


def _rfc2253(name: bytes) -> str:
    relative_names = []
    for _, rdn, _ in _children(name):
        assertions = []
        for _, assertion, _ in _children(rdn):
            (_, oid, _), (tag, content, whole) = _children(assertion)[:2]
            assertions.append(_attribute(_oid(oid), tag, content, whole))
        relative_names.append("+".join(assertions))
    return ",".join(reversed(relative_names))


def _attribute(oid: str, tag: int, content: bytes, whole: bytes) -> str:
    keyword = _KEYWORDS.get(oid)
    if keyword is None or tag not in _STRING_TAGS:
        return f"{keyword or oid}=#{whole.hex()}"
    text = content.decode("utf-8", errors="replace")
    escaped = "".join("\\00" if c == "\0" else "\\" + c if c in _ESCAPED else c for c in text)
    # Spaces and carriage returns at either end are escaped one by one.
    lead = len(escaped) - len(escaped.lstrip(" \r"))
    trail = len(escaped) - len(escaped.rstrip(" \r"))
    if lead == len(escaped):
        return f"{keyword}=" + "".join("\\" + c for c in escaped)
    middle = escaped[lead:len(escaped) - trail]
    return (f"{keyword}=" + "".join("\\" + c for c in escaped[:lead]) + middle
            + "".join("\\" + c for c in escaped[len(escaped) - trail:]))
