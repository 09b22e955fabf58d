"""The golden frames: request frames real clients sent to trafka, as ``capture.py`` recorded them.

``corpus.json`` holds one entry per frame: the client that sent it, its api key and version (from its
request header) and the frame itself in hex, without its 4-byte size prefix.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path

CORPUS_PATH = Path(__file__).with_name("corpus.json")
#: The client name of the frames trafka brokers sent each other (of the APIs only brokers send).
BROKER_CLIENT = "trafka-broker"


@dataclass(frozen=True)
class GoldenFrame:
    """One recorded request frame (header and body, no size prefix)."""

    client: str
    api_key: int
    api_version: int
    frame: bytes

    @property
    def name(self) -> str:
        from trafka.wire.protocol import api_key_of

        key = api_key_of(self.api_key)
        return f"{key.name if key is not None else self.api_key} v{self.api_version} from {self.client}"

    def to_json(self) -> dict[str, object]:
        return {"client": self.client, "api_key": self.api_key, "api_version": self.api_version,
                "frame": self.frame.hex()}

    @classmethod
    def from_json(cls, entry: dict[str, object]) -> GoldenFrame:
        return cls(str(entry["client"]), int(entry["api_key"]), int(entry["api_version"]),  # type: ignore[arg-type]
                   bytes.fromhex(str(entry["frame"])))

    @classmethod
    def from_frame(cls, client: str, frame: bytes) -> GoldenFrame:
        api_key, api_version = struct.unpack_from(">hh", frame)
        return cls(client, api_key, api_version, frame)


def load_corpus(path: Path = CORPUS_PATH) -> list[GoldenFrame]:
    """The golden frames in the order they were recorded."""
    document = json.loads(path.read_text())
    return [GoldenFrame.from_json(entry) for entry in document["frames"]]


def save_corpus(frames: list[GoldenFrame], path: Path = CORPUS_PATH) -> None:
    document = {
        "about": "Request frames recorded from real clients by compat_tests/fuzz/capture.py "
                 "(hex, without the size prefix). Regenerate with: python -m compat_tests.fuzz.capture",
        "frames": [frame.to_json() for frame in frames],
    }
    path.write_text(json.dumps(document, indent=1) + "\n")
