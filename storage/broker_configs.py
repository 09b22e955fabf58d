"""Dynamic broker configs on disk: ``data_dir/__trafka_broker_configs.json``.

Two layers of broker properties set at run time (AlterConfigs and IncrementalAlterConfigs on BROKER
resources), over those the broker was started with: the cluster-wide defaults (the resource named
``""``) and this broker's own (the resource named by its node id), which win over the defaults. The
file is replaced atomically on every change, so a crash keeps either the old layers or the new ones.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from trafka.storage.checkpoints import atomic_write

BROKER_CONFIGS_FILE = "__trafka_broker_configs.json"
FORMAT_VERSION = 1


@dataclass
class DynamicBrokerConfigs:
    """The dynamic layers, by property name, and where they are kept."""

    path: Path
    defaults: dict[str, str] = field(default_factory=dict)
    broker: dict[str, str] = field(default_factory=dict)

    @classmethod
    def load(cls, data_dir: Path) -> DynamicBrokerConfigs:
        path = Path(data_dir) / BROKER_CONFIGS_FILE
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return cls(path)
        except ValueError as exc:
            raise ValueError(f"{path}: unreadable dynamic broker configs: {exc}") from exc
        if not isinstance(document, dict) or document.get("version") != FORMAT_VERSION:
            raise ValueError(f"{path}: unsupported dynamic broker configs version {document.get('version')!r}")
        return cls(path, _strings(document.get("defaults", {})), _strings(document.get("broker", {})))

    def effective(self, static: Mapping[str, str]) -> dict[str, str]:
        """Every property in force: this broker's dynamic ones over the dynamic defaults over ``static``."""
        return {**static, **self.defaults, **self.broker}

    def save(self, defaults: Mapping[str, str], broker: Mapping[str, str]) -> None:
        """Replace both layers, on disk first."""
        document = {"version": FORMAT_VERSION, "defaults": dict(sorted(defaults.items())),
                    "broker": dict(sorted(broker.items()))}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, (json.dumps(document, indent=1) + "\n").encode("utf-8"))
        self.defaults, self.broker = dict(defaults), dict(broker)


def _strings(values: object) -> dict[str, str]:
    if not isinstance(values, dict):
        raise ValueError(f"expected an object of properties, found {type(values).__name__}")
    return {str(name): str(value) for name, value in values.items()}
