"""The client side's security settings for trafka's tools, as Kafka's tools take them: ``--command-config FILE``,
a client properties file with the Java client's names.

    security.protocol=SASL_SSL
    sasl.mechanism=SCRAM-SHA-512
    sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\
        username="alice" password="alice-secret";
    ssl.truststore.type=PEM
    ssl.truststore.location=/path/to/ca-cert.pem

- ``security.protocol``: PLAINTEXT (the default), SSL, SASL_PLAINTEXT or SASL_SSL;
- ``sasl.mechanism``: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER (the exchanges of
  trafka.broker.security.sasl.client); Kafka's default, GSSAPI (Kerberos), is not spoken;
- ``sasl.jaas.config``: one login module entry (PlainLoginModule, ScramLoginModule) with ``username`` and
  ``password``; for OAUTHBEARER, OAuthBearerLoginModule, as Kafka's clients log in with it:

  - with ``sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer.
    OAuthBearerLoginCallbackHandler``, a token from ``sasl.oauthbearer.token.endpoint.url``: a client-credentials
    grant (``clientId``, ``clientSecret`` and ``scope`` JAAS options, or ``sasl.oauthbearer.client.credentials.
    client.id``/``.client.secret`` and ``sasl.oauthbearer.scope``; the id and secret go in HTTP Basic
    authorization), or the token in a ``file:`` URL's file; fetched again for each connection's login;
  - without it, Kafka's unsecured token (``unsecuredLoginStringClaim_sub="alice"`` and the other
    ``unsecuredLogin*`` options: trafka.broker.security.sasl.client.unsecured_login_token);
- ``ssl.*`` as the Java client reads them (trafka.broker.security.tls.client_context): a PEM or PKCS12
  truststore (or the system's authorities without one), a keystore for mutual TLS
  (``ssl.keystore.type``/``location``/``password``, ``ssl.key.password``, inline PEM),
  ``ssl.endpoint.identification.algorithm`` (``https``, the default, checks the host name; empty does not),
  protocols and cipher suites;
- ``bootstrap.servers`` is used when the command line gives no ``--bootstrap-server``.

librdkafka's names for the same things are understood too, so that a file written for kcat (``-F``) or for
confluent-kafka serves: ``sasl.username``, ``sasl.password``, ``ssl.ca.location``,
``ssl.certificate.location`` with ``ssl.key.location`` (and ``ssl.key.password``), and
``ssl.endpoint.identification.algorithm=none``. Other settings (timeouts, client ids, ...) are ignored.

The file is read as Java reads a ``.properties`` file (``\\`` escapes, line continuations), so that a
password holding ``"`` or ``\\`` means the same to trafka's tools and to Kafka's.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import ssl

__all__ = ["ClientConfigError", "ClientSecurity", "escape_property", "jaas_quote", "parse_java_properties"]

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
LOGIN_MODULES = {"PLAIN": PLAIN_LOGIN_MODULE, "SCRAM-SHA-256": SCRAM_LOGIN_MODULE,
                 "SCRAM-SHA-512": SCRAM_LOGIN_MODULE, "OAUTHBEARER": OAUTHBEARER_LOGIN_MODULE}
#: Kafka's login handler that fetches tokens from a token endpoint (Kafka 4's name, then 3.x's).
OAUTHBEARER_LOGIN_HANDLERS = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",
)
#: How long a request to a token endpoint may take.
TOKEN_ENDPOINT_TIMEOUT_S = 30.0
#: The mechanisms the tools log in with.
CLIENT_MECHANISMS = tuple(LOGIN_MODULES)


class ClientConfigError(ValueError):
    """The client settings cannot be used (the message names the setting, never a password)."""


@dataclass
class ClientSecurity:
    """How a tool connects: the security protocol, the SASL login, the TLS settings."""

    protocol: str = "PLAINTEXT"
    mechanism: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    #: Kafka's ``ssl.*`` settings (librdkafka's already translated).
    ssl_settings: Mapping[str, str] = field(default_factory=dict, repr=False)
    bootstrap_servers: str | None = None
    source: str = "the client settings"
    #: OAUTHBEARER: the login module's options, and where and how a token is fetched (None: unsecured tokens).
    oauth_options: Mapping[str, str] = field(default_factory=dict, repr=False)
    token_endpoint_url: str | None = None
    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)
    scope: str | None = None
    _context: ssl.SSLContext | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @property
    def principal(self) -> str:
        """Who logs in, for messages: the user and the mechanism, or the protocol alone."""
        return f"{self.username} with {self.mechanism}" if self.uses_sasl else self.protocol

    @classmethod
    def load(cls, path: str | Path) -> ClientSecurity:
        """The settings of a client properties file (``--command-config``)."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ClientConfigError(f"--command-config {path}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise ClientConfigError(f"--command-config {path}: not a text file") from None
        return cls.from_properties(parse_java_properties(text), source=f"--command-config {path}")

    @classmethod
    def from_properties(cls, props: Mapping[str, str], *, source: str = "the client settings") -> ClientSecurity:
        """The settings of a client's properties (Java's names, or librdkafka's)."""
        props = {key.strip(): value.strip() for key, value in props.items()}
        protocol = props.get("security.protocol", "PLAINTEXT").upper() or "PLAINTEXT"
        if protocol not in SECURITY_PROTOCOLS:
            raise ClientConfigError(f"{source}: security.protocol={protocol}: expected one of "
                                    f"{', '.join(SECURITY_PROTOCOLS)}")
        security = cls(protocol=protocol, bootstrap_servers=props.get("bootstrap.servers") or None, source=source)
        security.ssl_settings = _ssl_settings(props, source)
        if security.uses_sasl:
            security._read_sasl(props)
        return security

    def _read_sasl(self, props: Mapping[str, str]) -> None:
        mechanism = props.get("sasl.mechanism", "").upper()
        if not mechanism or mechanism == "GSSAPI":
            raise ClientConfigError(
                f"{self.source}: security.protocol={self.protocol} needs sasl.mechanism: one of "
                f"{', '.join(CLIENT_MECHANISMS)} (GSSAPI, Kafka's default, is not spoken by trafka's tools)")
        if mechanism not in CLIENT_MECHANISMS:
            raise ClientConfigError(f"{self.source}: sasl.mechanism={mechanism}: trafka's tools speak "
                                    f"{', '.join(CLIENT_MECHANISMS)}")
        self.mechanism = mechanism
        options: Mapping[str, str] = {}
        jaas = props.get("sasl.jaas.config", "")
        if jaas:
            from trafka.broker.security.jaas import JaasConfigError, parse_jaas_config

            try:
                options = parse_jaas_config(jaas).options
            except JaasConfigError as exc:
                raise ClientConfigError(f"{self.source}: {exc}") from None
        if mechanism == "OAUTHBEARER":
            self._read_oauthbearer(props, options)
            return
        self.username = options.get("username") or props.get("sasl.username") or None
        self.password = options.get("password") or props.get("sasl.password") or None
        if not (self.username and self.password):
            raise ClientConfigError(
                f"{self.source}: sasl.mechanism={mechanism} needs a user name and password: "
                f"sasl.jaas.config={LOGIN_MODULES[mechanism]} required username=\"...\" password=\"...\";")

    def _read_oauthbearer(self, props: Mapping[str, str], options: Mapping[str, str]) -> None:
        from trafka.broker.security.sasl.client import unsecured_login_token

        self.oauth_options = dict(options)
        handler = props.get("sasl.login.callback.handler.class", "")
        if handler in OAUTHBEARER_LOGIN_HANDLERS:
            url = props.get("sasl.oauthbearer.token.endpoint.url", "")
            if not url.lower().startswith(("http:", "https:", "file:")):
                raise ClientConfigError(
                    f"{self.source}: {handler.rsplit('.', 1)[1]} needs sasl.oauthbearer.token.endpoint.url: the "
                    "identity provider's token endpoint (http:, https:) or a file: URL of a token")
            self.token_endpoint_url = url
            self.client_id = props.get("sasl.oauthbearer.client.credentials.client.id") or options.get("clientId")
            self.client_secret = (props.get("sasl.oauthbearer.client.credentials.client.secret")
                                  or options.get("clientSecret"))
            self.scope = props.get("sasl.oauthbearer.scope") or options.get("scope") or None
            if not url.lower().startswith("file:") and not (self.client_id and self.client_secret):
                raise ClientConfigError(
                    f"{self.source}: the token endpoint's client credentials are needed: sasl.jaas.config="
                    f'{OAUTHBEARER_LOGIN_MODULE} required clientId="..." clientSecret="...";')
            self.username = self.client_id or "the token in " + url
        elif handler:
            raise ClientConfigError(f"{self.source}: sasl.login.callback.handler.class={handler}: trafka's tools log "
                                    f"in with Kafka's unsecured tokens or with {OAUTHBEARER_LOGIN_HANDLERS[0]}")
        else:
            try:
                unsecured_login_token(options, 0)
            except ValueError as exc:
                raise ClientConfigError(f"{self.source}: sasl.mechanism=OAUTHBEARER: {exc}") from None
            principal_claim = (options.get("unsecuredLoginPrincipalClaimName") or "sub").strip()
            self.username = options.get(f"unsecuredLoginStringClaim_{principal_claim}")

    def oauthbearer_token(self) -> str:
        """A token to log in with: fetched from the token endpoint (a client-credentials grant, blocking), read
        from its file, or made unsecured. ClientConfigError when the endpoint refuses the client's credentials or
        cannot be reached, or the file cannot be read (the tools exit with 2, as for a bad --command-config)."""
        if self.token_endpoint_url is None:
            import time

            from trafka.broker.security.sasl.client import unsecured_login_token

            return unsecured_login_token(self.oauth_options, time.time_ns() // 1_000_000)[0]
        if self.token_endpoint_url.lower().startswith("file:"):
            import urllib.parse
            import urllib.request

            path = urllib.request.url2pathname(urllib.parse.urlparse(self.token_endpoint_url).path)
            try:
                return Path(path).read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise ClientConfigError(f"{self.source}: sasl.oauthbearer.token.endpoint.url: {path}: "
                                        f"{exc.strerror or exc}") from None
        return self._client_credentials_token()

    def _client_credentials_token(self) -> str:
        import base64
        import json
        import urllib.error
        import urllib.parse
        import urllib.request

        assert self.token_endpoint_url is not None and self.client_id and self.client_secret
        quote = urllib.parse.quote
        basic = base64.b64encode(f"{quote(self.client_id, safe='')}:{quote(self.client_secret, safe='')}".encode())
        form = {"grant_type": "client_credentials", **({"scope": self.scope} if self.scope else {})}
        request = urllib.request.Request(
            self.token_endpoint_url, data=urllib.parse.urlencode(form).encode(), method="POST",
            headers={"Authorization": f"Basic {basic.decode()}", "Accept": "application/json",
                     "Content-Type": "application/x-www-form-urlencoded", "Cache-Control": "no-cache"})
        where = f"{self.source}: the token endpoint {self.token_endpoint_url}"
        try:
            with urllib.request.urlopen(request, timeout=TOKEN_ENDPOINT_TIMEOUT_S) as response:
                body = response.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read(500).decode("utf-8", errors="replace").strip()
            raise ClientConfigError(f"{where} answered {exc.code} {exc.reason}: {detail}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise ClientConfigError(f"{where} cannot be reached: {getattr(exc, 'reason', exc)}") from None
        try:
            token = json.loads(body)["access_token"]
        except (ValueError, KeyError, TypeError):
            raise ClientConfigError(f"{where} answered without an access_token: {body[:200]!r}") from None
        if not isinstance(token, str) or not token.strip():
            raise ClientConfigError(f"{where} answered an empty access_token")
        return token.strip()

    def ssl_context(self) -> ssl.SSLContext:
        """The TLS context of this client's connections (made once)."""
        if self._context is None:
            from trafka.broker.security.tls import TlsConfigError, client_context

            try:
                self._context = client_context(self.ssl_settings)
            except TlsConfigError as exc:
                raise ClientConfigError(f"{self.source}: {exc}") from None
        return self._context

    def sasl_exchange(self):
        """A new client exchange of the configured mechanism (trafka.broker.security.sasl.client)."""
        from trafka.broker.security.sasl.client import OAuthBearerClient, client_exchange, unsecured_login_token

        if self.mechanism == "OAUTHBEARER":
            extensions = unsecured_login_token(self.oauth_options, 0)[1] if self.token_endpoint_url is None else {}
            return OAuthBearerClient(self.oauthbearer_token(), extensions=extensions)
        assert self.mechanism is not None and self.username is not None and self.password is not None
        return client_exchange(self.mechanism, self.username, self.password)


def _ssl_settings(props: Mapping[str, str], source: str) -> dict[str, str]:
    settings = {key: value for key, value in props.items() if key.startswith("ssl.")}
    # librdkafka's names
    ca = settings.pop("ssl.ca.location", None)
    if ca and "ssl.truststore.location" not in settings:
        settings.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": ca})
    certificate, key = settings.pop("ssl.certificate.location", None), settings.pop("ssl.key.location", None)
    if (certificate or key) and "ssl.keystore.location" not in settings:
        if not (certificate and key):
            raise ClientConfigError(f"{source}: ssl.certificate.location and ssl.key.location go together")
        try:
            settings.update({"ssl.keystore.type": "PEM",
                             "ssl.keystore.certificate.chain": Path(certificate).read_text(),
                             "ssl.keystore.key": Path(key).read_text()})
        except OSError as exc:
            raise ClientConfigError(f"{source}: {exc.filename}: {exc.strerror}") from None
    if settings.get("ssl.endpoint.identification.algorithm", "").lower() == "none":
        settings["ssl.endpoint.identification.algorithm"] = ""
    return settings


# -- Java's .properties ----------------------------------------------------------------------------------------

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _logical_lines(text: str):
    pending = None
    for raw in text.splitlines():
        line = raw.lstrip(" \t\f")
        if pending is None and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:  # an odd number of backslashes: the line goes on
            pending = (pending or "") + line[:-1]
            continue
        yield (pending or "") + line
        pending = None
    if pending is not None:
        yield pending


def _unescape(text: str) -> str:
    out = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            n = text[i + 1]
            if n == "u" and i + 6 <= len(text):
                try:
                    out.append(chr(int(text[i + 2:i + 6], 16)))
                    i += 6
                    continue
                except ValueError:
                    pass
            out.append(_ESCAPES.get(n, n))
            i += 2
            continue
        out.append(c)
        i += 1
    text = "".join(out)
    try:  # \uXXXX pairs standing for one character beyond the BMP
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
    except UnicodeDecodeError:
        return text


def parse_java_properties(text: str) -> dict[str, str]:
    """``key=value`` / ``key: value`` / ``key value`` lines as java.util.Properties.load reads them."""
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        end, i = len(line), 0
        while i < end and line[i] not in "=: \t\f":
            i += 2 if line[i] == "\\" else 1
        key, j = line[:i], i
        while j < end and line[j] in " \t\f":
            j += 1
        if j < end and line[j] in "=:":
            j += 1
        while j < end and line[j] in " \t\f":
            j += 1
        props[_unescape(key)] = _unescape(line[j:])
    return props


def escape_property(value: str) -> str:
    """``value`` as a .properties file must hold it to be read back the same (by Java and by trafka)."""
    out = []
    for i, c in enumerate(value):
        if c == "\\":
            out.append("\\\\")
        elif c in "\t\n\r\f":
            out.append("\\" + {"\t": "t", "\n": "n", "\r": "r", "\f": "f"}[c])
        elif c == " " and i == 0:
            out.append("\\ ")
        elif ord(c) > 0x7E or ord(c) < 0x20:
            units = c.encode("utf-16-be")
            out.extend(f"\\u{int.from_bytes(units[k:k + 2], 'big'):04x}" for k in range(0, len(units), 2))
        else:
            out.append(c)
    return "".join(out)


def jaas_quote(value: str) -> str:
    """``value`` as a double-quoted JAAS option value (Java's StreamTokenizer escapes)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
