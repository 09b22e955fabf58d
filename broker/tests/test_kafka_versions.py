"""``--kafka-version X.Y`` (trafka.broker.kafka_versions): the versions served and advertised for a release, the
setting's checks, and the README's table of what trafka serves less of each release."""
from __future__ import annotations

from pathlib import Path

import pytest

from trafka.broker.config import BrokerConfig, ConfigError
from trafka.broker.handlers import REGISTRY
from trafka.broker.handlers.api_versions import api_versions_response, served_versions, served_versions_on
from trafka.broker.kafka_versions import KAFKA_VERSION_NAMES, cap, for_listener, release, render_readme
from trafka.wire.kafka_versions import KAFKA_VERSIONS

ROOT = Path(__file__).resolve().parents[2]


def _listed(response) -> dict[int, tuple[int, int]]:
    return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}


def test_the_releases_run_from_2_0_to_4_4_zookeeper_mode_before_4() -> None:
    assert KAFKA_VERSION_NAMES[0] == "2.0" and KAFKA_VERSION_NAMES[-1] == "4.4"
    for name, row in KAFKA_VERSIONS.items():
        assert row.release.startswith(f"{name}.")
        assert row.mode == ("kraft" if name >= "4.0" else "zookeeper")
        assert 18 in row.api_versions  # every broker lists ApiVersions


def test_a_release_caps_each_api_to_the_versions_both_serve() -> None:
    ours = {0: (3, 13), 1: (4, 18), 23: (2, 4), 61: (0, 0)}
    # 2.0: Fetch v0-8, OffsetForLeaderEpoch v0-1 (none in common), no DescribeProducers.
    assert cap(ours, "2.0") == {0: (3, 6), 1: (4, 8)}
    assert cap(ours, "2.8") == {0: (3, 9), 1: (4, 12), 23: (2, 4), 61: (0, 0)}
    assert cap(ours, None) == ours
    # Advertised versions may start below the served ones (Produce v0-2), but only where one is served.
    assert cap({0: (0, 13), 23: (0, 4)}, "2.0", served={0: (3, 13), 23: (2, 4)}) == {0: (0, 6)}
    with pytest.raises(ValueError, match="2.9"):
        cap(ours, "2.9")


@pytest.mark.parametrize("name", KAFKA_VERSION_NAMES)
def test_what_is_served_lies_within_the_release_and_trafka(name: str) -> None:
    ours, theirs = REGISTRY.served_versions(), release(name).api_versions
    served = served_versions(name)
    assert served
    for api_key, (low, high) in served.items():
        assert ours[api_key][0] <= low <= high <= ours[api_key][1]
        assert theirs[api_key][0] <= low and high <= theirs[api_key][1]
    # Nothing both serve is left out.
    for api_key in set(ours) & set(theirs):
        if max(ours[api_key][0], theirs[api_key][0]) <= min(ours[api_key][1], theirs[api_key][1]):
            assert api_key in served
    answer = _listed(api_versions_response(config=BrokerConfig(kafka_version=name)))
    assert answer.keys() == served.keys()
    assert all(answer[key][1] == served[key][1] for key in served)


def test_api_versions_answers_the_releases_features_epoch() -> None:
    assert api_versions_response().finalized_features_epoch == -1
    assert api_versions_response(config=BrokerConfig(kafka_version="2.6")).finalized_features_epoch == -1
    assert api_versions_response(config=BrokerConfig(kafka_version="2.8")).finalized_features_epoch == 0
    assert api_versions_response(config=BrokerConfig(kafka_version="4.4")).finalized_features_epoch == -1
    assert _listed(api_versions_response()) == {h.api_key: (h.advertised_min_version, h.max_version)
                                                for h in REGISTRY}


def test_the_setting_takes_a_release_trafka_knows() -> None:
    assert BrokerConfig.from_properties({}).kafka_version is None
    assert BrokerConfig.from_properties({"kafka.version": "2.8"}).kafka_version == "2.8"
    for wrong in ("2.9", "2.8.2", "2", "latest"):
        with pytest.raises(ConfigError, match=r"kafka.version=.*one of Apache Kafka's releases 2\.0, 2\.1, "):
            BrokerConfig.from_properties({"kafka.version": wrong})


def test_in_a_cluster_the_inter_broker_listener_serves_trafkas_own_versions() -> None:
    cluster = {"zookeeper.connect": "127.0.0.1:2181", "broker.id": "1", "kafka.version": "2.8"}
    with pytest.raises(ConfigError, match="a listener of their own"):
        BrokerConfig.from_properties(cluster)
    config = BrokerConfig.from_properties({
        **cluster, "listeners": "CLIENTS://127.0.0.1:9092,BROKERS://127.0.0.1:9093",
        "listener.security.protocol.map": "CLIENTS:PLAINTEXT,BROKERS:PLAINTEXT",
        "inter.broker.listener.name": "BROKERS"})
    assert (for_listener(config, "CLIENTS"), for_listener(config, "BROKERS")) == ("2.8", None)
    assert served_versions_on(config, "BROKERS") == served_versions(None)
    assert served_versions_on(config, "CLIENTS") == served_versions("2.8")
    # A single node has no other broker to talk to: every listener serves the release's versions.
    single = BrokerConfig.from_properties({"kafka.version": "2.8"})
    assert for_listener(single, single.inter_broker_listener_name) == "2.8"


def test_the_readme_table_is_up_to_date() -> None:
    path = ROOT / "README.md"
    if not path.exists():
        pytest.skip("README.md is not next to the sources (an installed copy)")
    text = path.read_text(encoding="utf-8")
    advertised = {h.api_key: (h.advertised_min_version, h.max_version) for h in REGISTRY}
    assert render_readme(text, REGISTRY.served_versions(), advertised) == text, (
        "the README's kafka versions table is stale: run python -m compat_tests.kafka_versions --readme")
