"""A description of the machine and software a benchmark ran on, for the results file."""
from __future__ import annotations

import mmap
import os
import platform
import sys
import time
from importlib.metadata import PackageNotFoundError, version
from typing import Any


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


def _available_bytes() -> int:
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def prefault_memory(wanted_bytes: int) -> dict[str, Any]:
    """Touch up to ``wanted_bytes`` of memory once and give it back to the kernel.

    On a virtual machine the first use of a guest page costs a fault in the hypervisor (here about
    9 us per 4 KiB page, capping fresh page-cache writes near 400 MB/s against several GB/s for pages
    used before). Whichever broker ran first would pay that for everyone; touching the memory the run
    will need up front gives every broker the same machine. At most half the available memory.
    """
    size = min(wanted_bytes, _available_bytes() // 2) & ~(mmap.PAGESIZE - 1)
    if size <= 0 or not hasattr(mmap, "MAP_POPULATE"):
        return {"bytes": 0, "seconds": 0.0}
    started = time.perf_counter()
    region = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | mmap.MAP_POPULATE)
    region.close()
    return {"bytes": size, "seconds": round(time.perf_counter() - started, 1)}


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
