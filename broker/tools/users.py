"""``trafka users``: SCRAM users, as ``kafka-configs.sh --entity-type users`` and ``kafka-storage.sh format
--add-scram`` manage them.

Against a running broker (trafka, or any Kafka since 2.7), through DescribeUserScramCredentials and
AlterUserScramCredentials, with ``--bootstrap-server`` and ``--command-config`` as every tool takes them:

    trafka users list [USER ...]                     USER, MECHANISM, ITERATIONS (a tab between, sorted)
    trafka users set USER [--password P] [--mechanism SCRAM-SHA-256|SCRAM-SHA-512] [--iterations N]
    trafka users delete USER [--mechanism M]

Before any broker runs (how the first user is made, the one a broker with only SASL listeners needs before
anyone can log in): on a single broker's data directory (Kafka's ``kafka-storage.sh format --add-scram``),
which the broker reads when it starts, or in a cluster's ZooKeeper (Kafka's ``kafka-configs.sh --zookeeper``),
``/config/users/<user>`` with a change notification, which every broker follows, running or not:

    trafka users set USER --password P --data-dir DIR        (``add`` is the same command)
    trafka users set USER --password P --zookeeper HOST:PORT[/CHROOT]
    trafka users list --data-dir DIR | --zookeeper HOST:PORT[/CHROOT]
    trafka users delete USER --data-dir DIR | --zookeeper HOST:PORT[/CHROOT]

``set`` gives a user both SCRAM mechanisms unless ``--mechanism`` names one (repeatable), with 4096
iterations (Kafka's minimum; at most 16384). The password is salted and hashed here, on the client's side,
as Kafka's admin client does: only the salted password crosses the network. Without ``--password`` it is
asked for (twice) on a terminal, or read as the first line of standard input.

A broker's refusals are shown with Kafka's error names and messages, per user and mechanism
(``RESOURCE_NOT_FOUND: Attempt to delete a user credential that does not exist``); the exit code is then 1.
"""
from __future__ import annotations

import argparse
import secrets
import sys
from pathlib import Path

from trafka.broker.tools.admin_client import AdminClient, ClientError, check

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
MECHANISM_TYPES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
DEFAULT_ITERATIONS = 4096
DESCRIBE_VERSION = ALTER_VERSION = 0


def add_parser(commands: argparse._SubParsersAction) -> None:
    users = commands.add_parser(
        "users", help="list, set and delete SCRAM users (of a broker, or of a data directory before it starts)",
        description="SCRAM users (SCRAM-SHA-256, SCRAM-SHA-512) of a running broker (--bootstrap-server HOST:PORT, "
                    "--command-config FILE for a secured listener), or before any broker runs: those of a data "
                    "directory (--data-dir DIR) or of a cluster's ZooKeeper (--zookeeper HOST:PORT[/CHROOT])."
    ).add_subparsers(dest="action", required=True)
    data_dir = argparse.ArgumentParser(add_help=False)
    where = data_dir.add_mutually_exclusive_group()
    where.add_argument("--data-dir", metavar="DIR",
                       help="the users kept in this data directory (no broker may be using it), instead of a "
                            "running broker's")
    where.add_argument("--zookeeper", metavar="HOST:PORT[/CHROOT]",
                       help="the users of the cluster coordinated there (zookeeper.connect), instead of a running "
                            "broker's")
    listing = users.add_parser("list", parents=[data_dir], help="users with their mechanisms and iterations")
    listing.add_argument("users", nargs="*", metavar="USER", help="default: every user")
    setting = users.add_parser("set", aliases=["add"], parents=[data_dir],
                               help="create a user or change its password")
    setting.add_argument("user")
    setting.add_argument("--password", help="default: asked for on a terminal, else the first line of stdin")
    setting.add_argument("--mechanism", action="append", choices=SCRAM_MECHANISMS, type=str.upper,
                         help="default: both (repeatable)")
    setting.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS,
                         help=f"PBKDF2 iterations, 4096-16384 (default {DEFAULT_ITERATIONS})")
    deleting = users.add_parser("delete", parents=[data_dir], help="delete a user's credentials")
    deleting.add_argument("user")
    deleting.add_argument("--mechanism", action="append", choices=SCRAM_MECHANISMS, type=str.upper,
                          help="default: every mechanism the user has (repeatable)")


def _action(args: argparse.Namespace) -> str:
    return "set" if args.action == "add" else args.action


def read_password(args: argparse.Namespace) -> str:
    if args.password is not None:
        password = args.password
    elif sys.stdin.isatty():
        import getpass

        password = getpass.getpass(f"Password for {args.user}: ")
        if getpass.getpass("Again: ") != password:
            raise ClientError("the passwords differ")
    else:
        password = sys.stdin.readline().rstrip("\r\n")
    if not password:
        raise ClientError(f"no password for {args.user}: give --password, or a line on standard input")
    return password


def _print_credentials(user: str, credentials: list[tuple[str, int]]) -> None:
    for mechanism, iterations in credentials:
        print(f"{user}\t{mechanism}\t{iterations}")


# -- a running broker --------------------------------------------------------------------------------------------


def _describe(client: AdminClient, users: list[str] | None):
    from trafka.wire.messages import DescribeUserScramCredentialsRequest as D

    response = client.request(D(users=None if not users else [D.UserName(name=u) for u in users]), DESCRIBE_VERSION)
    check(response.error_code, "describing SCRAM users", response.error_message)
    return response.results


def _mechanism_name(code: int) -> str:
    return next((name for name, value in MECHANISM_TYPES.items() if value == code), f"UNKNOWN({code})")


def _list(client: AdminClient, args: argparse.Namespace) -> int:
    failed = 0
    print("USER\tMECHANISM\tITERATIONS")
    for result in sorted(_describe(client, list(args.users)), key=lambda r: r.user):  # Kafka's order is a hash's
        try:
            check(result.error_code, f"user {result.user}", result.error_message)
        except ClientError as exc:
            print(f"trafka users: {exc}", file=sys.stderr)
            failed = 1
            continue
        _print_credentials(result.user, [(_mechanism_name(c.mechanism), c.iterations)
                                         for c in sorted(result.credential_infos, key=lambda c: c.mechanism)])
    return failed


def _alter(client: AdminClient, user: str, what: str, *, deletion: str | None = None,
           upsertion: tuple[str, int, bytes, bytes] | None = None) -> None:
    """One alteration per request: Kafka refuses a user altered twice in one request."""
    from trafka.wire.messages import AlterUserScramCredentialsRequest as A

    deletions = [A.ScramCredentialDeletion(name=user, mechanism=MECHANISM_TYPES[deletion])] if deletion else []
    upsertions = []
    if upsertion is not None:
        mechanism, iterations, salt, salted = upsertion
        upsertions = [A.ScramCredentialUpsertion(name=user, mechanism=MECHANISM_TYPES[mechanism],
                                                 iterations=iterations, salt=salt, salted_password=salted)]
    response = client.request(A(deletions=deletions, upsertions=upsertions), ALTER_VERSION)
    for result in response.results:
        check(result.error_code, what, result.error_message)


def _set(client: AdminClient, args: argparse.Namespace) -> int:
    from trafka.broker.security.credentials import salted_password

    if not 1 <= args.iterations <= 1_000_000:  # (Kafka's own bounds are the broker's to tell)
        raise ClientError(f"--iterations {args.iterations}: expected 4096 to 16384, Kafka's bounds")
    password = read_password(args)
    for mechanism in args.mechanism or SCRAM_MECHANISMS:
        salt = secrets.token_bytes(32)
        salted = salted_password(mechanism, password, salt, args.iterations)
        _alter(client, args.user, f"setting the {mechanism} credential of user {args.user}",
               upsertion=(mechanism, args.iterations, salt, salted))
        print(f"Set the {mechanism} credential of user {args.user} ({args.iterations} iterations).")
    return 0


def _delete(client: AdminClient, args: argparse.Namespace) -> int:
    mechanisms = args.mechanism
    if not mechanisms:
        (result,) = _describe(client, [args.user])
        check(result.error_code, f"user {args.user}", result.error_message)
        mechanisms = [_mechanism_name(c.mechanism) for c in sorted(result.credential_infos, key=lambda c: c.mechanism)]
    for mechanism in mechanisms:
        _alter(client, args.user, f"deleting the {mechanism} credential of user {args.user}", deletion=mechanism)
        print(f"Deleted the {mechanism} credential of user {args.user}.")
    return 0


ACTIONS = {"list": _list, "set": _set, "add": _set, "delete": _delete}


# -- a data directory, before the broker starts ----------------------------------------------------------------


def offline(args: argparse.Namespace) -> int:
    """``--data-dir DIR``: the users kept in a data directory no broker is using (its lock is held meanwhile);
    ``--zookeeper``: a cluster's users, in ZooKeeper."""
    if args.zookeeper is not None:
        return in_zookeeper(args)
    data_dir = Path(args.data_dir)
    if _action(args) == "set" and not 4096 <= args.iterations <= 16384:
        raise ClientError(f"--iterations {args.iterations}: Kafka takes 4096 to 16384")
    with locked(data_dir, create=_action(args) == "set"):
        from trafka.broker.security.credentials import ScramCredentialStore, from_password
        from trafka.wire.errors import ErrorCode

        try:
            store = ScramCredentialStore.load(data_dir)
        except ValueError as exc:
            raise ClientError(str(exc)) from None
        action = _action(args)
        if action == "list":
            failed = 0
            print("USER\tMECHANISM\tITERATIONS")
            for result in sorted(store.describe(list(args.users)), key=lambda r: r.user):
                if result.error != ErrorCode.NONE:
                    print(f"trafka users: user {result.user}: {result.error.name}: {result.message}", file=sys.stderr)
                    failed = 1
                    continue
                _print_credentials(result.user, [(_mechanism_name(m), i) for m, i in result.credentials])
            return failed
        if action == "set":
            if not args.user:
                raise ClientError("Username must not be empty")
            password = read_password(args)
            for mechanism in args.mechanism or SCRAM_MECHANISMS:
                store.set(args.user, mechanism, from_password(mechanism, password, args.iterations))
                print(f"Set the {mechanism} credential of user {args.user} ({args.iterations} iterations) "
                      f"in {data_dir}.")
            return 0
        mechanisms = args.mechanism or [m for m in SCRAM_MECHANISMS if store.exists(args.user, m)]
        if not mechanisms:
            raise ClientError(f"user {args.user}: RESOURCE_NOT_FOUND: Attempt to describe a user credential that "
                              f"does not exist: {args.user}")
        for mechanism in mechanisms:
            if not store.delete(args.user, mechanism):
                raise ClientError(f"deleting the {mechanism} credential of user {args.user}: RESOURCE_NOT_FOUND: "
                                  "Attempt to delete a user credential that does not exist")
            print(f"Deleted the {mechanism} credential of user {args.user} in {data_dir}.")
        return 0


def in_zookeeper(args: argparse.Namespace) -> int:
    """A cluster's users where Kafka keeps them: ``/config/users/<sanitized user>`` under the chroot."""
    from kazoo.client import KazooClient
    from kazoo.exceptions import KazooException, NoNodeError
    from kazoo.handlers.threading import KazooTimeoutError

    from trafka.broker.security.credentials import (
        decode_zk_user_config,
        describe_credentials,
        desanitize,
        encode_zk_user_config,
        from_password,
        zk_user_change_notification,
        zk_user_path,
    )
    from trafka.wire.errors import ErrorCode

    action = _action(args)
    if action == "set" and not 4096 <= args.iterations <= 16384:
        raise ClientError(f"--iterations {args.iterations}: Kafka takes 4096 to 16384")
    hosts, slash, chroot = args.zookeeper.partition("/")
    root = f"/{chroot.strip('/')}" if slash and chroot.strip("/") else ""
    client = KazooClient(hosts=hosts, timeout=10)
    try:
        client.start(timeout=15)
    except (KazooTimeoutError, KazooException, ValueError) as exc:
        client.close()
        raise ClientError(f"cannot connect to ZooKeeper at {hosts}: {exc or 'timed out'}") from None

    def read(user: str):
        try:
            data, stat = client.get(root + zk_user_path(user))
        except NoNodeError:
            return {}, {}, None
        try:
            credentials, other = decode_zk_user_config(data)
        except ValueError as exc:
            raise ClientError(f"{root + zk_user_path(user)}: {exc}") from None
        return credentials, other, stat

    def write(user: str, credentials, other, stat) -> None:
        path = root + zk_user_path(user)
        if stat is None:
            client.create(path, encode_zk_user_config(credentials, other), makepath=True)
        else:
            client.set(path, encode_zk_user_config(credentials, other), version=stat.version)
        client.create(f"{root}/config/changes/config_change_", zk_user_change_notification(user), sequence=True,
                      makepath=True)

    try:
        if action == "list":
            try:
                names = [desanitize(name) for name in client.get_children(f"{root}/config/users")]
            except NoNodeError:
                names = []
            credentials = {name: read(name)[0] for name in names}
            failed = 0
            print("USER\tMECHANISM\tITERATIONS")
            for result in sorted(describe_credentials(list(args.users), credentials), key=lambda r: r.user):
                if result.error != ErrorCode.NONE:
                    print(f"trafka users: user {result.user}: {result.error.name}: {result.message}", file=sys.stderr)
                    failed = 1
                    continue
                _print_credentials(result.user, [(_mechanism_name(m), i) for m, i in result.credentials])
            return failed
        credentials, other, stat = read(args.user)
        if action == "set":
            if not args.user:
                raise ClientError("Username must not be empty")
            password = read_password(args)
            mechanisms = args.mechanism or list(SCRAM_MECHANISMS)
            for mechanism in mechanisms:
                credentials[mechanism] = from_password(mechanism, password, args.iterations)
            write(args.user, credentials, other, stat)
            for mechanism in mechanisms:
                print(f"Set the {mechanism} credential of user {args.user} ({args.iterations} iterations) "
                      f"in ZooKeeper {args.zookeeper}.")
            return 0
        mechanisms = args.mechanism or [m for m in SCRAM_MECHANISMS if m in credentials]
        if not mechanisms:
            raise ClientError(f"user {args.user}: RESOURCE_NOT_FOUND: Attempt to describe a user credential that "
                              f"does not exist: {args.user}")
        for mechanism in mechanisms:
            if credentials.pop(mechanism, None) is None:
                raise ClientError(f"deleting the {mechanism} credential of user {args.user}: RESOURCE_NOT_FOUND: "
                                  "Attempt to delete a user credential that does not exist")
        write(args.user, credentials, other, stat)
        for mechanism in mechanisms:
            print(f"Deleted the {mechanism} credential of user {args.user} in ZooKeeper {args.zookeeper}.")
        return 0
    except KazooException as exc:
        raise ClientError(f"ZooKeeper {args.zookeeper}: {type(exc).__name__}: {exc}") from None
    finally:
        client.stop()
        client.close()


class locked:
    """Hold a data directory's lock (the one a broker holds while it runs) for an offline change."""

    def __init__(self, data_dir: Path, *, create: bool) -> None:
        self.data_dir = data_dir
        self.create = create
        self._fd: int | None = None

    def __enter__(self) -> locked:
        import fcntl
        import os

        from trafka.storage.manager import LOCK_FILE

        if not self.data_dir.is_dir():
            if not self.create:
                raise ClientError(f"--data-dir {self.data_dir}: no such directory")
            self.data_dir.mkdir(parents=True)
        fd = os.open(self.data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ClientError(f"a broker is using {self.data_dir}: change its users through it, with "
                              "--bootstrap-server HOST:PORT (and --command-config FILE for a secured listener)"
                              ) from None
        self._fd = fd
        return self

    def __exit__(self, *exc_info: object) -> None:
        import os

        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
