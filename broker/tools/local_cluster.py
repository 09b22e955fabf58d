"""``trafka cluster``: a replicated cluster on this machine in one command.

    trafka cluster                          # 3 brokers on 9092-9094, and a ZooKeeper of their own
    trafka cluster --brokers 5 --port 19092 --zookeeper 127.0.0.1:2181/dev --data-dir ./cluster

Each broker is its own ``python -m trafka`` process (trafka.broker.testing.TrafkaCluster), with broker ids
1..n on consecutive ports, their data under ``--data-dir`` (a temporary directory removed at exit when
not given). Without ``--zookeeper`` a ZooKeeper is started from a local installation
(trafka.broker.tools.zookeeper_server: Debian's package, a release, ...) and stopped at exit; where there is
none, it is fetched from Maven Central into trafka's cache, after a question on a terminal. Once every
broker serves, one line says where:

    trafka cluster ready: bootstrap=127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094 zookeeper=127.0.0.1:34117/trafka-...

With ``--control-port`` its brokers are on cue over HTTP (trafka.broker.tools.cluster_control; ``trafka control
--port PORT cluster ...``): stopped, started, killed, paused, isolated (``--network``: ZooKeeper and each broker
on a host of a test network of their own, trafka.broker.testing.network), and leaderships moved.

Ctrl-C (or SIGTERM) stops the brokers cleanly, then ZooKeeper. Exit status: 0 after a clean stop, 1 if
the cluster could not start (the reason on stderr), 2 for bad arguments.
"""
from __future__ import annotations

import argparse
import signal
import sys
import threading

from trafka.broker.testing import BrokerError, TrafkaCluster

DEFAULT_PORT = 9092


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="trafka cluster",
                                     description="Run a replicated trafka cluster on this machine.")
    parser.add_argument("--brokers", type=int, default=3, help="how many brokers (default 3)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help=f"the first broker's port, the others the next ones (default {DEFAULT_PORT}; 0: free ports)")
    parser.add_argument("--zookeeper", metavar="HOST:PORT[/CHROOT]",
                        help="a running ZooKeeper (default: start one from a local installation, fetched if there is none)")
    parser.add_argument("--data-dir", help="where the brokers keep their data (default: a temporary directory)")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="a Kafka property for every broker, e.g. --override min.insync.replicas=2 (repeatable)")
    parser.add_argument("--control-port", type=int,
                        help="serve the cluster's control endpoint on 127.0.0.1:PORT (0 picks a free one): brokers "
                             "stopped, started, paused, isolated, leaderships moved (trafka control ... cluster)")
    parser.add_argument("--network", action="store_true",
                        help="run ZooKeeper and each broker on a host of a test network of their own (Linux, root, "
                             "nftables), so that brokers can be cut off from each other or from ZooKeeper")
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.brokers < 1:
        print("trafka cluster: --brokers must be at least 1", file=sys.stderr)
        return 2
    properties = {}
    for item in args.override:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            print(f"trafka cluster: --override {item!r}: expected key=value", file=sys.stderr)
            return 2
        properties[key.strip()] = value.strip()
    ports = [args.port + index for index in range(args.brokers)] if args.port else None
    # A data directory kept between runs keeps its cluster: the same chroot every time.
    chroot = "" if args.zookeeper and "/" in args.zookeeper else "/trafka" if args.data_dir else None
    # Fetching ZooKeeper is asked about on a terminal; a script gets it fetched, as it says on stderr.
    consent = _ask if sys.stdin.isatty() else None
    try:
        cluster = TrafkaCluster(args.brokers, zookeeper=args.zookeeper, data_dir=args.data_dir, properties=properties,
                                ports=ports, chroot=chroot, zookeeper_consent=consent, network=args.network)
    except BrokerError as exc:
        print(f"trafka cluster: {exc}", file=sys.stderr)
        return 2
    control = None
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    try:
        try:
            cluster.start()
        except BrokerError as exc:
            print(f"trafka cluster: {exc}", file=sys.stderr)
            return 1
        served = ""
        if args.control_port is not None:
            from trafka.broker.tools.cluster_control import ClusterControlServer

            control = ClusterControlServer(cluster, args.control_port)
            served = f" control=127.0.0.1:{control.port}"
        print(f"trafka cluster ready: bootstrap={cluster.bootstrap_servers} zookeeper={cluster.zookeeper_connect} "
              f"data_dir={cluster.data_dir}{served}", flush=True)
        stop.wait()
    finally:
        if control is not None:
            control.close()
        cluster.close()
    return 0


def _ask(question: str) -> bool:
    try:
        answer = input(f"{question} [Y/n] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("", "y", "yes")
