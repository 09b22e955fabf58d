"""The ``trafka`` command: one broker, ready in a blink.

    trafka                                  # 127.0.0.1:9092, data in ./trafka-data
    trafka --port 0 --ephemeral             # a free port, a temporary data dir removed at exit
    trafka --config server.properties       # Kafka's own property names
    trafka --override log.segment.bytes=1048576 --override num.partitions=3
    trafka --secure --user alice:alice-secret   # SASL_SSL only, a throwaway CA: see broker.tools.secure_dev

When the broker is ready it prints one line to stdout, ``trafka ready: bootstrap=HOST:PORT node_id=N
data_dir=DIR [security_protocol=P] [control=HOST:PORT]``, which scripts and test fixtures wait for
(``security_protocol`` when the first listener is not PLAINTEXT); with ``--secure`` the client settings
follow it. SIGINT and SIGTERM shut it down cleanly.

As the JVM does for Kafka, the broker raises its soft limit on open files to the hard limit at
start; each partition holds one descriptor (see ``trafka.broker.descriptors``).
"""
from __future__ import annotations

import argparse
import gc
import logging
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

# Loading the broker creates some 50,000 objects that live as long as the process (modules, classes,
# functions). The cyclic GC would walk them again and again while they are made, about 12 ms of a
# 200 ms start, so it is paused while they load; they are then frozen before it runs again, or its first
# collection would walk them all once more (another 10 ms), and every later one too.
_gc_was_enabled = gc.isenabled()
gc.disable()
try:
    import trio

    from trafka.broker.cluster import CoordinationError
    from trafka.broker.config import BrokerConfig, ConfigError, merge_overrides, parse_properties
    from trafka.broker.descriptors import raise_limit
    from trafka.broker.server import Server
    from trafka.wire.errors import KafkaError
finally:
    gc.freeze()
    if _gc_was_enabled:
        gc.enable()

if TYPE_CHECKING:
    from trafka.broker.tools.secure_dev import SecureDev

log = logging.getLogger("trafka")
#: Allocations between two collections of the cyclic GC's youngest generation (see main()).
GC_YOUNG_THRESHOLD = 50_000


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trafka",
        description="A Kafka-wire-compatible broker. Kafka clients connect to it as to Apache Kafka.",
        epilog="tools, for any Kafka-compatible broker (--bootstrap-server HOST:PORT, default 127.0.0.1:9092):\n"
               "  trafka topics list|describe|create|delete ...\n"
               "  trafka groups list|describe|reset-offsets GROUP ...\n"
               "  trafka configs describe|alter (--topic T | --broker ID) ...\n"
               "  trafka produce TOPIC < lines\n"
               "  trafka consume TOPIC [--from-beginning] [--max-messages N]\n"
               "  trafka users list|set USER [--password P]|delete USER   SCRAM users (before any broker runs:\n"
               "                                         --data-dir DIR, or --zookeeper HOST:PORT[/CHROOT])\n"
               "  trafka acls list|add|remove [--topic T] [--allow-principal User:U] [--operation Read] ...\n"
               "  trafka quotas describe|alter [--entity-type users --entity-name U] [--add-config K=V] ...\n"
               "  each also takes --command-config FILE: a secured listener's client settings (Kafka's names)\n"
               "  trafka control --port CONTROL_PORT faults list|add RULE|remove ID|clear|wait ID\n"
               "a replicated cluster on this machine (brokers and a ZooKeeper):\n"
               "  trafka cluster [--brokers 3] [--port 9092] [--zookeeper HOST:PORT] [--data-dir DIR]\n"
               "each with --help",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--config", metavar="FILE", help="a server.properties file (Kafka's property names)")
    parser.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, help="port to listen on; 0 picks a free one (default 9092)")
    parser.add_argument("--advertised-host", help="host clients are told to connect to (default: the listen host)")
    parser.add_argument("--advertised-port", type=int, help="port clients are told to connect to")
    parser.add_argument("--data-dir", help="where partitions are stored (default ./trafka-data)")
    parser.add_argument(
        "--ephemeral", action="store_true", help="store data in a temporary directory removed at exit"
    )
    parser.add_argument("--node-id", type=int, help="this broker's node.id (default 1)")
    parser.add_argument("--metrics-port", type=int, help="serve Prometheus metrics on this port (metrics.port)")
    parser.add_argument("--control-port", type=int,
                        help="serve the fault-rule control endpoint for tests on 127.0.0.1:PORT (0 picks a free one)")
    parser.add_argument("--controllable-clock", action="store_true",
                        help="let tests move the broker's time forward (the control endpoint's POST /clock/advance, "
                             "trafka control clock advance): timeouts, expiries and retention act as if it had passed")
    parser.add_argument("--kafka-version", metavar="X.Y",
                        help="answer ApiVersions as Apache Kafka X.Y's broker did and serve only those API versions "
                             "(2.0 to 4.4; kafka.version)")
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set a Kafka property, e.g. --override num.partitions=3 (repeatable)",
    )
    parser.add_argument(
        "--log-level", default="INFO", type=str.upper, choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="default INFO (any case)",
    )
    secure = parser.add_argument_group("a secure development broker")
    secure.add_argument(
        "--secure", action="store_true",
        help="serve one SASL_SSL listener (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) on --host/--port instead of "
             "PLAINTEXT, with a certificate from a throwaway CA made in DATA_DIR/dev-security (development only), "
             "and print the client settings to paste (librdkafka's and the Java client's names) after the "
             "ready line; each user's are also written to DATA_DIR/dev-security/USER.properties")
    secure.add_argument(
        "--user", action="append", default=[], metavar="NAME:PASSWORD",
        help="with --secure: a user to create, with SCRAM-SHA-256/512 credentials and as a PLAIN user "
             "(repeatable; default: admin with a generated password, kept in DATA_DIR/dev-security/admin.password)")
    parser.add_argument("--version", action=_VersionAction, help="print trafka's version and exit")
    return parser


class _VersionAction(argparse.Action):
    """``--version``, which looks the version up only when asked (importlib.metadata is slow to load)."""

    def __init__(self, option_strings: list[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            found = version("trafka")
        except PackageNotFoundError:  # a source checkout that was never installed
            found = "(not installed)"
        print(f"trafka {found}")
        parser.exit()


#: What a broker loads after it is ready, when it first needs it: a fork server
#: (:mod:`trafka.broker.testing.forkserver`) loads these too, so that its brokers find them loaded.
LOADED_LATER = (
    "trafka.broker.log_cleaner",
    "trafka.broker.groups.coordinator",
    "trafka.broker.groups.host",
    "trafka.broker.txn.coordinator",
    "trafka.broker.share.coordinator",
    "trafka.broker.share.manager",
    "trafka.broker.replication.manager",
    "trafka.broker.cluster.zookeeper",
    "trafka.broker.security.tls",
    "trafka.broker.security.sasl",
)


def preload() -> None:
    """Load every module a broker loads, at start or later (this module has loaded those of the start)."""
    import importlib

    for name in LOADED_LATER:
        importlib.import_module(name)


def config_from_args(args: argparse.Namespace) -> BrokerConfig:
    if args.ephemeral and args.data_dir is not None:
        raise ConfigError("--ephemeral keeps the data in a temporary directory: it cannot be given with --data-dir")
    props: dict[str, str] = {}
    if args.config:
        props = parse_properties(Path(args.config).read_text())
    merge_overrides(props, args.override)
    if args.kafka_version is not None:
        props["kafka.version"] = args.kafka_version
    if args.user and not args.secure:
        raise ConfigError("--user makes a user of a --secure broker: give --secure too")
    if args.secure:
        from trafka.broker.tools.secure_dev import SecureSetupError, listener_properties
        from trafka.storage.config_defs import DEFAULT_HOST, DEFAULT_PORT

        try:
            props.update(listener_properties(props, DEFAULT_HOST, DEFAULT_PORT))
        except SecureSetupError as exc:
            raise ConfigError(str(exc)) from None
    config = BrokerConfig.from_properties(props)
    for option, port in (("--port", args.port), ("--advertised-port", args.advertised_port)):
        if port is not None and not 0 <= port <= 65535:
            raise ConfigError(f"{option} {port}: a port is 0-65535")
    if args.host is not None:
        config.host = args.host
    if args.port is not None:
        config.port = args.port
    if args.advertised_host is not None:
        config.advertised_host = args.advertised_host
    if args.advertised_port is not None:
        config.advertised_port = args.advertised_port
    if args.data_dir is not None:
        config.data_dir = Path(args.data_dir)
    if args.node_id is not None:
        config.node_id = args.node_id
    if args.metrics_port is not None:
        if not 0 <= args.metrics_port <= 65535:
            raise ConfigError(f"--metrics-port {args.metrics_port}: a port is 0-65535")
        config.metrics_port = args.metrics_port
    if args.control_port is not None:
        if not 0 <= args.control_port <= 65535:
            raise ConfigError(f"--control-port {args.control_port}: a port is 0-65535")
        config.control_port = args.control_port
    if config.kafka_version is not None:
        log.info("answering ApiVersions as Apache Kafka %s's broker did, and serving only those versions",
                 config.kafka_version)
    return config


async def run(config: BrokerConfig, secure: SecureDev | None = None) -> None:
    server = Server(config)
    async with trio.open_nursery() as nursery:

        async def on_signal() -> None:
            with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for signum in signals:
                    log.info("received %s, shutting down", signal.Signals(signum).name)
                    server.request_shutdown()
                    return

        nursery.start_soon(on_signal)
        await nursery.start(server.run)
        host, port = server.config.advertised_address  # the ports the server bound
        protocol = server.config.listeners[0].security_protocol
        security = f" security_protocol={protocol}" if protocol != "PLAINTEXT" else ""
        control = f" control=127.0.0.1:{server.config.control_port}" if config.control_port is not None else ""
        ready = f"trafka ready: bootstrap={host}:{port} node_id={config.node_id} data_dir={config.data_dir}"
        if secure is not None:
            secure.write_client_files(f"{host}:{port}")
            print(f"{ready}{security}{control}\n{secure.announcement(f'{host}:{port}')}", flush=True)
        else:
            print(f"{ready}{security}{control}", flush=True)
        await server.stopped.wait()
        nursery.cancel_scope.cancel()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "cluster":
        from trafka.broker.tools.local_cluster import main as cluster

        return cluster(argv[1:])
    if argv and argv[0] == "control":
        from trafka.broker.tools.control_client import main as control

        return control(argv[1:])
    if argv and argv[0] in TOOLS:
        from trafka.broker.tools.commands import main as run_tool

        common, rest = _common_options(argv[1:])
        return run_tool([*common, argv[0], *rest])
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        config = config_from_args(args)
    except (ConfigError, OSError) as exc:
        print(f"trafka: {exc}", file=sys.stderr)
        return 2
    gc.freeze()
    # A broker's state lives long (topics, partitions, logs, groups) and its requests make short-lived,
    # acyclic objects that reference counting frees. At the default threshold (700 allocations) a Metadata
    # answer for 10,000 topics set off collections that walked the whole state again and again: 350 ms
    # instead of 110. Collections of the young generation come every 50,000 allocations instead (about a
    # millisecond each), and of the older ones less often.
    gc.set_threshold(GC_YOUNG_THRESHOLD, 20, 20)
    before, after = raise_limit()
    if after != before:
        log.info("raised the file descriptor limit from %d to %d (the hard limit)", before, after)
    temp_dir = None
    if args.ephemeral:
        temp_dir = tempfile.mkdtemp(prefix="trafka-")
        config.data_dir = Path(temp_dir)
    try:
        secure = _secure(config, args.user) if args.secure else None
    except (ConfigError, ValueError, OSError) as exc:
        if temp_dir is not None:
            shutil.rmtree(temp_dir, ignore_errors=True)
        print(f"trafka: {exc}", file=sys.stderr)
        return 2
    trio_clock = None
    if args.controllable_clock:
        from trafka.broker import clock

        trio_clock = clock.install().trio_clock
    try:
        trio.run(run, config, secure, clock=trio_clock)
    except Exception as exc:
        # Bad properties that only the broker's parts can judge (topic defaults, group settings)
        # and addresses that cannot be bound get one line each, not a traceback.
        errors = list(_leaf_exceptions(exc))
        if not all(isinstance(e, (ConfigError, KafkaError, OSError, CoordinationError)) for e in errors):
            raise
        for error in errors:
            print(f"trafka: {error.message if isinstance(error, KafkaError) and error.message else error}",
                  file=sys.stderr)
        return 1 if all(isinstance(e, OSError) for e in errors) else 2
    finally:
        if temp_dir is not None:
            shutil.rmtree(temp_dir, ignore_errors=True)
    return 0


#: The tools' subcommands (broker.tools); anything else runs the broker.
TOOLS = ("topics", "groups", "configs", "produce", "consume", "users", "acls", "quotas")
#: The tools' options that apply to every subcommand, taken from anywhere after it (as Kafka's tools do).
COMMON_OPTIONS = ("--bootstrap-server", "--command-config")


def _common_options(argv: list[str]) -> tuple[list[str], list[str]]:
    """The common options given anywhere after the subcommand, and the rest of the arguments."""
    common: list[str] = []
    rest: list[str] = []
    items = iter(argv)
    for item in items:
        name, equals, value = item.partition("=")
        if name in COMMON_OPTIONS and equals:
            common += [name, value]
        elif item in COMMON_OPTIONS:
            common += [item, next(items, "")]
        else:
            rest.append(item)
    return common, rest


def _secure(config: BrokerConfig, users: list[str]) -> SecureDev:
    """``--secure``'s certificates, users and listener settings, made before the event loop starts (PBKDF2
    and key generation would hold it up); the listener's settings join the broker's properties."""
    from trafka.broker.tools.secure_dev import SecureSetupError, prepare

    listener = config.listeners[0]
    hosts = ["localhost", "127.0.0.1", listener.host, listener.advertised_address[0]]
    try:
        secure = prepare(config.data_dir, hosts, users)
    except SecureSetupError as exc:
        raise ConfigError(str(exc)) from None
    config.properties.update(secure.broker_properties())
    # The storage warns of directories in the data directory that are no partition's; this one is ours.
    logging.getLogger("trafka.storage.manager").addFilter(
        lambda record: not (record.args and DEV_DIR_NAME in map(str, record.args)))
    return secure


#: Where --secure keeps its files in the data directory (trafka.broker.tools.secure_dev.DEV_DIR).
DEV_DIR_NAME = "dev-security"


def _leaf_exceptions(exc: BaseException):
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaf_exceptions(inner)
    else:
        yield exc


if __name__ == "__main__":
    sys.exit(main())
