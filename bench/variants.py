"""One broker's variants side by side (bench/security.py: listeners; bench/authorizer.py: configurations):
the plan, the warm-up and the rounds in turns, trafka over kafka per variant, and the report's tables of
records/s, cores busy and time to the first record."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Hashable, TypeVar

from bench import brokers
from bench.common import Progress, in_turns, lookup, size_label

SECTIONS = ("produce", "consume")
K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class Plan:
    mode: str
    size: int  # record size, bytes
    count: int  # records per produce run and per consume run
    repeats: int  # rounds of each workload; the table shows the median
    warmup_count: int  # records produced to each (broker, variant) before anything is measured
    acks: str = "1"
    partitions: int = 1


def measure(plan: Plan, keys: list[K], run_one: Callable[[K, dict[str, Any]], dict[str, Any]],
            name: Callable[[K], str], label: Callable[[K], str], progress: Progress) -> dict[str, dict[K, Any]]:
    """0. A warm-up of ``plan.warmup_count`` records produced for each key, one after another, not counted;
    1. produce and 2. consume ``plan.count`` records, every key in turns (``in_turns``), the median.
    ``run_one(key, params)`` runs the workload ``params`` for ``key``; ``name(key)`` is its broker's name and
    ``label(key)`` what follows the step in the progress line. Returns each section's results by key."""
    def produce(count: int) -> dict[str, Any]:
        return {"workload": "produce", "count": count, "size": plan.size, "acks": plan.acks}

    out: dict[str, dict[K, Any]] = {"warmup": {}}
    for key in keys:
        result = out["warmup"][key] = run_one(key, produce(plan.warmup_count))
        progress.step(name(key), f"warm-up: produce {plan.warmup_count:,}{label(key)}", result)

    def rounds(section: str, params: dict[str, Any]) -> dict[K, Any]:
        def one(key: K) -> dict[str, Any]:
            result = run_one(key, params)
            progress.step(name(key), f"{section} {plan.count:,} x {size_label(plan.size)}{label(key)}", result)
            return result

        return in_turns(keys, plan.repeats, one)

    out["produce"] = rounds("produce", produce(plan.count))
    out["consume"] = rounds(
        "consume", {"workload": "consume", "count": plan.count, "size": plan.size, "partitions": plan.partitions})
    return out


Where = Callable[[str, str], tuple[str, ...]]  # (section, variant) -> where a broker's result is


def trafka_over_kafka(by_broker: dict[str, dict[str, Any]], variants: tuple[str, ...], path: Where) -> dict[str, Any]:
    """trafka's records/s over kafka's for each section and variant (``"produce SSL"``); empty without both."""
    versus: dict[str, Any] = {}
    if "trafka" in by_broker and "kafka" in by_broker:
        for section in SECTIONS:
            for variant in variants:
                t = lookup(by_broker["trafka"], (*path(section, variant), "records_per_s"))
                k = lookup(by_broker["kafka"], (*path(section, variant), "records_per_s"))
                versus[f"{section} {variant}"] = t / k if t and k else None
    return versus


def broker_settings() -> dict[str, Any]:
    """How each broker is started, for the results' settings: both with the mode's listeners beside PLAINTEXT."""
    return {
        "trafka": "python -m trafka --port 0 --data-dir <tmp> --log-level WARNING --override listeners=... "
                  "(bench.brokers.with_listeners)",
        "kafka": brokers.kafka_settings(),
    }


def num(value: Any, fmt: str) -> str:
    return format(value, fmt) if isinstance(value, (int, float)) else "n/a"


def heading(title: str, document: dict[str, Any], what: str) -> list[str]:
    """The report's first line: the mode, when, how long, the command, the plan, and the machine's load."""
    m = document["machine"]
    return [
        f"{title}, {document['started_at']} ({document['duration_s']:.0f} s), `{document['command']}`: {what}; "
        f"load average (1 min) {m['load_average_before'][0]:.2f} before, {m['load_average_after'][0]:.2f} after, "
        f"on {m['cpu_cores']} cores",
        "",
    ]


def throughput_table(document: dict[str, Any], variants: tuple[str, ...], label: Callable[[str], str],
                     path: Where) -> list[str]:
    """Per section: records/s and MB/s of each variant on each broker (and trafka/kafka), the cores the broker
    and the client kept busy, and for consume the time from the consumer's creation to its first record."""
    by_broker: dict[str, dict[str, Any]] = document["results"]
    versus: dict[str, Any] = document["trafka_over_kafka"]
    names = list(by_broker)
    both = bool(versus)
    tail = " | |" if both else " |"
    header = ["", *names, *(["trafka/kafka"] if both else [])]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for section in SECTIONS:
        for variant in variants:
            cells = []
            for n in names:
                r = lookup(by_broker[n], path(section, variant)) or {}
                cells.append(f"{num(r.get('records_per_s'), ',.0f')} rec/s, {num(r.get('mb_per_s'), '.1f')} MB/s"
                             if "records_per_s" in r else "n/a")
            if both:
                cells.append(f"{num(versus.get(f'{section} {variant}'), '.2f')}x")
            lines.append(f"| **{section}, {label(variant)}** | " + " | ".join(cells) + " |")
        for variant in variants:
            cells = []
            for n in names:
                r = lookup(by_broker[n], path(section, variant)) or {}
                cells.append(f"{num(r.get('broker_cores'), '.2f')} / {num(r.get('client_cores'), '.2f')}")
            lines.append(f"| {section}, {label(variant)}: cores busy, broker / client | " + " | ".join(cells) + tail)
        if section == "consume":
            for variant in variants:
                cells = []
                for n in names:
                    first = lookup(by_broker[n], (*path(section, variant), "first_record_s"))
                    cells.append(f"{first * 1000:.0f} ms" if isinstance(first, (int, float)) else "n/a")
                lines.append(f"| consume, {label(variant)}: consumer created to first record | " + " | ".join(cells)
                             + tail)
    return lines
