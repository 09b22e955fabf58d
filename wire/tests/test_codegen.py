"""The generator: committed modules are current, spec parsing, naming, and types the served specs
do not use yet (exercised through a synthetic spec)."""
from __future__ import annotations

import json
import re
import types
import uuid
from pathlib import Path

import pytest

from trafka.wire import codegen
from trafka.wire.messages import REQUESTS, RESPONSES, ApiKey
from trafka.wire.primitives import EncodeError

SPECS = codegen.specs_from(None)
needs_specs = pytest.mark.skipif(
    not SPECS.exists(),
    reason=f"Kafka message specs not found at {SPECS}: compat_tests/setup.sh fetches the kafka-clients jar "
    "that carries them (or set TRAFKA_KAFKA_SPECS)",
)


@needs_specs
def test_committed_modules_are_current() -> None:
    files = codegen.generate(SPECS)
    for name, source in files.items():
        path = codegen.OUTPUT_DIR / name
        assert path.exists(), f"wire/messages/{name} is missing: run python -m trafka.wire.codegen"
        assert path.read_text() == source, f"wire/messages/{name} is out of date: run python -m trafka.wire.codegen"
    assert list(codegen.stale_files(codegen.OUTPUT_DIR, files)) == []


@needs_specs
def test_check_mode(capsys: pytest.CaptureFixture[str]) -> None:
    assert codegen.main([str(SPECS), "--check"]) == 0
    assert capsys.readouterr().out == ""


def test_specs_from_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TRAFKA_KAFKA_SPECS", str(tmp_path))
    assert codegen.specs_from(None) == tmp_path
    assert codegen.specs_from("elsewhere") == Path("elsewhere")
    monkeypatch.delenv("TRAFKA_KAFKA_SPECS")
    assert codegen.specs_from(None) == codegen.DEFAULT_SPECS


def test_the_default_specs_are_the_jar_the_java_tests_pin() -> None:
    pom = (codegen.REPO_ROOT / "compat_tests" / "java" / "pom.xml").read_text()
    pinned = re.search(r"<artifactId>kafka-clients</artifactId>\s*<version>([^<]+)</version>", pom)
    assert pinned is not None and pinned.group(1) == codegen.KAFKA_CLIENTS_VERSION


@needs_specs
def test_a_folder_of_specs_reads_as_the_jar(tmp_path: Path) -> None:
    for name in ("ProduceRequest", "ConsumerProtocolAssignment"):
        (tmp_path / f"{name}.json").write_text(codegen.read_spec(SPECS, name))
        assert codegen.load_spec(codegen.read_spec(tmp_path, name)) == codegen.load_spec(codegen.read_spec(SPECS, name))
    with pytest.raises(codegen.SpecError, match="no common/message/NoSuchRequest.json"):
        codegen.read_spec(SPECS, "NoSuchRequest")


def test_every_served_api_is_in_the_tables() -> None:
    assert len(codegen.SERVED_APIS) == len(ApiKey) == len(REQUESTS) == len(RESPONSES)
    for key in ApiKey:
        assert REQUESTS[key].API_KEY == RESPONSES[key].API_KEY == key
    assert ApiKey.PRODUCE == 0 and ApiKey.FETCH == 1 and ApiKey.API_VERSIONS == 18
    assert ApiKey.DESCRIBE_TOPIC_PARTITIONS == 75 and ApiKey.CONSUMER_GROUP_HEARTBEAT == 68


def test_generated_modules_carry_the_banner() -> None:
    for path in codegen.OUTPUT_DIR.glob("*.py"):
        assert codegen.BANNER in path.read_text(), path


def test_strip_comments_keeps_slashes_inside_strings() -> None:
    text = '// header\n{ "a": "http://x", // trailing\n  "b": "say \\"//\\"" }\n'
    assert json.loads(codegen.strip_comments(text)) == {"a": "http://x", "b": 'say "//"'}


@pytest.mark.parametrize(
    ("spec_name", "attribute"),
    [
        ("ReplicaIds", "replica_ids"),
        ("IsInternal", "is_internal"),
        ("ClusterId", "cluster_id"),
        ("TopicId", "topic_id"),
        ("ThrottleTimeMs", "throttle_time_ms"),
        ("ZkMigrationReady", "zk_migration_ready"),
        ("V3AndBelowTopics", "v3_and_below_topics"),
        ("Enable2Pc", "enable_2pc"),
        ("timeoutMs", "timeout_ms"),
        ("SASLMechanism", "sasl_mechanism"),
    ],
)
def test_snake_case(spec_name: str, attribute: str) -> None:
    assert codegen.snake_case(spec_name) == attribute


@pytest.mark.parametrize(
    ("text", "versions"),
    [("0+", range(0, 32768)), ("3-13", range(3, 14)), ("5", range(5, 6)), ("none", range(0))],
)
def test_parse_versions(text: str, versions: range) -> None:
    assert codegen.parse_versions(text) == versions


SYNTHETIC_SPEC = """
// A message that uses the spec language's less common corners.
{
  "apiKey": 999,
  "type": "response",
  "name": "SyntheticResponse",
  "validVersions": "0-2",
  "flexibleVersions": "2+",
  "fields": [
    { "name": "Ratio", "type": "float64", "versions": "0+", "default": "0.5" },
    { "name": "Port", "type": "uint16", "versions": "0+", "default": "0x1f90" },
    { "name": "Count", "type": "uint32", "versions": "1+", "ignorable": true },
    { "name": "Ids", "type": "[]uuid", "versions": "0+" },
    { "name": "Payload", "type": "bytes", "versions": "0+", "nullableVersions": "1+", "default": "null" },
    { "name": "Note", "type": "string", "versions": "2+", "taggedVersions": "2+", "tag": 4,
      "nullableVersions": "2+", "default": "null" },
    { "name": "Offsets", "type": "[]int64", "versions": "2+", "taggedVersions": "2+", "tag": 1 },
    { "name": "Owner", "type": "Member", "versions": "1+", "nullableVersions": "1+", "default": "null",
      "fields": [
        { "name": "MemberId", "type": "string", "versions": "1+" },
        { "name": "Shared", "type": "[]Shared", "versions": "1+" }
    ]},
    { "name": "Extra", "type": "Shared", "versions": "0+" }
  ],
  "commonStructs": [
    { "name": "Shared", "versions": "0+", "fields": [
      { "name": "Flag", "type": "bool", "versions": "0+", "default": "true" }
    ]}
  ]
}
"""


@pytest.fixture(scope="module")
def synthetic() -> type:
    """The synthetic spec's generated module, loaded."""
    spec = codegen.load_spec(SYNTHETIC_SPEC)
    source = codegen.generate_module("A synthetic message.", [spec])
    compile(source, "synthetic.py", "exec")
    module = types.ModuleType("synthetic")
    exec(source, module.__dict__)
    return module.SyntheticResponse


def test_synthetic_defaults(synthetic: type) -> None:
    message = synthetic()
    assert message.ratio == 0.5 and message.port == 0x1F90 and message.count == 0
    assert message.payload is None and message.note is None and message.owner is None
    assert message.ids == [] and message.offsets == []
    assert message.extra == synthetic.Shared(flag=True)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_synthetic_round_trip(synthetic: type, version: int) -> None:
    message = synthetic(
        ratio=-1.25,
        port=65535,
        count=2**32 - 1 if version >= 1 else 0,
        ids=[uuid.uuid4(), uuid.UUID(int=1)],
        payload=None if version >= 1 else b"\x00\x01",
        note="tagged" if version >= 2 else None,
        offsets=[2**63 - 1, -1] if version >= 2 else [],
        owner=(
            synthetic.Member(member_id="m", shared=[synthetic.Shared(flag=False)]) if version >= 1 else None
        ),
        extra=synthetic.Shared(flag=False),
    )
    assert synthetic.decode(message.encode(version), version) == message


def test_synthetic_nullable_struct_encoding(synthetic: type) -> None:
    assert synthetic(owner=None).encode(1) != synthetic(owner=synthetic.Member()).encode(1)
    assert synthetic.decode(synthetic(owner=synthetic.Member()).encode(1), 1).owner == synthetic.Member()


def test_synthetic_version_checks(synthetic: type) -> None:
    # Payload is not nullable in v0; Owner (v1+, not ignorable) cannot be dropped in v0.
    with pytest.raises(EncodeError, match="SyntheticResponse.payload is None"):
        synthetic(payload=None).encode(0)
    with pytest.raises(EncodeError, match="SyntheticResponse.owner="):
        synthetic(payload=b"", owner=synthetic.Member()).encode(0)
    # Count (v1+) is ignorable: dropped in v0.
    assert synthetic.decode(synthetic(payload=b"", count=5).encode(0), 0).count == 0


def test_unknown_type_is_reported() -> None:
    text = (
        '{"apiKey": 1000, "type": "request", "name": "BadRequest", "validVersions": "0", '
        '"flexibleVersions": "none", "fields": [{"name": "X", "type": "[]Missing", "versions": "0+"}]}'
    )
    with pytest.raises(codegen.SpecError, match="unknown type"):
        codegen.load_spec(text)
