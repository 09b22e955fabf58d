"""What the benchmark modes share (bench/run.py, cluster.py, cleaner.py, transactions.py, profile.py,
security.py, authorizer.py): where results go, the progress line of each step, running keys in turns,
looking figures up, a workload in a client process of its own, a mode's command line, the run's start and
its results' first fields, stopping a broker, and writing a results file with its table."""
from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, TypeVar

RESULTS_DIR = Path(__file__).resolve().parent / "results"
WORKLOAD_TIMEOUT_S = 400.0


def size_label(size: int) -> str:
    return f"{size} B" if size < 1024 else f"{size // 1024} KB"


class Progress:
    """One line per step: position, elapsed time, what ran and its headline figure."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.done = 0
        self.started = time.perf_counter()

    def step(self, broker: str, what: str, result: dict[str, Any]) -> None:
        self.done += 1
        elapsed = int(time.perf_counter() - self.started)
        print(
            f"[{self.done:3d}/{self.total} {elapsed // 60:02d}:{elapsed % 60:02d}] {broker:<6} {what:<40} "
            f"{_headline(result)}",
            file=sys.stderr,
            flush=True,
        )


def _headline(result: dict[str, Any]) -> str:
    parts = []
    if "records_per_s" in result:
        parts.append(f"{result['records_per_s']:,.0f} rec/s {result['mb_per_s']:.1f} MB/s")
    if "first_record_s" in result:
        parts.append(f"first record {result['first_record_s'] * 1000:.0f} ms")
    if "p99_ms" in result:
        parts.append(f"p50 {result['p50_ms']:.2f} ms p99 {result['p99_ms']:.2f} ms p99.9 {result['p999_ms']:.2f} ms")
    for key, unit in (("stable_s", "s stable"), ("ready_s", "s to ready"), ("rss_mb", "MB RSS")):
        if key in result:
            parts.append(f"{result[key]:.3f} {unit}" if unit.startswith("s") else f"{result[key]:.1f} {unit}")
    if "error" in result:
        parts.append(f"ERROR {result['error'][:120]}")
    return "; ".join(parts)


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median rate, every rate beside it, and the records of all runs."""
    if len(runs) == 1:
        return runs[0]
    ordered = sorted(runs, key=lambda r: r.get("records_per_s", 0.0))
    return {
        **ordered[len(ordered) // 2],
        "runs_records_per_s": [r.get("records_per_s") for r in runs],
        "records": sum(r.get("records", 0) for r in runs),
    }


K = TypeVar("K")


def in_turns(keys: list[K], repeats: int, run_one: Callable[[K], dict[str, Any]]) -> dict[K, dict[str, Any]]:
    """Run every key ``repeats`` times, taking turns: each round runs every key once, and the round's
    first key moves one place each round. A slow spell of the machine (another VM on the host, memory
    handed back to it, a kernel thread) then falls on every key alike instead of on whichever happened
    to be running, and the ratios between them hold. Returns each key's median run."""
    runs: dict[K, list[dict[str, Any]]] = {key: [] for key in keys}
    for round_ in range(repeats):
        shift = round_ % len(keys)
        for key in keys[shift:] + keys[:shift]:
            runs[key].append(run_one(key))
    return {key: median_run(runs[key]) for key in keys}


def lookup(results: dict[str, Any], path: tuple[str, ...]) -> Any:
    """The value at ``path`` in nested ``results``; None where a key is missing."""
    value: Any = results
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


def write_results(output: Path, document: dict[str, Any], report: str, *extra: Path) -> None:
    """The figures as ``output`` (JSON) and the tables beside it (``.md``), and a line saying so."""
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(document, indent=2) + "\n")
    output.with_suffix(".md").write_text(report)
    names = [output.with_suffix(".md").name, *(path.name for path in extra)]
    print(f"bench: wrote {output}, {', '.join(names)} in {document['duration_s']:.0f} s", file=sys.stderr)


def run_workload(module: str, params: dict[str, Any], timeout: float = WORKLOAD_TIMEOUT_S) -> dict[str, Any]:
    """Run one workload in a fresh client process, ``python -m <module> --workload JSON``, and return the
    result it prints (or what went wrong)."""
    from bench.workloads import _workload_result

    process = subprocess.Popen(
        [sys.executable, "-m", module, "--workload", json.dumps(params)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    return _workload_result(process, timeout)


def mode_parser(prog: str, doc: str, quick: bool, output: Path | None, brokers_arg: str,
                supported: tuple[str, ...]) -> argparse.ArgumentParser:
    """A mode's command line: --quick, --output, --brokers, and the hidden --workload of its client processes."""
    parser = argparse.ArgumentParser(prog=prog, description=doc.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", default=quick)
    parser.add_argument("--output", type=Path, default=output)
    parser.add_argument("--brokers", default=brokers_arg, help="comma-separated: " + ",".join(supported))
    parser.add_argument("--workload", help=argparse.SUPPRESS)  # a client process: JSON params
    return parser


def main_workload(params: dict[str, Any]) -> dict[str, Any]:
    """Run the main benchmark's workload ``params["workload"]`` (``bench.workloads``: produce, consume, ...);
    its clients take the settings of ``params["client_config"]`` on top of their own."""
    from bench import workloads

    return workloads.WORKLOADS[params["workload"]](params)


def parse_mode(prog: str, doc: str, argv: list[str] | None, quick: bool, output: Path | None, brokers_arg: str,
               supported: tuple[str, ...], notes: list[str],
               client: Callable[[dict[str, Any]], dict[str, Any]] = main_workload,
               ) -> tuple[argparse.Namespace, list[str]] | None:
    """A mode's command line (``mode_parser``) and the brokers it runs (``choose_brokers``). None in a client
    process (``--workload JSON``): ``client`` has run the workload and its result is printed."""
    parser = mode_parser(prog, doc, quick, output, brokers_arg, supported)
    args = parser.parse_args(argv if argv is not None else sys.argv[1:])
    if args.workload:
        print(json.dumps(client(json.loads(args.workload))), flush=True)
        return None
    return args, choose_brokers(parser, args.brokers, supported, notes)


def choose_brokers(parser: argparse.ArgumentParser, brokers_arg: str, supported: tuple[str, ...],
                   notes: list[str]) -> list[str]:
    """The brokers named in ``--brokers`` that this mode supports and that can run here (``notes`` says why
    one cannot); a usage error when none is left."""
    from bench import brokers

    names = brokers.ready_to_run([n.strip() for n in brokers_arg.split(",") if n.strip() in supported], notes)
    if not names:
        parser.error(f"no broker to run: --brokers takes {', '.join(supported)}")
    return names


class RunStart:
    """A run's beginning: from here SIGTERM stops the run as Ctrl-C does (a KeyboardInterrupt), and the clock
    and the load average before it are taken for the results' first fields."""

    def __init__(self) -> None:
        signal.signal(signal.SIGTERM, lambda signum, frame: (_ for _ in ()).throw(KeyboardInterrupt()))
        self.started_at = datetime.datetime.now(datetime.timezone.utc)
        self.started = time.perf_counter()
        self.load_before = os.getloadavg()

    def document(self, plan: Any, command: str, versions: dict[str, str]) -> dict[str, Any]:
        """The results' mode, start, duration so far, command, machine (with the load averages) and plan."""
        from bench import machine

        return {
            "mode": plan.mode,
            "started_at": self.started_at.isoformat(timespec="seconds"),
            "duration_s": round(time.perf_counter() - self.started, 1),
            "command": command,
            "machine": machine_with_load(machine.describe(versions), self.load_before),
            "plan": asdict(plan),
        }


def interrupted() -> int:
    """What a mode says and returns when Ctrl-C or SIGTERM stopped it (its brokers are stopped after)."""
    print("\nbench: interrupted; brokers stopped, temp dirs removed, nothing written", file=sys.stderr)
    return 130


def stop_all(live: list[Any]) -> None:
    """Stop every broker still running."""
    for broker in live:
        broker.stop()


def stop_broker(broker: Any, live: list[Any], results: dict[str, Any], tail: int = 50) -> list[str]:
    """Record the broker's RSS (``results["rss_mb"]``), stop it (``results["shutdown_s"]``), take it off
    ``live``, and return the last ``tail`` lines of its output other than the ready line."""
    results["rss_mb"] = broker.rss_mb()
    output_tail = [line for line in broker.log_path.read_text(errors="replace").splitlines()
                   if line.strip() and "ready" not in line][-tail:]
    results["shutdown_s"] = broker.stop()
    live.remove(broker)
    return output_tail


def machine_with_load(description: dict[str, Any], load_before: tuple[float, float, float]) -> dict[str, Any]:
    """The machine's description with the load averages before the run and now."""
    return {**description,
            # Other work on the machine (1, 5, 15 minute load averages): on 2 cores, anything above
            # about 2 at the end means the figures shared the cores with something else.
            "load_average_before": [round(x, 2) for x in load_before],
            "load_average_after": [round(x, 2) for x in os.getloadavg()]}


def publish(document: dict[str, Any], text: str, output: Path | None, started_at: datetime.datetime) -> None:
    """Print the report and write it with the figures, to ``output`` or the mode's dated results file."""
    print(text)
    output_path = output or RESULTS_DIR / f"{started_at:%Y-%m-%d}-{document['mode']}.json"
    write_results(output_path, document, text)
