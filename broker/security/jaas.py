"""Kafka's JAAS configuration: the login module entries SASL listeners read their options from.

Two places, as in Kafka (JaasContext.loadServerContext):

- the setting ``listener.name.<listener>.<mechanism>.sasl.jaas.config`` (listener and mechanism in lower
  case), one entry::

      org.apache.kafka.common.security.plain.PlainLoginModule required
          username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";

  The broker ignores a bare ``sasl.jaas.config`` (with a warning, as Kafka does);
- otherwise a JAAS file (Java's ``-Djava.security.auth.login.config=<file>``), whose section
  ``<listener>.KafkaServer`` or else ``KafkaServer`` holds the entries::

      KafkaServer {
          org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret";
      };

An entry is ``<login module class> <flag> (<name>=<value>)* ;`` read as Kafka reads it (Java's
StreamTokenizer with Kafka's settings): a value is a word (letters, digits, ``_ $ - .``, not starting with a
digit, ``-`` or ``.``) or a quoted string, in double or single quotes, with Java's escapes (``\\"``, ``\\\\``,
``\\n``, ``\\t``, octal ``\\123``; any other escaped character stands for itself); ``//`` and ``/* */`` are
comments, and so is ``/`` to the end of the line, so a path must be quoted. The flag is required, requisite,
sufficient or optional, in any case. A later option of the same name wins. Unlike Kafka, a quoted value
must close on its own line.

Errors are :class:`JaasConfigError`, a ValueError whose message names the setting (or file) and says what
is wrong in Kafka's words, never repeating a value (values are passwords).
"""
from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

logger = logging.getLogger(__name__)

JAAS_CONFIG = "sasl.jaas.config"
#: The Java system property naming a JAAS file; trafka takes the file's path from its own configuration.
LOGIN_CONFIG_PROPERTY = "java.security.auth.login.config"
SERVER_CONTEXT = "KafkaServer"

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
#: The login module Kafka ships for each mechanism trafka serves.
LOGIN_MODULES: Mapping[str, str] = {
    "PLAIN": PLAIN_LOGIN_MODULE,
    "SCRAM-SHA-256": SCRAM_LOGIN_MODULE,
    "SCRAM-SHA-512": SCRAM_LOGIN_MODULE,
    "OAUTHBEARER": OAUTHBEARER_LOGIN_MODULE,
}

FLAGS = ("REQUIRED", "REQUISITE", "SUFFICIENT", "OPTIONAL")


class JaasConfigError(ValueError):
    pass


@dataclass(frozen=True)
class JaasEntry:
    login_module: str
    flag: str                                   # one of FLAGS
    options: Mapping[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:
        # Option values are passwords: only their names are shown.
        return f"JaasEntry({self.login_module!r}, {self.flag!r}, options={sorted(self.options)!r})"


def jaas_config_setting(listener_name: str, mechanism: str) -> str:
    """The broker setting holding a listener's JAAS entry for a mechanism."""
    return f"listener.name.{listener_name.lower()}.{mechanism.lower()}.{JAAS_CONFIG}"


# -- the tokenizer: Java's StreamTokenizer as Kafka's JaasConfig sets it up ------------------------------------------

_WORD, _QUOTED, _NUMBER, _CHAR, _EOF = "word", "quoted", "number", "char", "end"
_ESCAPES = {"a": "\x07", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\x0b"}


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str | None        # the word or the quoted string's content; the character of a _CHAR token
    offset: int

    @property
    def sval(self) -> str | None:
        return self.text if self.kind in (_WORD, _QUOTED) else None

    def is_char(self, c: str) -> bool:
        return self.kind == _CHAR and self.text == c

    def describe(self) -> str:
        if self.kind == _EOF:
            return "the end"
        if self.kind == _NUMBER:
            return "an unquoted number"
        if self.kind == _CHAR:
            return f"'{self.text}'"
        return f"'{self.text}'" if self.kind == _WORD else "a quoted string"


def _is_word_start(c: str, extra: str) -> bool:
    o = ord(c)
    return c.isascii() and c.isalpha() or o >= 160 or c in "_$" or c in extra


def _is_word_part(c: str, extra: str) -> bool:
    return _is_word_start(c, extra) or c in "0123456789.-"


class _Fail(Exception):
    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset


def _tokens(text: str, extra_word_chars: str = "") -> Iterator[_Token]:
    i, n = 0, len(text)
    while True:
        while i < n and ord(text[i]) <= 32:
            i += 1
        if i >= n:
            yield _Token(_EOF, None, n)
            return
        start, c = i, text[i]
        if c in "0123456789.-":
            if c == "-" and (i + 1 >= n or text[i + 1] not in "0123456789."):
                i += 1
                yield _Token(_CHAR, "-", start)
                continue
            i += 1
            seen_dot = c == "."
            while i < n and (text[i].isdigit() and text[i].isascii() or text[i] == "." and not seen_dot):
                seen_dot = seen_dot or text[i] == "."
                i += 1
            yield _Token(_NUMBER, text[start:i], start)
        elif _is_word_start(c, extra_word_chars):
            i += 1
            while i < n and _is_word_part(text[i], extra_word_chars):
                i += 1
            yield _Token(_WORD, text[start:i], start)
        elif c in "\"'":
            i += 1
            out = []
            while True:
                if i >= n or text[i] in "\r\n":
                    raise _Fail("Quoted value not closed on its line in JAAS config", start)
                d = text[i]
                if d == c:
                    i += 1
                    break
                if d == "\\":
                    i += 1
                    if i >= n:
                        raise _Fail("Quoted value not closed on its line in JAAS config", start)
                    e = text[i]
                    if "0" <= e <= "7":
                        value, digits = 0, 0
                        limit = 3 if e <= "3" else 2
                        while digits < limit and i < n and "0" <= text[i] <= "7":
                            value = value * 8 + int(text[i])
                            digits += 1
                            i += 1
                        out.append(chr(value))
                        continue
                    out.append(_ESCAPES.get(e, e))
                    i += 1
                    continue
                out.append(d)
                i += 1
            yield _Token(_QUOTED, "".join(out), start)
        elif c == "/":
            if text.startswith("/*", i):
                end = text.find("*/", i + 2)
                i = n if end < 0 else end + 2
            else:
                # '//', or a lone '/', to the end of the line; as in Java, the character after a lone '/' is
                # part of the comment even when it is the line's end (the next line is then a comment too).
                i += 2
                while i < n and text[i] not in "\r\n":
                    i += 1
        else:
            i += 1
            yield _Token(_CHAR, c, start)


class _Parser:
    def __init__(self, text: str, extra_word_chars: str = "") -> None:
        self._tokens = _tokens(text, extra_word_chars)
        self.token = _Token(_EOF, None, 0)

    def next(self) -> _Token:
        self.token = next(self._tokens)
        return self.token

    def entry(self) -> JaasEntry:
        """One entry, from its first token (the current one) to its semi-colon (the current one after)."""
        first = self.token
        module = first.sval
        if module is None:
            raise _Fail(f"Login module class expected in JAAS config, found {first.describe()}", first.offset)
        t = self.next()
        if t.kind == _EOF:
            raise _Fail("Login module control flag not specified in JAAS config", t.offset)
        if t.sval is None:
            raise _Fail("Login module control flag is not available in the JAAS config", t.offset)
        flag = t.sval.upper()
        if flag not in FLAGS:
            raise _Fail(f"Invalid login module control flag '{t.sval}' in JAAS config", t.offset)
        options: dict[str, str] = {}
        while True:
            t = self.next()
            if t.kind == _EOF or t.is_char(";"):
                break
            key = t.sval
            if key is None:
                raise _Fail(f"Option name expected in JAAS config, found {t.describe()}", t.offset)
            if not self.next().is_char("="):
                raise _Fail(f"Value not specified for key '{key}' in JAAS config", self.token.offset)
            value = self.next()
            if value.sval is None:
                hint = " (quote a value that starts with a digit, '-' or '.')" if value.kind in (_NUMBER, _CHAR) else ""
                raise _Fail(f"Value not specified for key '{key}' in JAAS config{hint}", value.offset)
            options[key] = value.sval
        if not t.is_char(";"):
            raise _Fail("JAAS config entry not terminated by semi-colon", t.offset)
        return JaasEntry(module, flag, options)


def _where(text: str, offset: int) -> str:
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return f"line {line}, column {column}"


def parse_jaas_entries(text: str, *, setting: str = JAAS_CONFIG) -> list[JaasEntry]:
    """Every entry of a ``sasl.jaas.config`` value (at least one)."""
    parser = _Parser(text)
    entries = []
    try:
        while parser.next().kind != _EOF:
            entries.append(parser.entry())
    except _Fail as e:
        raise JaasConfigError(f"Invalid {setting} ({_where(text, e.offset)}): {e.message}") from None
    if not entries:
        raise JaasConfigError(f"Invalid {setting}: Login module not specified in JAAS config")
    return entries


def parse_jaas_config(text: str, *, setting: str = JAAS_CONFIG) -> JaasEntry:
    """The one entry of a ``sasl.jaas.config`` value, as the broker requires."""
    entries = parse_jaas_entries(text, setting=setting)
    if len(entries) != 1:
        raise JaasConfigError(
            f"Invalid {setting}: JAAS config property contains {len(entries)} login modules, should be 1 module")
    return entries[0]


def parse_jaas_file(text: str, *, source: str = "JAAS file") -> dict[str, list[JaasEntry]]:
    """The sections of a JAAS file by name: ``Name { entry; entry; };`` (``*`` is a word character there)."""
    parser = _Parser(text, extra_word_chars="*")
    sections: dict[str, list[JaasEntry]] = {}
    try:
        while (t := parser.next()).kind != _EOF:
            name = t.sval
            if name is None:
                raise _Fail(f"Section name expected, found {t.describe()}", t.offset)
            if name in sections:
                raise _Fail(f"More than one section named '{name}'", t.offset)
            if not parser.next().is_char("{"):
                raise _Fail(f"'{{' expected after '{name}', found {parser.token.describe()}", parser.token.offset)
            entries = []
            while not parser.next().is_char("}"):
                if parser.token.kind == _EOF:
                    raise _Fail(f"Section '{name}' not closed by '}}'", t.offset)
                entries.append(parser.entry())
            if not parser.next().is_char(";"):
                raise _Fail(f"';' expected after the '}}' of section '{name}', found {parser.token.describe()}",
                            parser.token.offset)
            sections[name] = entries
    except _Fail as e:
        raise JaasConfigError(f"Invalid {source} ({_where(text, e.offset)}): {e.message}") from None
    return sections


def load_jaas_file(path: str | Path) -> dict[str, list[JaasEntry]]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise JaasConfigError(f"Cannot read the JAAS file {path} ({LOGIN_CONFIG_PROPERTY}): {e.strerror}") from None
    return parse_jaas_file(text, source=f"JAAS file {path}")


@dataclass(frozen=True)
class ServerJaas:
    """A listener's JAAS entries for one mechanism, and where they came from (a setting, or a file's section)."""
    entries: tuple[JaasEntry, ...]
    source: str


def server_jaas(
    listener_name: str,
    mechanism: str,
    settings: Mapping[str, str],
    login_config: str | Path | None = None,
) -> ServerJaas:
    """The entries a SASL listener gives a mechanism, looked up as Kafka's broker does: the setting
    ``listener.name.<listener>.<mechanism>.sasl.jaas.config``, else the JAAS file ``login_config``'s section
    ``<listener>.KafkaServer``, else its ``KafkaServer``. JaasConfigError when none is there."""
    setting = jaas_config_setting(listener_name, mechanism)
    value = settings.get(setting)
    if value is not None:
        return ServerJaas((parse_jaas_config(value, setting=setting),), setting)
    for unprefixed in (f"listener.name.{listener_name.lower()}.{JAAS_CONFIG}", JAAS_CONFIG):
        if settings.get(unprefixed) is not None:
            logger.warning("Server config %s should be prefixed with SASL mechanism name, ignoring config", unprefixed)
            break
    listener_context = f"{listener_name.lower()}.{SERVER_CONTEXT}"
    sections = load_jaas_file(login_config) if login_config is not None else {}
    for name in (listener_context, SERVER_CONTEXT):
        if name in sections:
            return ServerJaas(tuple(sections[name]), f"section {name} of JAAS file {login_config}")
    raise JaasConfigError(
        f"Could not find a '{SERVER_CONTEXT}' or '{listener_context}' entry in the JAAS configuration. "
        f"System property '{LOGIN_CONFIG_PROPERTY}' is {login_config if login_config is not None else 'not set'}"
        f" (set {setting} for the {mechanism} mechanism of listener {listener_name})")


def option(entries: tuple[JaasEntry, ...] | list[JaasEntry], key: str, login_module: str | None = None) -> str | None:
    """Kafka's JaasContext.configEntryOption: ``key`` from the first entry that has it, among the entries of
    ``login_module`` if one is named."""
    for entry in entries:
        if login_module is not None and entry.login_module != login_module:
            continue
        if key in entry.options:
            return entry.options[key]
    return None
