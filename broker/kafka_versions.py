"""Old brokers on cue: ``trafka --kafka-version X.Y`` (the ``kafka.version`` property) answers ApiVersions as
Apache Kafka X.Y's broker did and serves only those versions, so that client code can be tested against the
brokers it will meet.

What each release's broker answered is the table in :mod:`trafka.wire.kafka_versions`, generated from each
release's own kafka-clients code and checked against real brokers of those releases (compat_tests/kafka_versions):
ZooKeeper-mode brokers for the releases before 4.0, KRaft brokers from 4.0 on. Of each API the release listed,
this broker advertises and serves the versions that both the release and trafka serve (:func:`cap`); an API
the release did not list, or whose versions do not meet trafka's, is left out. A request outside what is
served is refused as any unsupported version is (trafka.broker.connection): ApiVersions gets
UNSUPPORTED_VERSION with the served list, any other API has its connection closed, as Kafka does.

Where trafka serves less than the release did, it says so (:func:`readme_table`, the README's table): the APIs
it does not serve at all (a ZooKeeper-mode broker's inter-broker APIs, delegation tokens ...) and the oldest
versions of some APIs, which Kafka 4.0 removed (KIP-896) and trafka never served.

In a cluster the brokers talk to each other in trafka's own protocol (replication fetches with Fetch v12 or
later, which Kafka 2.7 and older did not have): the inter-broker listener serves all of trafka's versions, so
``kafka.version`` in a cluster needs that listener to be one of its own, beside the clients' (checked at start,
trafka.broker.config).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from trafka.wire.kafka_versions import API_NAMES, KAFKA_VERSIONS, KafkaVersion

if TYPE_CHECKING:
    from trafka.broker.config import BrokerConfig

Versions = Mapping[int, tuple[int, int]]

#: The releases ``--kafka-version`` takes, oldest first ("2.0" ... "4.4").
KAFKA_VERSION_NAMES: tuple[str, ...] = tuple(KAFKA_VERSIONS)


def release(kafka_version: str) -> KafkaVersion:
    """The table's row of ``kafka_version`` ("2.8"); ValueError naming the releases there are."""
    try:
        return KAFKA_VERSIONS[kafka_version]
    except KeyError:
        raise ValueError(f"{kafka_version!r} is not a Kafka release trafka knows: one of "
                         f"{', '.join(KAFKA_VERSION_NAMES)}") from None


def for_listener(config: BrokerConfig, listener: str) -> str | None:
    """The release whose versions ``listener`` serves: ``kafka.version``, except on a cluster's inter-broker
    listener, where the brokers speak trafka's own (None: all of trafka's versions)."""
    if config.kafka_version is None or (config.zookeeper_connect is not None
                                        and listener == config.inter_broker_listener_name):
        return None
    return config.kafka_version


def cap(ours: Versions, kafka_version: str | None, *, served: Versions | None = None) -> dict[int, tuple[int, int]]:
    """``ours`` (api key -> (min, max)) within what ``kafka_version``'s broker listed: each API both list, with
    the versions both serve; ``ours`` as it is when no release is given. ``served``: trafka's served versions when
    ``ours`` are the advertised ones (wider: Produce v0-2 are advertised and refused, as Kafka does), so that an
    API is advertised only where a version of it is served."""
    if kafka_version is None:
        return dict(ours)
    theirs = release(kafka_version).api_versions
    capped = {}
    for api_key, (low, high) in ours.items():
        if api_key not in theirs:
            continue
        their_low, their_high = theirs[api_key]
        low, high = max(low, their_low), min(high, their_high)
        check_low = low if served is None else max(served[api_key][0], their_low)
        if check_low <= high:
            capped[api_key] = (low, high)
    return capped


def finalized_features_epoch(kafka_version: str | None) -> int:
    """The finalized features epoch ApiVersions v3+ answers with (-1: none known, trafka's own answer)."""
    return -1 if kafka_version is None else release(kafka_version).finalized_features_epoch


# -- the README's table of what trafka serves less than each release ------------------------------------------

_TABLE_START = "<!-- kafka versions table (generated from wire/kafka_versions.py and the handlers) -->"
_TABLE_END = "<!-- end of kafka versions table -->"


def readme_table(served: Versions) -> list[str]:
    """The Markdown rows of the README's table: for each release, the patch release and mode its answer is from,
    and the APIs it listed that trafka serves fewer versions of (``served``: trafka's own served versions). The
    APIs trafka does not serve at all, and the oldest versions it never served, are named once, under the table
    (:func:`readme_notes`)."""
    rows = ["| `--kafka-version` | answer of | what of it trafka serves less of (the release's versions: trafka's) |",
            "| --- | --- | --- |"]
    oldest = _oldest_versions(served)
    for name, row in KAFKA_VERSIONS.items():
        capped = cap(served, name)
        less = []
        for key, theirs in row.api_versions.items():
            if key not in served:
                continue  # named under the table
            ours = capped.get(key)
            if ours == theirs or (ours is not None and ours[1] == theirs[1] and ours[0] == oldest.get(key)):
                continue  # (the versions below trafka's oldest are named under the table)
            less.append(f"{API_NAMES.get(key, key)} {_span(theirs)}: {_span(ours) if ours else 'none'}")
        mode = "ZooKeeper mode" if row.mode == "zookeeper" else "KRaft"
        rows.append(f"| {name} | {row.release}, {mode} | {', '.join(less) or '-'} |")
    return rows


def _span(versions: tuple[int, int]) -> str:
    low, high = versions
    return f"v{low}" if low == high else f"v{low}-{high}"


def _oldest_versions(served: Versions) -> dict[int, int]:
    """API key -> trafka's oldest version, for the APIs of which some release listed older versions."""
    return {key: low for key, (low, _high) in served.items()
            if any(key in row.api_versions and row.api_versions[key][0] < low for row in KAFKA_VERSIONS.values())}


def readme_notes(served: Versions, advertised: Versions) -> list[str]:
    """What the table leaves out: the APIs some release listed that trafka does not serve at all, and the versions
    below trafka's oldest that releases listed (``advertised``: the versions trafka lists, which may start lower
    than those it serves)."""
    unserved = sorted({key for row in KAFKA_VERSIONS.values() for key in row.api_versions if key not in served})
    oldest = []
    for key, low in sorted(_oldest_versions(served).items()):
        text = f"{API_NAMES.get(key, key)} {_span((0, low - 1))}"
        if advertised.get(key, served[key])[0] < low:
            text += " (listed, and refused when used, as Kafka 4 does)"
        oldest.append(text)
    return [
        f"APIs some of these releases listed that trafka does not serve, whatever the release: "
        f"{', '.join(API_NAMES.get(key, str(key)) for key in unserved)} (a ZooKeeper-mode broker's APIs between "
        f"controller and brokers, KRaft's quorum, delegation tokens, streams groups: see "
        f"[What it does not serve yet](#what-it-does-not-serve-yet-and-why)).",
        f"Versions the releases listed that trafka never served (most of them gone from Kafka 4.0, KIP-896): "
        f"{', '.join(oldest)}.",
    ]


def render_readme(text: str, served: Versions, advertised: Versions) -> str:
    """``text`` (the README) with the table between its markers written from the table and trafka's ``served`` and
    ``advertised`` versions."""
    start = text.find(_TABLE_START)
    end = text.find(_TABLE_END)
    if start < 0 or end < start:
        raise ValueError(f"README: no {_TABLE_START} ... {_TABLE_END}")
    body = "\n".join(["", *readme_table(served), "", *(f"- {note}" for note in readme_notes(served, advertised)), ""])
    return text[:start + len(_TABLE_START)] + "\n" + body + "\n" + text[end:]

