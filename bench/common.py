"""What the benchmark modes share (bench/run.py, cluster.py, cleaner.py, transactions.py, profile.py):
where results go, the progress line of each step, running keys in turns, looking figures up, and
writing a results file with its table."""
from __future__ import annotations

import json
import sys
import time
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
            f"[{self.done:3d}/{self.total} {elapsed // 60:02d}:{elapsed % 60:02d}] {broker:<6} {what:<40} {_headline(result)}",
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
