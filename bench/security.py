"""TLS and SASL_SSL beside PLAINTEXT: what encryption and authentication cost produce and consume
throughput, on trafka and Apache Kafka side by side.

    python -m bench --security            # about 3-4 minutes on 2 cores
    python -m bench --security --quick    # a check that the mode works: about a minute
    python -m bench --security --brokers trafka   # one broker only (trafka, kafka)

Each broker is started once with three listeners on 127.0.0.1: PLAINTEXT, SSL (server certificate from a
throwaway CA, ``trafka.broker.security.dev_certs``, no client certificate) and SASL_SSL (the same TLS
settings, SCRAM-SHA-512, one user created before the start). Both get the same ``listener.name.<l>.*``
properties (Kafka's names: PEM keystore and truststore files, ``sasl.enabled.mechanisms``, the SCRAM
login module). Topics are created over PLAINTEXT before any clock starts, one per listener, 1 partition.

The workloads are the main benchmark's 1 KB produce and consume cells (``bench.workloads.produce`` and
``consume``, same code and client settings: confluent-kafka, ``linger.ms=5``, ``batch.size`` 1 MiB,
compression none, no key, random payload, acks=1; the consumer ``assign()``s partition 0 from the start,
no group, ``fetch.queue.backoff.ms=10``), each run in a fresh client process
(``python -m bench.security --workload JSON``) whose every client configuration gets the listener's
``security.protocol``, ``ssl.ca.location`` and SASL settings added, nothing else:

0. **Warm-up**: ``warmup_count`` records produced over each listener of each broker, not counted (Kafka's
   JIT compiler is seconds old otherwise, and its TLS code path has not run yet).
1. **Produce**: ``count`` x 1 KB over each listener, time from the first ``produce()`` to ``flush()``
   returning; every (broker, listener) pair in turns, ``repeats`` rounds, each round starting one pair
   further on (``bench.common.in_turns``): the median.
2. **Consume**: ``count`` records from the start of the listener's own topic, over that listener: steady
   rate from the first batch to the last (the TLS handshake and the SCRAM exchange fall before it and show
   in the time to the first record), in turns as above, the median.

Reported: records/s and MB/s per broker and listener, the cores the broker and the client kept busy,
each broker's SSL and SASL_SSL figures as a ratio of its own PLAINTEXT figure (the cost of TLS on that
broker), and trafka/kafka per listener. Results: ``bench/results/<date>-security.json`` and ``.md``
(``-security-quick`` for ``--quick``).
"""
from __future__ import annotations

import shutil
import socket
import ssl
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import brokers, common, variants
from bench.common import Progress, lookup, size_label
from bench.variants import num as _num

SUPPORTED = ("trafka", "kafka")
LISTENERS = ("PLAINTEXT", "SSL", "SASL_SSL")
SECURED = ("SSL", "SASL_SSL")
MECHANISM = "SCRAM-SHA-512"
USER, PASSWORD = "bench", "bench-secret"
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"


SecurityPlan = variants.Plan
FULL = SecurityPlan(mode="security", size=1024, count=200_000, repeats=5, warmup_count=100_000)
QUICK = SecurityPlan(mode="security-quick", size=1024, count=50_000, repeats=1, warmup_count=10_000)


# ---------------------------------------------------------------------------------------------------
# The client process (common.main_workload): the main benchmark's workload, with the listener's security
# settings.


def run_workload(params: dict[str, Any], timeout: float = common.WORKLOAD_TIMEOUT_S) -> dict[str, Any]:
    return common.run_workload("bench.security", params, timeout)


# ---------------------------------------------------------------------------------------------------
# The harness


def listener_properties(certs: Any) -> dict[str, str]:
    """The SSL and SASL_SSL listeners' settings, the same for both brokers: the broker's PEM keystore and
    the CA as PEM truststore, no client certificate asked for; SCRAM-SHA-512 only on SASL_SSL."""
    properties: dict[str, str] = {}
    for listener in SECURED:
        for key, value in certs.listener_settings(client_auth="none").items():
            properties[f"listener.name.{listener.lower()}.{key}"] = value
    properties["listener.name.sasl_ssl.sasl.enabled.mechanisms"] = MECHANISM
    properties[f"listener.name.sasl_ssl.{MECHANISM.lower()}.sasl.jaas.config"] = SCRAM_JAAS
    return properties


def client_config(listener: str, ca: Path) -> dict[str, str]:
    """What a confluent-kafka client adds to reach ``listener`` (nothing for PLAINTEXT). librdkafka checks
    the broker's certificate against the address it connects to (127.0.0.1, in the certificate's names)."""
    if listener == "PLAINTEXT":
        return {}
    config = {"security.protocol": listener, "ssl.ca.location": str(ca)}
    if listener == "SASL_SSL":
        config.update({"sasl.mechanism": MECHANISM, "sasl.username": USER, "sasl.password": PASSWORD})
    return config


def topic_for(listener: str) -> str:
    return f"security-{listener.lower()}"


def tls_session(address: str, ca: Path) -> dict[str, Any]:
    """The TLS version and cipher a Python ``ssl`` client (OpenSSL, as librdkafka's) negotiates with the
    listener at ``address``, and the handshake's duration."""
    host, port = address.rsplit(":", 1)
    context = ssl.create_default_context(cafile=str(ca))
    started = time.perf_counter()
    try:
        with socket.create_connection((host, int(port)), timeout=10) as raw:
            with context.wrap_socket(raw, server_hostname=host) as tls:
                handshake_s = time.perf_counter() - started
                cipher = tls.cipher()
                return {"version": tls.version(), "cipher": cipher[0] if cipher else None,
                        "handshake_ms": round(handshake_s * 1000, 2)}
    except (OSError, ssl.SSLError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}


class Subject:
    """One broker serving the three listeners: its process, its listeners, its results so far."""

    def __init__(self, name: str, certs: Any, live: list[brokers.BrokerProcess]) -> None:
        self.name, self.ca = name, certs.ca
        self.extra = brokers.ExtraListeners.on_free_ports(
            {listener: listener for listener in SECURED}, properties=listener_properties(certs),
            scram_users={USER: PASSWORD}, scram_mechanisms=(MECHANISM,))
        self.broker = brokers.start(brokers.with_listeners(brokers.SPECS[name], self.extra))
        live.append(self.broker)
        self.results: dict[str, Any] = {
            "start_to_ready_s": self.broker.ready_s,
            "listeners": {"PLAINTEXT": self.broker.bootstrap,
                          **{listener: self.extra.address(listener) for listener in SECURED}},
            # The first handshake on each listener, right after the start (on Kafka, the JVM's first run of its
            # TLS code); ``tls`` holds another one after the rounds.
            "tls_first": {listener: tls_session(self.extra.address(listener), self.ca) for listener in SECURED},
            "warmup": {}, "produce": {}, "consume": {},
        }
        for listener in LISTENERS:
            self.broker.create_topic(topic_for(listener), 1)

    def address(self, listener: str) -> str:
        return self.broker.bootstrap if listener == "PLAINTEXT" else self.extra.address(listener)

    def run(self, listener: str, params: dict[str, Any]) -> dict[str, Any]:
        result = run_workload({"bootstrap": self.address(listener), "broker_pid": self.broker.pid,
                               "client_config": client_config(listener, self.ca), **params})
        if not self.broker.alive():
            result["error"] = f"broker exited: {self.broker.log_tail(5)}"
        return result


def run(plan: SecurityPlan, subjects: list[Subject], progress: Progress) -> None:
    keys = [(s, listener) for listener in LISTENERS for s in subjects]
    measured = variants.measure(
        plan, keys, lambda key, params: key[0].run(key[1], {**params, "topic": topic_for(key[1])}),
        name=lambda key: key[0].name, label=lambda key: f" over {key[1]}", progress=progress)
    for section, results in measured.items():
        for (s, listener), result in results.items():
            s.results[section][listener] = result


def derive(by_broker: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Each broker's SSL and SASL_SSL rates over its own PLAINTEXT rate (in its results, as
    ``relative_to_plaintext``), and trafka's rate over kafka's per listener (returned)."""
    for results in by_broker.values():
        relative = results["relative_to_plaintext"] = {}
        for section in ("produce", "consume"):
            plain = lookup(results, (section, "PLAINTEXT", "records_per_s"))
            for listener in SECURED:
                secured = lookup(results, (section, listener, "records_per_s"))
                relative[f"{section} {listener}"] = secured / plain if plain and secured else None
    return variants.trafka_over_kafka(by_broker, LISTENERS, _where)


def _where(section: str, listener: str) -> tuple[str, ...]:
    return (section, listener)


# ---------------------------------------------------------------------------------------------------
# Reporting


def report(plan: SecurityPlan, document: dict[str, Any]) -> str:
    by_broker: dict[str, dict[str, Any]] = document["results"]
    names = list(by_broker)
    what = (f"{plan.count:,} x {size_label(plan.size)} records, acks={plan.acks}, {plan.partitions} partition, "
            f"median of {plan.repeats} run{'s' if plan.repeats > 1 else ''} in turns")
    lines = variants.heading("Security", document, what)
    lines += variants.throughput_table(document, LISTENERS, str, _where)

    lines += ["", "Each broker's secured figures over its own PLAINTEXT figure (records/s; 1.00 = TLS costs nothing):",
              "", "| over own PLAINTEXT | " + " | ".join(names) + " |", "|" + "---|" * (len(names) + 1)]
    for section in ("produce", "consume"):
        for listener in SECURED:
            key = f"{section} {listener}"
            cells = [_num(lookup(by_broker[n], ("relative_to_plaintext", key)), ".2f") for n in names]
            lines.append(f"| **{section}, {listener}** | " + " | ".join(cells) + " |")

    lines += ["", "TLS as a Python ssl client (OpenSSL, as librdkafka) negotiates it: version, cipher, and the "
              "handshake's duration after the rounds (the first one, right after the start, in brackets):", ""]
    for n in names:
        for listener in SECURED:
            t = lookup(by_broker[n], ("tls", listener)) or {}
            first = lookup(by_broker[n], ("tls_first", listener, "handshake_ms"))
            lines.append(f"- {n} {listener}: " + (
                f"{t['version']}, {t['cipher']}, {t['handshake_ms']:.1f} ms ({_num(first, '.1f')} ms)"
                if "version" in t else t.get("error", "n/a")))
    errors = []
    for n in names:
        for section in ("warmup", "produce", "consume"):
            for listener, r in (by_broker[n].get(section) or {}).items():
                if isinstance(r, dict) and "error" in r:
                    errors.append(f"- {n} {section} {listener}: {r['error']}")
    if errors:
        lines += ["", "Errors:", "", *errors]
    for note in document.get("notes", []):
        lines += ["", note]
    return "\n".join(lines) + "\n"


def settings(plan: SecurityPlan, properties: dict[str, str]) -> dict[str, Any]:
    return {
        "workloads": "bench.workloads produce and consume (the main benchmark's, same client settings): "
                     f"confluent-kafka, {plan.count:,} x {size_label(plan.size)}, acks={plan.acks}, linger.ms=5, "
                     "batch.size=1048576, compression none, no key, random payload; the consumer assign()s "
                     "partition 0 from the start, no group, fetch.queue.backoff.ms=10; each run a fresh process, "
                     "its client configurations with the listener's settings added",
        "clients": {listener: {k: ("<password>" if k == "sasl.password" else v)
                               for k, v in client_config(listener, Path("<ca-cert.pem>")).items()}
                    for listener in LISTENERS},
        "listeners": "PLAINTEXT, SSL and SASL_SSL on 127.0.0.1, one broker process serving all three; topics "
                     f"created over PLAINTEXT, one per listener, {plan.partitions} partition",
        "listener_properties": {k: (Path(v).name if k.endswith(".location") else v) for k, v in properties.items()},
        "certificates": "trafka.broker.security.dev_certs.create_dev_certificates: RSA 2048, a throwaway CA, the "
                        "broker's certificate for localhost and 127.0.0.1",
        "scram": f"{MECHANISM}, user {USER!r}, 4096 iterations, made before the start (trafka: credential store in "
                 "its data directory; kafka: its storage tool's --add-scram)",
        "order": f"warm-up of {plan.warmup_count:,} records per listener not counted; then produce and consume "
                 f"rounds over every (broker, listener) pair in turns ({plan.repeats} round(s), median)",
        **variants.broker_settings(),
    }


def main(argv: list[str] | None = None, quick: bool = False, output: Path | None = None,
         brokers_arg: str = ",".join(SUPPORTED)) -> int:
    notes: list[str] = []
    parsed = common.parse_mode("python -m bench --security", __doc__, argv, quick, output, brokers_arg, SUPPORTED,
                               notes)
    if parsed is None:
        return 0
    args, names = parsed
    plan = QUICK if args.quick else FULL

    from trafka.broker.security.dev_certs import create_dev_certificates

    start = common.RunStart()
    progress = Progress(len(names) * len(LISTENERS) * (1 + 2 * plan.repeats))
    live: list[brokers.BrokerProcess] = []
    by_broker: dict[str, dict[str, Any]] = {}
    certs_dir = Path(tempfile.mkdtemp(prefix="bench-security-certs-"))
    try:
        certs = create_dev_certificates(certs_dir)
        properties = listener_properties(certs)
        versions = {n: brokers.SPECS[n].version() for n in names}
        subjects = []
        for name in names:
            subject = Subject(name, certs, live)
            print(f"bench: {name} ready in {subject.broker.ready_s:.2f} s: "
                  + ", ".join(f"{listener} {subject.address(listener)}" for listener in LISTENERS),
                  file=sys.stderr, flush=True)
            subjects.append(subject)
        run(plan, subjects, progress)
        for s in subjects:
            s.results["tls"] = {listener: tls_session(s.extra.address(listener), s.ca) for listener in SECURED}
            output_tail = common.stop_broker(s.broker, live, s.results)
            by_broker[s.name] = {"version": versions[s.name], **s.results, "broker_output_tail": output_tail}
    except KeyboardInterrupt:
        return common.interrupted()
    finally:
        common.stop_all(live)
        shutil.rmtree(certs_dir, ignore_errors=True)
    versus = derive(by_broker)
    document = {
        **start.document(plan, "python -m bench --security" + (" --quick" if args.quick else ""), versions),
        "settings": settings(plan, properties),
        "notes": notes,
        "results": by_broker,
        "trafka_over_kafka": versus,
    }
    common.publish(document, report(plan, document), args.output, start.started_at)
    return 0


if __name__ == "__main__":
    sys.exit(main())
