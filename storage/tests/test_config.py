"""Topic configs: Kafka's names, ranges and refusal messages; the catalog of configuration definitions and the
README's tables of settings written from it."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from trafka.storage.config import LogConfig, check_broker_log_property
from trafka.storage.config_defs import (
    BROKER_CONFIG_DEFS,
    DOUBLE_MAX,
    DYNAMIC_BROKER_CONFIGS,
    README_TABLES,
    TOPIC_CONFIG_DEFS,
    ConfigType,
    java_double,
    render_readme,
)
from trafka.wire.errors import ErrorCode, KafkaError


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("segment.bytes", "big", "Invalid value big for configuration segment.bytes: Not a number of type INT"),
        ("segment.bytes", "3000000000",
         "Invalid value 3000000000 for configuration segment.bytes: Not a number of type INT"),
        ("retention.ms", "soon", "Invalid value soon for configuration retention.ms: Not a number of type LONG"),
        ("min.cleanable.dirty.ratio", "half",
         "Invalid value half for configuration min.cleanable.dirty.ratio: Not a number of type DOUBLE"),
        ("cleanup.policy", "delete,shred",
         "Invalid value delete,shred for configuration cleanup.policy: String must be one of: compact, delete"),
    ],
)
def test_bad_values_are_refused_with_kafkas_message(name, value, message):
    with pytest.raises(KafkaError) as refused:
        LogConfig.from_properties({name: value})
    assert (refused.value.code, refused.value.message) == (ErrorCode.INVALID_CONFIG, message)


def test_an_empty_cleanup_policy_neither_deletes_nor_compacts():
    config = LogConfig.from_properties({"cleanup.policy": ""})
    assert (config.cleanup_policy, config.delete, config.compact) == ("", False, False)
    assert LogConfig.from_properties({"cleanup.policy": "Compact, delete"}).cleanup_policy == "compact,delete"


# -- the catalog of configuration definitions -------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]


def test_a_log_config_holds_the_catalogs_defaults():
    defaults = LogConfig().to_properties()

    assert defaults == {name: definition.default_string for name, definition in TOPIC_CONFIG_DEFS.items()
                        if definition.field is not None}
    assert (defaults["retention.ms"], defaults["cleanup.policy"], defaults["min.cleanable.dirty.ratio"]) == (
        "604800000", "delete", "0.5")


def test_a_topic_config_accepted_without_effect_is_not_held():
    config = LogConfig.from_properties({"compression.gzip.level": "anything", "retention.ms": "5"})
    assert config == LogConfig(retention_ms=5)
    assert "compression.gzip.level" not in config.to_properties()


def test_the_broker_synonyms_are_broker_settings_with_kafkas_defaults_and_units():
    hours = BROKER_CONFIG_DEFS["log.retention.hours"]
    assert (hours.type, hours.default, hours.default_of, hours.unit_ms, hours.dynamic) == (
        ConfigType.INT, 168, "retention.ms", 3_600_000, False)
    milliseconds = BROKER_CONFIG_DEFS["log.retention.ms"]
    assert (milliseconds.type, milliseconds.default, milliseconds.dynamic) == (ConfigType.LONG, None, True)
    assert BROKER_CONFIG_DEFS["message.max.bytes"].default_string == "1048588"
    # Of each topic config's synonyms the first may change at run time; no other broker setting may.
    assert DYNAMIC_BROKER_CONFIGS == {definition.synonyms[0][0] for definition in TOPIC_CONFIG_DEFS.values()
                                      if definition.synonyms}


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [("log.retention.hours", "2", "7200000"), ("log.retention.minutes", "-1", "-1"), ("log.segment.bytes", "20", "20")],
)
def test_a_broker_synonym_gives_its_topic_config_in_the_topic_configs_unit(name, value, expected):
    assert check_broker_log_property(name, value) == expected


def test_a_broker_synonym_is_refused_under_its_own_name():
    with pytest.raises(KafkaError) as refused:
        check_broker_log_property("log.roll.hours", "0")
    assert refused.value.message == "Invalid value 0 for configuration log.roll.hours: Value must be at least 1"


@pytest.mark.parametrize(("value", "written"), [(0.9, "0.9"), (1.0, "1.0"), (1e-05, "1.0E-5"),
                                                (DOUBLE_MAX, "1.7976931348623157E308"), (123456789.0, "1.23456789E8")])
def test_doubles_are_written_as_java_writes_them(value, written):
    assert java_double(value) == written


def _readme() -> str:
    path = ROOT / "README.md"
    if not path.exists():
        pytest.skip("README.md is not next to the sources (an installed copy)")
    return path.read_text(encoding="utf-8")


def test_the_readmes_tables_of_settings_are_the_catalogs():
    readme = _readme()
    assert readme.count("<!-- settings table: ") == len(README_TABLES)
    assert render_readme(readme) == readme, (
        "the README's tables of settings are out of date: python -m trafka.storage.config_defs README.md")


def test_every_setting_the_readme_names_where_it_runs_the_broker_is_in_the_catalog():
    readme = _readme()
    sections = readme.split("## Running the broker", 1)[1].split("## Transactions and exactly-once", 1)[0]
    named = set(re.findall(r"`([a-z][a-z0-9]*(?:\.[a-z0-9]+)+)`", sections)) - {"server.properties"}
    assert len(named) > 40
    assert sorted(named - set(BROKER_CONFIG_DEFS) - set(TOPIC_CONFIG_DEFS)) == []
