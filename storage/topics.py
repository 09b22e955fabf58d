"""The topic catalog: every topic's id, partition count and config overrides, kept in the data dir.

Kafka keeps this metadata in its controller's metadata log; a trafka broker keeps it in one JSON
file, ``__trafka_topics.json`` in the data directory, replaced atomically on every change::

    {"version": 1, "topics": [{"name": "orders", "topic_id": "q7xRkXJ1Ts2Tch0m3yt-3Q",
                               "partitions": 3, "configs": {"retention.ms": "3600000"}}]}

Topic ids are written as Kafka writes them (URL-safe base64 without padding), the form that
``partition.metadata`` files and Kafka's tools use.
"""
from __future__ import annotations

import base64
import dataclasses
import json
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from trafka.storage.checkpoints import OrderedWrites, atomic_write
from trafka.wire.errors import ErrorCode, KafkaError

TOPIC_CATALOG_FILE = "__trafka_topics.json"
CATALOG_VERSION = 1


def topic_id_to_string(topic_id: uuid.UUID) -> str:
    """Kafka's text form of a topic id: URL-safe base64 of its 16 bytes, without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode("ascii")


def topic_id_from_string(text: str) -> uuid.UUID:
    """Parse Kafka's text form of a topic id (``ValueError`` if malformed)."""
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise ValueError(f"{text!r} is not a topic id")
    return uuid.UUID(bytes=raw)


def new_topic_id() -> uuid.UUID:
    """A random topic id, never one Kafka reserves (zero, the metadata topic's) nor one whose
    text form starts with ``-`` (which command-line tools would take for an option)."""
    while True:
        topic_id = uuid.uuid4()
        if topic_id.int > 1 and not topic_id_to_string(topic_id).startswith("-"):
            return topic_id


@dataclass(frozen=True, slots=True)
class TopicRecord:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CatalogState:
    """The catalog as it stood when taken (``TopicCatalog.state``): its records, each immutable."""

    generation: int
    records: tuple[TopicRecord, ...]


def _catalog_line(record: TopicRecord) -> str:
    return json.dumps({
        "name": record.name,
        "topic_id": topic_id_to_string(record.topic_id),
        "partitions": record.partitions,
        "configs": dict(sorted(record.configs.items())),
    })


class TopicCatalog:
    """Topics by name, persisted to ``data_dir/__trafka_topics.json`` after every change.

    A change made with ``save=False`` is written later by the caller: ``state()`` on the thread that
    made it, then ``write(state)`` in any thread (writes take turns, and an older state never
    replaces a newer one).
    """

    def __init__(self, data_dir: Path) -> None:
        self.path = Path(data_dir) / TOPIC_CATALOG_FILE
        self.topics: dict[str, TopicRecord] = {}
        self._by_id: dict[uuid.UUID, TopicRecord] = {}
        self._writes = OrderedWrites()
        #: Each written record's line of the file, by the record's identity (see _encode).
        self._lines: dict[int, tuple[TopicRecord, str]] = {}
        self._load()

    def __contains__(self, name: object) -> bool:
        return name in self.topics

    def __iter__(self) -> Iterator[TopicRecord]:
        return iter(list(self.topics.values()))

    def __len__(self) -> int:
        return len(self.topics)

    def get(self, name: str) -> TopicRecord | None:
        return self.topics.get(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicRecord | None:
        return self._by_id.get(topic_id)

    def add(self, record: TopicRecord, *, save: bool = True) -> None:
        if record.name in self.topics:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{record.name}' already exists.")
        if record.topic_id in self._by_id:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic id {record.topic_id} is already in use.")
        if record.partitions < 1:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
        self._put(dataclasses.replace(record, configs=dict(record.configs)))
        if save:
            self._save()

    def remove(self, name: str, *, save: bool = True) -> TopicRecord:
        record = self._require(name)
        del self.topics[name]
        del self._by_id[record.topic_id]
        if save:
            self._save()
        return record

    def set_partitions(self, name: str, partitions: int, *, save: bool = True) -> TopicRecord:
        """Raise the partition count (Kafka never lowers it)."""
        record = self._require(name)
        if partitions < record.partitions:
            raise KafkaError(
                ErrorCode.INVALID_PARTITIONS,
                f"Topic currently has {record.partitions} partitions, which is higher than the "
                f"requested {partitions}.",
            )
        return self._replace(dataclasses.replace(record, partitions=partitions), save=save)

    def set_configs(self, name: str, configs: Mapping[str, str]) -> TopicRecord:
        """Replace the topic's config overrides."""
        record = self._require(name)
        return self._replace(dataclasses.replace(record, configs=dict(configs)), save=True)

    def _require(self, name: str) -> TopicRecord:
        record = self.topics.get(name)
        if record is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"This server does not host this topic: {name}")
        return record

    def _replace(self, record: TopicRecord, *, save: bool) -> TopicRecord:
        self._put(record)
        if save:
            self._save()
        return record

    def _put(self, record: TopicRecord) -> None:
        self.topics[record.name] = record
        self._by_id[record.topic_id] = record

    def _load(self) -> None:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return
        try:
            document = json.loads(text)
            if document.get("version") != CATALOG_VERSION:
                raise ValueError(f"unsupported version {document.get('version')!r}")
            for entry in document["topics"]:
                self._put(TopicRecord(
                    name=str(entry["name"]),
                    topic_id=topic_id_from_string(entry["topic_id"]),
                    partitions=int(entry["partitions"]),
                    configs={str(k): str(v) for k, v in entry.get("configs", {}).items()},
                ))
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise ValueError(f"{self.path}: unreadable topic catalog: {e}") from e

    def state(self) -> CatalogState:
        """The catalog as it stands, for ``write`` (which encodes it: taking it costs one tuple)."""
        return CatalogState(self._writes.take(), tuple(self.topics.values()))

    def write(self, state: CatalogState) -> None:
        """Replace the file with ``state`` atomically, in any thread, unless a newer state is there."""
        def replace() -> None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(self.path, self._encode(state.records))

        self._writes.write(state.generation, replace)

    def _encode(self, records: tuple[TopicRecord, ...]) -> bytes:
        """The file's content: JSON, one topic a line. A record's line is made once and kept while the
        record is in the catalog (writers take turns: see OrderedWrites), so that writing the catalog after
        a change encodes what changed, not every topic again."""
        previous = self._lines
        lines = self._lines = {}
        for record in records:
            kept = previous.get(id(record))
            lines[id(record)] = kept if kept is not None and kept[0] is record else (record, _catalog_line(record))
        topics = ",\n".join(line for _, line in sorted(lines.values(), key=lambda entry: entry[0].name))
        return f'{{"version": {CATALOG_VERSION}, "topics": [\n{topics}\n]}}\n'.encode()

    def _save(self) -> None:
        self.write(self.state())
