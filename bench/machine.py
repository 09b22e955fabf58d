"""A description of the machine and software a benchmark ran on, for the results file."""
from __future__ import annotations

import os
import platform
import sys
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
