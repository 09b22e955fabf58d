"""librdkafka's built-in mock cluster as a stand-alone broker process: the client's own ceiling.

librdkafka ships a mock Kafka cluster (the one ``test.mock.num.brokers`` turns on). It answers the
protocol from C threads and keeps only a bounded window of each partition in memory, so it bounds what
any broker can show with this client. confluent-kafka does not expose its API, so this process opens
the librdkafka library that confluent-kafka bundles through ctypes, starts a one-broker mock cluster
listening on loopback and prints a ready line like trafka's::

    mock ready: bootstrap=127.0.0.1:PORT librdkafka=2.x.y

The mock serves no CreateTopics, so topics are created through this process's stdin, one command a
line: ``create TOPIC PARTITIONS`` is answered ``ok`` or ``error CODE``. End of stdin (or SIGTERM)
stops the cluster.

    python -m bench.mock_cluster
"""
from __future__ import annotations

import ctypes
import glob
import importlib.util
import os
import sys

RD_KAFKA_PRODUCER = 0


def librdkafka_path() -> str:
    """The librdkafka shared library bundled in the confluent-kafka wheel."""
    spec = importlib.util.find_spec("confluent_kafka")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("confluent-kafka is not installed")
    package_dir = next(iter(spec.submodule_search_locations))
    candidates = sorted(glob.glob(os.path.join(package_dir + ".libs", "librdkafka*.so*")))
    candidates += sorted(glob.glob(os.path.join(package_dir, ".dylibs", "librdkafka*.dylib")))
    if not candidates:
        raise RuntimeError(f"no bundled librdkafka next to {package_dir}")
    return candidates[0]


def open_librdkafka() -> ctypes.CDLL:
    lib = ctypes.CDLL(librdkafka_path())
    lib.rd_kafka_version_str.restype = ctypes.c_char_p
    lib.rd_kafka_conf_new.restype = ctypes.c_void_p
    lib.rd_kafka_conf_set.restype = ctypes.c_int
    lib.rd_kafka_conf_set.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.rd_kafka_new.restype = ctypes.c_void_p
    lib.rd_kafka_new.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.rd_kafka_mock_cluster_new.restype = ctypes.c_void_p
    lib.rd_kafka_mock_cluster_new.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.rd_kafka_mock_cluster_bootstraps.restype = ctypes.c_char_p
    lib.rd_kafka_mock_cluster_bootstraps.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_mock_topic_create.restype = ctypes.c_int
    lib.rd_kafka_mock_topic_create.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
    lib.rd_kafka_mock_group_initial_rebalance_delay_ms.restype = None
    lib.rd_kafka_mock_group_initial_rebalance_delay_ms.argtypes = [ctypes.c_void_p, ctypes.c_int32]
    lib.rd_kafka_mock_cluster_destroy.restype = None
    lib.rd_kafka_mock_cluster_destroy.argtypes = [ctypes.c_void_p]
    return lib


def main() -> int:
    lib = open_librdkafka()
    errstr = ctypes.create_string_buffer(512)
    conf = lib.rd_kafka_conf_new()
    # The handle only hosts the cluster; it connects nowhere, so its "no bootstrap.servers" notice is noise.
    lib.rd_kafka_conf_set(conf, b"log_level", b"3", errstr, len(errstr))
    handle = lib.rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, len(errstr))
    if not handle:
        print(f"mock: rd_kafka_new failed: {errstr.value.decode()}", file=sys.stderr)
        return 1
    cluster = lib.rd_kafka_mock_cluster_new(handle, 1)
    if not cluster:
        print("mock: rd_kafka_mock_cluster_new failed", file=sys.stderr)
        return 1
    # Same developer default as trafka: a new group does not wait for more members before its first
    # rebalance (Apache Kafka waits group.initial.rebalance.delay.ms=3000).
    lib.rd_kafka_mock_group_initial_rebalance_delay_ms(cluster, 0)
    bootstrap = lib.rd_kafka_mock_cluster_bootstraps(cluster).decode()
    version = lib.rd_kafka_version_str().decode()
    print(f"mock ready: bootstrap={bootstrap} librdkafka={version}", flush=True)
    try:
        for line in sys.stdin:
            words = line.split()
            if len(words) == 3 and words[0] == "create":
                code = lib.rd_kafka_mock_topic_create(cluster, words[1].encode(), int(words[2]), 1)
                print("ok" if code == 0 else f"error {code}", flush=True)
            elif words:
                print(f"error unknown command {words[0]!r}", flush=True)
    except KeyboardInterrupt:
        pass
    lib.rd_kafka_mock_cluster_destroy(cluster)
    return 0


if __name__ == "__main__":
    sys.exit(main())
