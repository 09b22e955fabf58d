"""``trafka --secure``: a development broker secured in one step, as a production cluster would be reached.

Before the broker starts (nothing of this runs on the event loop):

- a throwaway CA and a broker certificate for ``localhost``, ``127.0.0.1`` and the listen and advertised
  hosts (trafka.broker.security.dev_certs, P-256 keys: made in milliseconds), kept in
  ``<data dir>/dev-security/`` and used again on the next start while they still name those hosts and are
  valid for another day; with ``--ephemeral`` they go with the temporary data directory;
- one listener, SASL_SSL, on the address ``--host``/``--port`` give: PLAIN, SCRAM-SHA-256 and
  SCRAM-SHA-512 (no PLAINTEXT beside it, so that a client missing its security settings fails here as it
  would in production);
- the users of ``--user NAME:PASSWORD`` (repeatable), or else ``admin`` with a generated password (kept in
  ``dev-security/admin.password`` and used again on later starts): SCRAM-SHA-256 and SCRAM-SHA-512
  credentials (4096 iterations) written into the data directory's SCRAM store, and PLAIN users in the
  listener's JAAS settings (held in memory, reported by DescribeConfigs as sensitive). A user name that is
  not a JAAS word (letters, digits, ``_ $ - .``, not starting with a digit, ``-`` or ``.``) gets SCRAM only.
  Users made earlier (``trafka users``) keep their SCRAM credentials.

Once it serves, after the ready line: the client settings of the first user, with librdkafka's names
(confluent-kafka, kcat) and the Java client's (Kafka's tools, trafka's ``--command-config``), and per user
two files in ``dev-security/`` holding the same (mode 0600): ``<user>.properties`` (Java's names) and
``<user>-librdkafka.properties`` (``kcat -F``).

Development only: the CA's private key lies beside its certificate and the passwords are in files.
"""
from __future__ import annotations

import datetime
import os
import re
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from trafka.broker.tools.client_security import escape_property, jaas_quote

DEV_DIR = "dev-security"
DEFAULT_USER = "admin"
LISTENER = "SASL_SSL"
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
#: The mechanism the printed settings use (every one of MECHANISMS works).
CLIENT_MECHANISM = "SCRAM-SHA-512"
ITERATIONS = 4096
#: The settings trafka --secure chooses itself: given as well, they stop the start.
CHOSEN = ("listeners", "advertised.listeners", "listener.security.protocol.map", "inter.broker.listener.name",
          "security.inter.broker.protocol", "zookeeper.connect")
_USER_NAME = re.compile(r"[A-Za-z0-9@_-][A-Za-z0-9@._-]*")
_JAAS_WORD = re.compile(r"[A-Za-z_$][A-Za-z0-9_$.-]*")
_SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"
_PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


class SecureSetupError(ValueError):
    """--secure cannot be served as asked (the message says why)."""


def listener_properties(props: Mapping[str, str], host: str, port: int) -> dict[str, str]:
    """The listener of a --secure broker, to read the configuration with; SecureSetupError when the
    configuration chooses listeners (or a cluster) itself."""
    chosen = [name for name in CHOSEN if props.get(name, "").strip()]
    if chosen:
        raise SecureSetupError(f"--secure chooses the listener itself (one SASL_SSL listener on --host/--port) "
                               f"and makes a one-node broker: leave out {', '.join(chosen)}")
    return {"listeners": f"{LISTENER}://{host}:{port}"}


def parse_users(items: Sequence[str]) -> dict[str, str]:
    """``NAME:PASSWORD`` items (the password may hold ``:``) by name."""
    users: dict[str, str] = {}
    for item in items:
        name, sep, password = item.partition(":")
        if not sep or not name or not password:
            raise SecureSetupError(f"--user {item.partition(':')[0]}:...: expected NAME:PASSWORD, both non-empty")
        if not _USER_NAME.fullmatch(name):
            raise SecureSetupError(f"--user {name}: a name of letters, digits, '@', '.', '_' or '-', not starting "
                                   "with '.' (it names the user's files)")
        if name in users:
            raise SecureSetupError(f"--user {name} is given twice")
        users[name] = password
    return users


@dataclass
class SecureDev:
    """What ``prepare`` made, and the settings that use it."""

    directory: Path
    ca: Path
    keystore: Path
    users: dict[str, str]
    generated: set[str] = field(default_factory=set)

    @property
    def plain_users(self) -> list[str]:
        return [name for name in self.users if _JAAS_WORD.fullmatch(name)]

    def broker_properties(self) -> dict[str, str]:
        """The listener's settings, added to the broker's properties."""
        prefix = f"listener.name.{LISTENER.lower()}."
        plain = self.plain_users
        mechanisms = MECHANISMS if plain else SCRAM_MECHANISMS
        props = {
            f"{prefix}sasl.enabled.mechanisms": ",".join(mechanisms),
            f"{prefix}ssl.keystore.type": "PEM",
            f"{prefix}ssl.keystore.location": str(self.keystore),
        }
        if plain:
            users = " ".join(f"user_{name}={jaas_quote(self.users[name])}" for name in plain)
            props[f"{prefix}plain.sasl.jaas.config"] = f"{_PLAIN_LOGIN} required {users};"
        return props

    def librdkafka_settings(self, user: str, bootstrap: str, mechanism: str = CLIENT_MECHANISM) -> dict[str, str]:
        return {"bootstrap.servers": bootstrap, "security.protocol": LISTENER, "sasl.mechanism": mechanism,
                "sasl.username": user, "sasl.password": self.users[user], "ssl.ca.location": str(self.ca)}

    def java_settings(self, user: str, bootstrap: str, mechanism: str = CLIENT_MECHANISM) -> dict[str, str]:
        module = _PLAIN_LOGIN if mechanism == "PLAIN" else _SCRAM_LOGIN
        jaas = f"{module} required username={jaas_quote(user)} password={jaas_quote(self.users[user])};"
        return {"bootstrap.servers": bootstrap, "security.protocol": LISTENER, "sasl.mechanism": mechanism,
                "sasl.jaas.config": jaas, "ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.ca)}

    def java_file(self, user: str) -> Path:
        return self.directory / f"{user}.properties"

    def librdkafka_file(self, user: str) -> Path:
        return self.directory / f"{user}-librdkafka.properties"

    def write_client_files(self, bootstrap: str) -> None:
        """Each user's settings as files (rewritten at every start: the port may change)."""
        for user in self.users:
            java = self.java_settings(user, bootstrap)
            _write_private(self.java_file(user), f"# trafka --secure: user {user}'s client settings, the Java "
                           f"client's names (Kafka's tools: --command-config)\n"
                           + "".join(f"{k}={escape_property(v)}\n" for k, v in java.items()))
            rdkafka = self.librdkafka_settings(user, bootstrap)
            _write_private(self.librdkafka_file(user), f"# trafka --secure: user {user}'s client settings, "
                           f"librdkafka's names (kcat -F)\n" + "".join(f"{k}={v}\n" for k, v in rdkafka.items()))

    def announcement(self, bootstrap: str) -> str:
        """What is printed after the ready line: the first user's settings, to paste."""
        user = next(iter(self.users))
        lines = [f"Secured for development: one {LISTENER} listener ({', '.join(self.mechanisms)}), its "
                 f"certificate from a throwaway CA ({self.ca})."]
        described = []
        for name in self.users:
            note = []
            if name in self.generated:
                note.append(f"password generated, kept in {self.directory / (name + '.password')}")
            if name not in self.plain_users:
                note.append("SCRAM only: not a JAAS word, so no PLAIN")
            described.append(name + (f" ({'; '.join(note)})" if note else ""))
        lines.append(f"Users: {', '.join(described)}; each one's settings are in {self.directory}/<user>.properties.")
        lines.append(f"Client settings for {user}, librdkafka's names (confluent-kafka; kcat -F "
                     f"{self.librdkafka_file(user)}):")
        lines += [f"    {k}={v}" for k, v in self.librdkafka_settings(user, bootstrap).items()]
        lines.append(f"The Java client's names (Kafka's tools and trafka's: --command-config {self.java_file(user)}):")
        lines += [f"    {k}={escape_property(v)}" for k, v in self.java_settings(user, bootstrap).items()]
        return "\n".join(lines)

    @property
    def mechanisms(self) -> tuple[str, ...]:
        return MECHANISMS if self.plain_users else SCRAM_MECHANISMS


def prepare(data_dir: Path, hosts: Iterable[str], user_items: Sequence[str]) -> SecureDev:
    """Certificates, users and their credentials, before the broker starts."""
    from trafka.broker.security.credentials import ScramCredentialStore, from_password

    data_dir = Path(data_dir).absolute()
    directory = data_dir / DEV_DIR
    wanted = list(dict.fromkeys(h for h in hosts if h and h not in ("0.0.0.0", "::")))
    ca, keystore = _certificates(directory, wanted)
    users = parse_users(user_items)
    generated: set[str] = set()
    if not users:
        users = {DEFAULT_USER: _generated_password(directory / f"{DEFAULT_USER}.password")}
        generated.add(DEFAULT_USER)
    with _locked(data_dir):
        store = ScramCredentialStore.load(data_dir)
        for name, password in users.items():
            for mechanism in SCRAM_MECHANISMS:
                store.set(name, mechanism, from_password(mechanism, password, ITERATIONS))
    return SecureDev(directory, ca, keystore, users, generated)


def _certificates(directory: Path, hosts: list[str]) -> tuple[Path, Path]:
    from trafka.broker.security.dev_certs import create_dev_certificates

    ca, keystore, certificate = (directory / "ca-cert.pem", directory / "broker-keystore.pem",
                                 directory / "broker-cert.pem")
    if ca.exists() and keystore.exists() and certificate.exists() and _still_serves(certificate, hosts):
        return ca, keystore
    certs = create_dev_certificates(directory, hosts=hosts, key_type="ec")
    return certs.ca, certs.broker.keystore


def _still_serves(certificate: Path, hosts: list[str]) -> bool:
    """Whether the broker certificate names every host and stays valid for another day."""
    import ipaddress

    from cryptography import x509

    try:
        cert = x509.load_pem_x509_certificate(certificate.read_bytes())
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (ValueError, x509.ExtensionNotFound):
        return False
    dns = set(names.get_values_for_type(x509.DNSName))
    ips = {str(ip) for ip in names.get_values_for_type(x509.IPAddress)}
    for host in hosts:
        try:
            if str(ipaddress.ip_address(host)) not in ips:
                return False
        except ValueError:
            if host not in dns:
                return False
    expires = cert.not_valid_after_utc
    return expires - datetime.datetime.now(datetime.timezone.utc) > datetime.timedelta(days=1)


def _generated_password(path: Path) -> str:
    try:
        password = path.read_text().strip()
        if password:
            return password
    except FileNotFoundError:
        pass
    password = secrets.token_urlsafe(12)
    _write_private(path, password + "\n")
    return password


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        os.fchmod(f.fileno(), 0o600)
        f.write(text)


class _locked:
    """The data directory's lock while the credentials are written (a broker using it would overwrite them)."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self._fd: int | None = None

    def __enter__(self) -> None:
        import fcntl

        from trafka.storage.manager import LOCK_FILE

        self.data_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise SecureSetupError(f"data directory {self.data_dir} is in use by another broker") from None
        self._fd = fd

    def __exit__(self, *exc_info: object) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
