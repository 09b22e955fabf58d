"""A description of the machine and software a benchmark ran on, for the results file."""
from __future__ import annotations

import os
import platform
from pathlib import Path
import sys
import tempfile
import time
from importlib.metadata import PackageNotFoundError, version
from typing import Any

MB = 1_000_000


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gb() -> float | None:
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return None


DAMON_ADMIN = Path("/sys/kernel/mm/damon/admin/kdamonds")


def memory_reclaim() -> list[str]:
    """The DAMON schemes running on this machine, one line each: a host that overcommits its virtual
    machines' memory can run one that pages out whatever has stayed idle for a while, page cache
    included. It then stalls every process now and then while it works through a broker's old data."""
    schemes = []
    for context in DAMON_ADMIN.glob("*/contexts/*"):
        try:
            if (context.parent.parent / "state").read_text().strip() != "on":
                continue
            aggregation_s = int((context / "monitoring_attrs/intervals/aggr_us").read_text()) / 1e6
            for scheme in sorted(context.glob("schemes/[0-9]*")):
                action = (scheme / "action").read_text().strip()
                idle_s = int((scheme / "access_pattern/age/min").read_text()) * aggregation_s
                quota_mb = int((scheme / "quotas/bytes").read_text()) / MB
                per_s = int((scheme / "quotas/reset_interval_ms").read_text()) / 1000
                schemes.append(
                    f"DAMON {action} of memory idle for {idle_s:g} s or more, up to {quota_mb:,.0f} MB per {per_s:g} s"
                )
        except (OSError, ValueError):
            continue
    return schemes


def page_cache_write_speed(directory: str, size: int = 1 << 30) -> dict[str, float]:
    """MB/s of 1 MiB writes into a new file: first on memory the machine has not used lately, then again
    at once on the pages just freed by deleting that file.

    Every broker that keeps what it is sent, in files or in its heap, needs new memory for every byte.
    A virtual machine that returns freed guest memory to its host (virtio-balloon free page reporting,
    about 2 s after the memory is freed) makes the first touch of each such page a hypervisor fault,
    charged to the writer as system time; the kernel's own stock of pages not yet returned runs out after
    some hundreds of MB. ``new_memory_mb_per_s`` is the rate once that stock is gone (the second half of
    the file), ``fast_first_mb`` how much went before it did, and ``recycled_memory_mb_per_s`` the rate
    on pages freed a moment before: together they show what bounds a broker that stores the data against
    a client ceiling that discards it.
    """
    chunk = os.urandom(1 << 20)
    step = 64 << 20
    speeds: dict[str, float] = {}
    for label in ("new_memory_mb_per_s", "recycled_memory_mb_per_s"):
        fd, path = tempfile.mkstemp(prefix="bench-page-cache-", dir=directory)
        rates = []
        try:
            for _ in range(size // step):
                started = time.perf_counter()
                for _ in range(step // len(chunk)):
                    os.write(fd, chunk)
                rates.append(step / MB / (time.perf_counter() - started))
        finally:
            os.close(fd)
            os.unlink(path)
        if label == "new_memory_mb_per_s":
            second_half = rates[len(rates) // 2:]
            speeds[label] = round(len(second_half) / sum(1 / rate for rate in second_half))
            fast = next((i for i, rate in enumerate(rates) if rate < 2 * speeds[label]), len(rates))
            speeds["fast_first_mb"] = round(fast * step / MB)
        else:
            speeds[label] = round(len(rates) / sum(1 / rate for rate in rates))
    return speeds


def page_cache_line(speeds: dict[str, float]) -> str:
    """The report's sentence on :func:`page_cache_write_speed`."""
    fast_mb = speeds.get("fast_first_mb")
    fast = f" (after the first {fast_mb:,} MB, which went faster)" if fast_mb else ""
    return (f"Page-cache writes on this machine (1 MiB writes, no fsync): {speeds['new_memory_mb_per_s']:,} MB/s on "
            f"memory not used lately{fast}, {speeds['recycled_memory_mb_per_s']:,} MB/s on memory just freed.")


def _package(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def describe(broker_versions: dict[str, str]) -> dict[str, Any]:
    import confluent_kafka

    return {
        "cpu_model": _cpu_model(),
        "cpu_cores": os.cpu_count(),
        "memory_gb": _memory_gb(),
        "memory_reclaim": memory_reclaim(),
        "os": f"{platform.system()} {platform.release()}",
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
        "clients": {
            "confluent-kafka": confluent_kafka.version()[0],
            "librdkafka": confluent_kafka.libversion()[0],
            "kafka-python": _package("kafka-python"),
        },
        "brokers": broker_versions,
        "trio": _package("trio"),
    }
