"""Jepsen-style runs: a three-broker cluster on a test network of its own under a random mix of faults for as long
as asked, while clients write and read, then a verdict on what they saw — for trafka and Apache Kafka 3.9 in
ZooKeeper mode, one after the other, with the same seed.

    python -m bench --nemesis                       # 30 minutes of faults per broker (trafka, kafka)
    python -m bench --nemesis --minutes 5 --seed 7  # shorter; the seed replays the choices
    python -m bench --nemesis --unclean             # unclean leader election on: what it loses
    python -m bench --nemesis --quick               # 2 minutes per broker, a check that the mode works

The cluster, the workload, the nemeses and the checker are compat_tests.nemesis's (its docstring says what each
is), as test_nemesis.py runs them for a minute in the suite: ZooKeeper and the brokers each in a network
namespace of their own, idempotent acks=all producers (``min.insync.replicas=2``), a transactional producer and a
read_committed consumer group. Here the nemesis is drawn at random from all of them, each lasting 4 to 12 s
(seeded), healed, and followed by the wait for every ISR to be full again (up to 60 s; a longer return is noted in
the history and waited for up to 5 minutes more). The runs need root (namespaces, nftables).

Results: ``bench/results/<date>-nemesis.json`` and ``.md`` (the verdicts, and per nemesis how long the cluster
took to return to full ISRs once healed), and each broker's history, one JSON event a line,
``<date>-nemesis-<broker>.history.jsonl`` (``-nemesis-unclean``, ``-nemesis-quick`` for the variants).
"""
from __future__ import annotations

import argparse
import datetime
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import machine
from bench.common import RESULTS_DIR, write_results

SUPPORTED = ("trafka", "kafka")
FAULT_S = (4.0, 12.0)
RECOVERY_S = 60.0
LATE_RECOVERY_S = 300.0


def run_one(product: str, minutes: float, seed: int, unclean: bool, history_path: Path,
            keep: Path | None = None, nemeses: list[str] | None = None) -> dict[str, Any]:
    """One broker's run: the cluster, the faults for ``minutes``, the verdict (the brokers' data and logs kept
    under ``keep`` when given)."""
    from compat_tests import nemesis
    from trafka.broker.testing import network as netns

    chance = random.Random(seed)
    history: list[dict[str, object]] = []
    started = time.monotonic()
    with netns.TestNetwork(nemesis.HOSTS) as network, tempfile.TemporaryDirectory(prefix="nemesis-") as temporary:
        directory = keep / product if keep is not None else Path(temporary)
        target = nemesis.start(product, network, directory, unclean=unclean)
        workload = None
        try:
            workload = nemesis.Workload.start(target.bootstrap)
            ends = time.monotonic() + minutes * 60
            while time.monotonic() < ends:
                name = chance.choice(nemeses or sorted(nemesis.NEMESES))
                seconds = round(chance.uniform(*FAULT_S), 1)
                try:
                    nemesis.apply(target, name, chance, seconds, history, recovery_s=RECOVERY_S)
                except AssertionError as slow:  # no full ISR within RECOVERY_S: noted, waited for longer
                    history.append({"at": time.time(), "event": "slow-recovery", "nemesis": name, "error": str(slow)})
                    try:
                        nemesis.wait(target.full_isrs, "full ISRs", timeout=LATE_RECOVERY_S)
                        history.append({"at": time.time(), "event": "full-isr-late", "nemesis": name})
                    except AssertionError:
                        history.append({"at": time.time(), "event": "no-full-isr", "nemesis": name})
                        break
                print(f"bench: {product} {time.monotonic() - started:6.0f} s  {history[-2].get('what', name)}",
                      file=sys.stderr)
            result = nemesis.verdict(target, workload)
        finally:
            if workload is not None:
                workload.stop()
            target.close()
    history_path.write_text("".join(json.dumps(event) + "\n" for event in history))
    recoveries: dict[str, list[float]] = {}
    for event in history:
        if event["event"] == "full-isr":
            recoveries.setdefault(str(event["nemesis"]), []).append(float(event["seconds_after_heal"]))
    return {
        **result, "clean": nemesis.clean(result), "faults": sum(1 for e in history if e["event"] == "fault"),
        "slow_recoveries": sum(1 for e in history if e["event"] == "slow-recovery"),
        "full_isr_after_heal_s": {name: {"count": len(times), "median": round(statistics.median(times), 2),
                                         "max": round(max(times), 2)} for name, times in sorted(recoveries.items())},
        "history": history_path.name, "seconds": round(time.monotonic() - started, 1),
    }


def report(document: dict[str, Any]) -> str:
    lines = [f"# Nemesis runs, {document['started_at']}", "",
             f"`{document['command']}`: {document['minutes']} minutes of faults per broker, seed {document['seed']}, "
             f"unclean leader election {'on' if document['unclean'] else 'off'}.", "",
             "| broker | faults | acknowledged | lost | duplicated | out of order | replicas identical | "
             "transactions (committed/aborted/unknown) | txn problems | group offsets back | verdict |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, result in document["results"].items():
        if "error" in result:
            lines.append(f"| {name} | error: {result['error']} |||||||||||")
            continue
        parts = result["partitions"]
        txns = result["transactions"]
        problems = sum(len(v) for check in ("group_read", "read_committed") for v in result[check].values())
        lines.append(
            f"| {name} | {result['faults']} | {sum(p['acknowledged'] for p in parts)} | {sum(p['lost'] for p in parts)}"
            f" | {sum(p['duplicated'] for p in parts)} | {any(p['out_of_order'] for p in parts)} | "
            f"{result['replicas_identical']} | {txns.get('committed', 0)}/{txns.get('aborted', 0)}/"
            f"{txns.get('unknown', 0)} | {problems} | {result['group_offsets_back']} | "
            f"{'clean' if result['clean'] else 'FOUND PROBLEMS'} |")
    lines += ["", "Seconds from healing to full ISRs again, by nemesis (median / max, count):", "",
              "| nemesis | " + " | ".join(document["results"]) + " |",
              "|---|" + "---|" * len(document["results"])]
    names = sorted({n for r in document["results"].values() for n in r.get("full_isr_after_heal_s", {})})
    for nemesis_name in names:
        cells = []
        for result in document["results"].values():
            figures = result.get("full_isr_after_heal_s", {}).get(nemesis_name)
            cells.append(f"{figures['median']} / {figures['max']} ({figures['count']})" if figures else "")
        lines.append(f"| {nemesis_name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None, quick: bool = False, output: Path | None = None,
         brokers_arg: str = "trafka,kafka") -> int:
    parser = argparse.ArgumentParser(prog="python -m bench --nemesis", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", default=quick)
    parser.add_argument("--output", type=Path, default=output)
    parser.add_argument("--brokers", default=brokers_arg)
    parser.add_argument("--minutes", type=float, default=None, help="of faults per broker (default 30; quick 2)")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--unclean", action="store_true", help="unclean leader election on")
    parser.add_argument("--keep", type=Path, help="keep the brokers' data and logs in this directory")
    parser.add_argument("--nemeses", help="the nemeses to draw from, comma-separated (default: all of them)")
    args = parser.parse_args(argv or [])
    from trafka.broker.testing import network as netns

    why_not = netns.available()
    if why_not is not None:
        print(f"bench --nemesis: {why_not}", file=sys.stderr)
        return 2
    names = [n.strip() for n in args.brokers.split(",") if n.strip() in SUPPORTED]
    from compat_tests.nemesis import NEMESES

    chosen = [n.strip() for n in args.nemeses.split(",")] if args.nemeses else None
    if chosen and (unknown := [n for n in chosen if n not in NEMESES]):
        print(f"bench --nemesis: no nemesis {', '.join(unknown)} (there are {', '.join(sorted(NEMESES))})",
              file=sys.stderr)
        return 2
    minutes = args.minutes if args.minutes is not None else (2.0 if args.quick else 30.0)
    seed = args.seed if args.seed is not None else time.time_ns() % 1_000_000
    started_at = datetime.datetime.now(datetime.timezone.utc)
    started = time.perf_counter()
    suffix = "-nemesis" + ("-unclean" if args.unclean else "") + ("-quick" if args.quick else "")
    output = args.output or RESULTS_DIR / f"{started_at.date().isoformat()}{suffix}.json"
    results: dict[str, Any] = {}
    histories = []
    for name in names:
        history_path = output.with_name(f"{output.stem}-{name}.history.jsonl")
        try:
            results[name] = run_one(name, minutes, seed, args.unclean, history_path, args.keep, chosen)
            histories.append(history_path)
        except Exception as exc:  # a broker that cannot run here (no Kafka jars, say): reported, the others go on
            results[name] = {"error": f"{type(exc).__name__}: {exc}"}
    document = {
        "mode": "nemesis", "started_at": started_at.isoformat(timespec="seconds"),
        "duration_s": round(time.perf_counter() - started, 1),
        "command": "python -m bench --nemesis" + (" --quick" if args.quick else "") + (
            " --unclean" if args.unclean else "") + f" --minutes {minutes:g} --seed {seed}" + (
            f" --nemeses {args.nemeses}" if args.nemeses else ""),
        "machine": machine.describe({}), "minutes": minutes, "seed": seed, "unclean": args.unclean,
        "results": results,
    }
    write_results(output, document, report(document), *histories)
    print(report(document))
    return 0 if all(r.get("clean") for r in results.values()) or args.unclean else 1
