"""SCRAM credentials, as Kafka keeps them: per user and mechanism a salt, a StoredKey, a ServerKey and an
iteration count (RFC 5802 section 5; never the password).

- :class:`ScramCredential` and its derivations: :func:`from_password` (PBKDF2-HMAC via hashlib: seconds of
  CPU for large iteration counts, so callers on the event loop run it in a thread) and
  :func:`from_salted_password` (what AlterUserScramCredentials carries: the client salts the password, the
  broker derives the keys, which is cheap);
- Kafka's text form of one credential (``salt=…,stored_key=…,server_key=…,iterations=…``, base64 values:
  :func:`credential_to_string`, :func:`credential_from_string`) and Kafka's ZooKeeper form of a user's
  config node, ``/config/users/<sanitized user>`` holding ``{"version":1,"config":{"SCRAM-SHA-256":"salt=…"}}``
  (:func:`encode_zk_user_config`, :func:`decode_zk_user_config`, :func:`zk_user_path`), for the ZooKeeper
  backend of the cluster;
- :class:`ScramCredentialStore`: the broker's store, one JSON file in the data directory, written
  atomically (temporary file, fsync, rename, fsync of the directory) on every change and read at start;
  with Kafka's (KRaft controller's) validation of AlterUserScramCredentials and its answers to
  DescribeUserScramCredentials, error codes and messages included.

Kafka's limits: SCRAM-SHA-256 and SCRAM-SHA-512 only (types 1 and 2 on the wire), at least 4096 and at most
16384 iterations; a user name must not be empty. A delegation token authenticates with SCRAM too: its
credential (:class:`DelegationTokenCredential`) also names the token's owner and expiry.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import threading
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote_plus

from trafka.storage.checkpoints import fsync_path
from trafka.wire.errors import ErrorCode

SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
#: The SCRAM mechanisms, by name, with the hashlib name of their hash.
HASHES: Mapping[str, str] = {SCRAM_SHA_256: "sha256", SCRAM_SHA_512: "sha512"}
SCRAM_MECHANISMS: tuple[str, ...] = tuple(HASHES)
#: The mechanism's type byte in DescribeUserScramCredentials and AlterUserScramCredentials (0 is UNKNOWN).
MECHANISM_TYPES: Mapping[str, int] = {SCRAM_SHA_256: 1, SCRAM_SHA_512: 2}
MECHANISMS_BY_TYPE: Mapping[int, str] = {t: m for m, t in MECHANISM_TYPES.items()}
#: Kafka's bounds on the iteration count, the same for both mechanisms.
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384

#: The store's file in the data directory.
CREDENTIALS_FILE = "scram-credentials.json"
_FILE_VERSION = 1


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:
        # The keys stand for the password: they stay out of logs.
        return f"ScramCredential(salt=[hidden], stored_key=[hidden], server_key=[hidden], iterations={self.iterations})"


@dataclass(frozen=True)
class DelegationTokenCredential:
    """A delegation token's SCRAM credential (its HMAC is the password), whose principal is the owner's."""
    owner: str
    credential: ScramCredential
    expiry_timestamp_ms: int


def hash_name(mechanism: str) -> str:
    try:
        return HASHES[mechanism]
    except KeyError:
        expected = ", ".join(SCRAM_MECHANISMS)
        raise ValueError(f"Unknown SCRAM mechanism {mechanism!r}: expected one of {expected}") from None


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's Hi(Normalize(password), salt, i): PBKDF2-HMAC over the password's UTF-8 bytes (Kafka does not
    SASLprep either)."""
    return hashlib.pbkdf2_hmac(hash_name(mechanism), password.encode("utf-8"), salt, iterations)


def client_key(mechanism: str, salted: bytes) -> bytes:
    return hmac.new(salted, b"Client Key", hash_name(mechanism)).digest()


def stored_key(mechanism: str, client_key_: bytes) -> bytes:
    return hashlib.new(hash_name(mechanism), client_key_).digest()


def server_key(mechanism: str, salted: bytes) -> bytes:
    return hmac.new(salted, b"Server Key", hash_name(mechanism)).digest()


def from_salted_password(mechanism: str, salt: bytes, salted_password_: bytes, iterations: int) -> ScramCredential:
    """The credential for a password the client salted itself (AlterUserScramCredentials' upsertion)."""
    return ScramCredential(
        salt=bytes(salt),
        stored_key=stored_key(mechanism, client_key(mechanism, salted_password_)),
        server_key=server_key(mechanism, salted_password_),
        iterations=iterations,
    )


def from_password(
    mechanism: str, password: str, iterations: int = MIN_ITERATIONS, salt: bytes | None = None,
) -> ScramCredential:
    """The credential for ``password``, with a random 32-byte salt unless one is given. Costs ``iterations``
    HMACs: run it off the event loop."""
    if salt is None:
        salt = secrets.token_bytes(32)
    return from_salted_password(mechanism, salt, salted_password(mechanism, password, salt, iterations), iterations)


# -- Kafka's text form of a credential ------------------------------------------------------------------------------

_CREDENTIAL_KEYS = ("salt", "stored_key", "server_key", "iterations")


def credential_to_string(credential: ScramCredential) -> str:
    def b64(b: bytes) -> str:
        return base64.b64encode(b).decode("ascii")
    return (f"salt={b64(credential.salt)},stored_key={b64(credential.stored_key)},"
            f"server_key={b64(credential.server_key)},iterations={credential.iterations}")


def credential_from_string(text: str) -> ScramCredential:
    """Kafka's ``salt=…,stored_key=…,server_key=…,iterations=…``; exactly those four keys, else ValueError
    ``Credentials not valid: …`` (as Kafka says, without repeating the keys' values)."""
    props: dict[str, str] = {}
    for token in text.split(","):
        key, sep, value = token.partition("=")
        if not sep or not key:
            raise ValueError("Credentials not valid: expected salt=…,stored_key=…,server_key=…,iterations=…")
        props[key] = value
    if sorted(props) != sorted(_CREDENTIAL_KEYS):
        expected, got = ", ".join(_CREDENTIAL_KEYS), ", ".join(props)
        raise ValueError(f"Credentials not valid: expected the keys {expected}, got {got}")
    try:
        return ScramCredential(
            salt=base64.b64decode(props["salt"], validate=True),
            stored_key=base64.b64decode(props["stored_key"], validate=True),
            server_key=base64.b64decode(props["server_key"], validate=True),
            iterations=int(props["iterations"]),
        )
    except (binascii.Error, ValueError) as e:
        raise ValueError(f"Credentials not valid: {e}") from None


# -- Kafka's ZooKeeper form ---------------------------------------------------------------------------------------

def sanitize(name: str) -> str:
    """Kafka's Sanitizer.sanitize: a user name as a ZooKeeper node name (URL-encoded as Java's URLEncoder does,
    with ``*`` as ``%2A`` and a space as ``%20``)."""
    out = []
    for byte in name.encode("utf-8"):
        c = chr(byte)
        if c.isascii() and (c.isalnum() or c in ".-_"):
            out.append(c)
        else:
            out.append(f"%{byte:02X}")
    return "".join(out)


def desanitize(name: str) -> str:
    """Kafka's Sanitizer.desanitize (URLDecoder: ``+`` is a space, ``%XX`` a byte)."""
    return unquote_plus(name, encoding="utf-8", errors="strict")


def zk_user_path(user: str) -> str:
    """The user's config node in Kafka's ZooKeeper layout."""
    return f"/config/users/{sanitize(user)}"


def zk_user_change_notification(user: str) -> bytes:
    """The body of the ``/config/changes/config_change_<seq>`` node that tells brokers the user's config changed."""
    return json.dumps({"version": 2, "entity_path": f"users/{sanitize(user)}"}, separators=(",", ":")).encode("utf-8")


def encode_zk_user_config(credentials: Mapping[str, ScramCredential], other: Mapping[str, str] | None = None) -> bytes:
    """A user's config node: the SCRAM credentials by mechanism, beside the node's other entries (quotas) kept
    as they were."""
    config = dict(other or {})
    for mechanism in SCRAM_MECHANISMS:
        config.pop(mechanism, None)
    for mechanism, credential in credentials.items():
        hash_name(mechanism)
        config[mechanism] = credential_to_string(credential)
    return json.dumps({"version": 1, "config": config}, separators=(",", ":")).encode("utf-8")


def decode_zk_user_config(data: bytes) -> tuple[dict[str, ScramCredential], dict[str, str]]:
    """The SCRAM credentials of a user's config node by mechanism, and its other entries. ValueError for a
    node that is not Kafka's ``{"version":1,"config":{…}}`` or a credential that is not Kafka's text form."""
    try:
        node = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"user config node is not JSON: {e}") from None
    if not isinstance(node, dict) or not isinstance(node.get("config", {}), dict):
        raise ValueError('user config node is not {"version":1,"config":{...}}')
    credentials: dict[str, ScramCredential] = {}
    other: dict[str, str] = {}
    for key, value in node.get("config", {}).items():
        if key in HASHES:
            credentials[key] = credential_from_string(str(value))
        else:
            other[key] = value
    return credentials, other


# -- Kafka's validation of AlterUserScramCredentials and its DescribeUserScramCredentials answers ---------------

ALTERED_TWICE = "A user credential cannot be altered twice in the same request"
USERNAME_EMPTY = "Username must not be empty"
UNKNOWN_MECHANISM = "Unknown SCRAM mechanism"
TOO_FEW_ITERATIONS = "Too few iterations"
TOO_MANY_ITERATIONS = "Too many iterations"
DELETE_UNKNOWN = "Attempt to delete a user credential that does not exist"
DESCRIBE_TWICE = "Cannot describe SCRAM credentials for the same user twice in a single request: "
DESCRIBE_UNKNOWN = "Attempt to describe a user credential that does not exist: "


@dataclass(frozen=True)
class Deletion:
    user: str
    mechanism: int          # the wire's type byte: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512, anything else unknown


@dataclass(frozen=True)
class Upsertion:
    user: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes

    def __repr__(self) -> str:
        return f"Upsertion(user={self.user!r}, mechanism={self.mechanism}, iterations={self.iterations})"


@dataclass(frozen=True)
class AlterResult:
    user: str
    error: ErrorCode
    message: str | None = None


@dataclass(frozen=True)
class DescribeResult:
    user: str
    error: ErrorCode
    message: str | None = None
    #: (mechanism type, iterations), in mechanism order, when the user has credentials.
    credentials: tuple[tuple[int, int], ...] = ()


def _check_user_and_mechanism(user: str, mechanism: int) -> AlterResult | None:
    if not user:
        return AlterResult(user, ErrorCode.UNACCEPTABLE_CREDENTIAL, USERNAME_EMPTY)
    if mechanism not in MECHANISMS_BY_TYPE:
        return AlterResult(user, ErrorCode.UNSUPPORTED_SASL_MECHANISM, UNKNOWN_MECHANISM)
    return None


def _check_upsertion(u: Upsertion) -> AlterResult | None:
    error = _check_user_and_mechanism(u.user, u.mechanism)
    if error is not None:
        return error
    if u.iterations < MIN_ITERATIONS:
        return AlterResult(u.user, ErrorCode.UNACCEPTABLE_CREDENTIAL, TOO_FEW_ITERATIONS)
    if u.iterations > MAX_ITERATIONS:
        return AlterResult(u.user, ErrorCode.UNACCEPTABLE_CREDENTIAL, TOO_MANY_ITERATIONS)
    return None


def plan_alterations(
    deletions: Sequence[Deletion],
    upsertions: Sequence[Upsertion],
    exists: Callable[[str, str], bool],
) -> tuple[list[AlterResult], list[Deletion], list[Upsertion]]:
    """Kafka's controller's validation of one AlterUserScramCredentials request (a pure function).

    Each user is altered at most once per request, whatever the mechanism (a second alteration of a user,
    deletion or upsertion, fails that user with DUPLICATE_RESOURCE); an empty user name is
    UNACCEPTABLE_CREDENTIAL, an unknown mechanism UNSUPPORTED_SASL_MECHANISM, iterations outside
    [4096, 16384] UNACCEPTABLE_CREDENTIAL, and deleting a credential that ``exists(user, mechanism)`` denies
    RESOURCE_NOT_FOUND. Returns the results (accepted deletions, accepted upsertions, then the failures, as
    Kafka lists them) and the alterations to apply.
    """
    errors: dict[str, AlterResult] = {}
    to_delete: dict[str, Deletion] = {}
    to_upsert: dict[str, Upsertion] = {}
    for d in deletions:
        if d.user in errors:
            continue
        if to_delete.pop(d.user, None) is not None:
            errors[d.user] = AlterResult(d.user, ErrorCode.DUPLICATE_RESOURCE, ALTERED_TWICE)
            continue
        error = _check_user_and_mechanism(d.user, d.mechanism)
        if error is None and not exists(d.user, MECHANISMS_BY_TYPE[d.mechanism]):
            error = AlterResult(d.user, ErrorCode.RESOURCE_NOT_FOUND, DELETE_UNKNOWN)
        if error is not None:
            errors[d.user] = error
        else:
            to_delete[d.user] = d
    for u in upsertions:
        if u.user in errors:
            continue
        if to_delete.pop(u.user, None) is not None or to_upsert.pop(u.user, None) is not None:
            errors[u.user] = AlterResult(u.user, ErrorCode.DUPLICATE_RESOURCE, ALTERED_TWICE)
            continue
        error = _check_upsertion(u)
        if error is not None:
            errors[u.user] = error
        else:
            to_upsert[u.user] = u
    results = [AlterResult(d.user, ErrorCode.NONE) for d in to_delete.values()]
    results += [AlterResult(u.user, ErrorCode.NONE) for u in to_upsert.values()]
    results += errors.values()
    return results, list(to_delete.values()), list(to_upsert.values())


def describe_credentials(
    users: Sequence[str] | None,
    credentials: Mapping[str, Mapping[str, ScramCredential]],
) -> list[DescribeResult]:
    """Kafka's DescribeUserScramCredentials answer over ``credentials`` (user -> mechanism -> credential):
    every user with a credential when ``users`` is None or empty (sorted); otherwise each distinct user asked
    for, in order: DUPLICATE_RESOURCE for a user named twice, RESOURCE_NOT_FOUND for one without credentials.
    """
    def found(user: str) -> DescribeResult:
        mechanisms = credentials.get(user, {})
        infos = tuple((MECHANISM_TYPES[m], mechanisms[m].iterations) for m in SCRAM_MECHANISMS if m in mechanisms)
        if not infos:
            return DescribeResult(user, ErrorCode.RESOURCE_NOT_FOUND, DESCRIBE_UNKNOWN + user)
        return DescribeResult(user, ErrorCode.NONE, None, infos)

    if not users:
        return [found(user) for user in sorted(u for u, m in credentials.items() if m)]
    counts: dict[str, int] = {}
    for user in users:
        counts[user] = counts.get(user, 0) + 1
    return [
        DescribeResult(user, ErrorCode.DUPLICATE_RESOURCE, DESCRIBE_TWICE + user) if n > 1 else found(user)
        for user, n in counts.items()
    ]


# -- the store ------------------------------------------------------------------------------------------------------

class ScramCredentialStore:
    """The broker's SCRAM credentials, user -> mechanism -> credential, kept in one file (or only in memory
    when ``path`` is None). Reads are plain dictionary look-ups, safe from the event loop; every change
    writes the whole file atomically and fsyncs it, so callers on the event loop run changes in a thread
    (changes from several threads are serialized by a lock).
    """

    def __init__(
        self, path: Path | None = None, credentials: Mapping[str, Mapping[str, ScramCredential]] | None = None,
    ) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._credentials: dict[str, dict[str, ScramCredential]] = {
            user: dict(by_mechanism) for user, by_mechanism in (credentials or {}).items() if by_mechanism
        }

    @classmethod
    def load(cls, data_dir: Path) -> ScramCredentialStore:
        """The store kept in ``data_dir`` (empty when the file does not exist yet). ValueError naming the file
        when it is not the store's format."""
        path = Path(data_dir) / CREDENTIALS_FILE
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return cls(path)
        try:
            node = json.loads(raw)
            well_formed = isinstance(node, dict) and isinstance(node.get("users"), dict)
            if not well_formed or node.get("version") != _FILE_VERSION:
                raise ValueError(f'expected {{"version": {_FILE_VERSION}, "users": {{...}}}}')
            credentials = {}
            for user, by_mechanism in node["users"].items():
                credentials[user] = {}
                for mechanism, text in by_mechanism.items():
                    hash_name(mechanism)
                    credentials[user][mechanism] = credential_from_string(text)
        except (UnicodeDecodeError, ValueError, AttributeError, TypeError) as e:
            raise ValueError(f"{path}: not a SCRAM credential store: {e}") from None
        return cls(path, credentials)

    # -- reads
    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        """The credential the SCRAM exchange looks up (None for an unknown user or mechanism)."""
        return self._credentials.get(user, {}).get(mechanism)

    def exists(self, user: str, mechanism: str) -> bool:
        return self.get(user, mechanism) is not None

    def users(self) -> list[str]:
        return sorted(self._credentials)

    def list(self) -> dict[str, dict[str, int]]:
        """Every user's mechanisms and their iteration counts (what DescribeUserScramCredentials shows)."""
        return {
            user: {m: c.iterations for m, c in by_mechanism.items()}
            for user, by_mechanism in sorted(self._credentials.items())
        }

    def describe(self, users: Sequence[str] | None = None) -> list[DescribeResult]:
        return describe_credentials(users, self._credentials)

    # -- changes (each persisted before it returns)
    def set(self, user: str, mechanism: str, credential: ScramCredential) -> None:
        if not user:
            raise ValueError(USERNAME_EMPTY)
        hash_name(mechanism)
        with self._lock:
            credentials = self._copy()
            credentials.setdefault(user, {})[mechanism] = credential
            self._commit(credentials)

    def delete(self, user: str, mechanism: str) -> bool:
        """Remove one credential; False when there was none."""
        with self._lock:
            if self.get(user, mechanism) is None:
                return False
            credentials = self._copy()
            del credentials[user][mechanism]
            if not credentials[user]:
                del credentials[user]
            self._commit(credentials)
            return True

    def alter(self, deletions: Iterable[Deletion], upsertions: Iterable[Upsertion]) -> list[AlterResult]:
        """Validate and apply one AlterUserScramCredentials request as Kafka's controller does: the accepted
        alterations are applied together and written once; the results say, per user, what happened."""
        with self._lock:
            results, to_delete, to_upsert = plan_alterations(list(deletions), list(upsertions), self.exists)
            if not to_delete and not to_upsert:
                return results
            credentials = self._copy()
            for d in to_delete:
                by_mechanism = credentials.get(d.user, {})
                by_mechanism.pop(MECHANISMS_BY_TYPE[d.mechanism], None)
                if not by_mechanism:
                    credentials.pop(d.user, None)
            for u in to_upsert:
                mechanism = MECHANISMS_BY_TYPE[u.mechanism]
                credential = from_salted_password(mechanism, u.salt, u.salted_password, u.iterations)
                credentials.setdefault(u.user, {})[mechanism] = credential
            self._commit(credentials)
            return results

    def _copy(self) -> dict[str, dict[str, ScramCredential]]:
        return {user: dict(by_mechanism) for user, by_mechanism in self._credentials.items()}

    def _commit(self, credentials: dict[str, dict[str, ScramCredential]]) -> None:
        # The file first: a change that could not be written is not made.
        if self.path is not None:
            users = {
                user: {m: credential_to_string(c) for m, c in sorted(by_mechanism.items())}
                for user, by_mechanism in sorted(credentials.items())
            }
            data = json.dumps({"version": _FILE_VERSION, "users": users}, indent=1).encode("utf-8") + b"\n"
            _write_private_atomically(self.path, data)
        self._credentials = credentials


def _write_private_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data``, readable by its owner only (the keys stand for passwords): a temporary
    file, fsynced, renamed over the old one, and the directory fsynced."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_path(path.parent)
