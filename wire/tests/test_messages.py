"""Generated message classes: round trips over every (message, version), golden bytes from real
clients, defaults, tagged and ignorable fields, and garbage input."""
from __future__ import annotations

import uuid
from functools import cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trafka.wire.chunks import FileSlice
from trafka.wire.messages import (
    REQUESTS,
    RESPONSES,
    ApiKey,
    ApiVersionsRequest,
    ApiVersionsResponse,
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    FetchRequest,
    FetchResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
)
from trafka.wire.primitives import ZERO_UUID, DecodeError, EncodeError, Field, Message, Struct, Writer
from trafka.wire.protocol import RequestHeader, decode_request_header, encode_request_header

MESSAGES: list[type[Message]] = [
    *REQUESTS.values(),
    *RESPONSES.values(),
    ConsumerProtocolSubscription,
    ConsumerProtocolAssignment,
]
MESSAGE_VERSIONS = [
    pytest.param(cls, version, id=f"{cls.__name__}-v{version}")
    for cls in MESSAGES
    for version in range(cls.MIN_VERSION, cls.MAX_VERSION + 1)
]

# -- strategies built from the classes' FIELDS ----------------------------------------------------

INTEGERS = {
    "int8": st.integers(-(2**7), 2**7 - 1),
    "int16": st.integers(-(2**15), 2**15 - 1),
    "uint16": st.integers(0, 2**16 - 1),
    "int32": st.integers(-(2**31), 2**31 - 1),
    "uint32": st.integers(0, 2**32 - 1),
    "int64": st.integers(-(2**63), 2**63 - 1),
}
PRIMITIVES = {
    **INTEGERS,
    "bool": st.booleans(),
    "float64": st.floats(allow_nan=False),
    "string": st.text(max_size=12),
    "bytes": st.binary(max_size=12),
    "records": st.binary(max_size=40),
    "uuid": st.uuids(),
}


@cache
def struct_strategy(message: type[Message], cls: type[Struct], version: int) -> st.SearchStrategy:
    fields = {
        field.name: field_strategy(message, field, version)
        for field in cls.FIELDS
        if version in field.versions
    }
    return st.builds(cls, **fields)


def field_strategy(message: type[Message], field: Field, version: int) -> st.SearchStrategy:
    if field.type.startswith("[]"):
        element = field.type[2:]
        if element in PRIMITIVES:
            item = PRIMITIVES[element]
        else:
            item = struct_strategy(message, getattr(message, element), version)
        strategy = st.lists(item, max_size=3)
    elif field.type in PRIMITIVES:
        strategy = PRIMITIVES[field.type]
    else:
        strategy = struct_strategy(message, getattr(message, field.type), version)
    if version in field.nullable_versions:
        strategy = st.none() | strategy
    return strategy


@pytest.mark.parametrize(("cls", "version"), MESSAGE_VERSIONS)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_round_trip(cls: type[Message], version: int, data: st.DataObject) -> None:
    message = data.draw(struct_strategy(cls, cls, version))
    encoded = message.encode(version)
    decoded = cls.decode(encoded, version)
    assert decoded == message
    assert decoded.encode(version) == encoded


@pytest.mark.parametrize(("cls", "version"), MESSAGE_VERSIONS)
def test_defaults_round_trip(cls: type[Message], version: int) -> None:
    assert cls.decode(cls().encode(version), version) == cls()


@pytest.mark.parametrize(("cls", "version"), MESSAGE_VERSIONS)
@settings(max_examples=5, deadline=None)
@given(data=st.data())
def test_truncated_input_raises_decode_error(cls: type[Message], version: int, data: st.DataObject) -> None:
    encoded = data.draw(struct_strategy(cls, cls, version)).encode(version)
    if encoded:
        cut = data.draw(st.integers(0, len(encoded) - 1))
        with pytest.raises(DecodeError):
            cls.decode(encoded[:cut], version)


@pytest.mark.parametrize("cls", MESSAGES, ids=lambda cls: cls.__name__)
@settings(max_examples=50, deadline=None)
@given(garbage=st.binary(max_size=64), version_offset=st.integers(0, 20))
def test_garbage_raises_decode_error_or_decodes(
    cls: type[Message], garbage: bytes, version_offset: int
) -> None:
    version = min(cls.MIN_VERSION + version_offset, cls.MAX_VERSION)
    try:
        cls.decode(garbage, version)
    except DecodeError:
        pass


# -- golden bytes captured from real clients (request header + body, without the size prefix) ----

GOLDEN = {
    "librdkafka ApiVersions v3": (
        "001200030000000100116c696272646b61666b612d676f6c64656e0017636f6e666c75656e742d6b61666b612d7079"
        "74686f6e16322e31362e312d72646b61666b612d322e31362e3000",
        RequestHeader(ApiKey.API_VERSIONS, 3, 1, "librdkafka-golden"),
        ApiVersionsRequest(
            client_software_name="confluent-kafka-python", client_software_version="2.16.1-rdkafka-2.16.0"
        ),
    ),
    "kafka-python ApiVersions v4": (
        "001200040000000100136b61666b612d707974686f6e2d676f6c64656e000d6b61666b612d707974686f6e07332e30"
        "2e313200",
        RequestHeader(ApiKey.API_VERSIONS, 4, 1, "kafka-python-golden"),
        ApiVersionsRequest(client_software_name="kafka-python", client_software_version="3.0.12"),
    ),
    "librdkafka Metadata v13 for one topic": (
        "0003000d0000000200116c696272646b61666b612d676f6c64656e0002000000000000000000000000000000000d67"
        "6f6c64656e2d746f70696300010000",
        RequestHeader(ApiKey.METADATA, 13, 2, "librdkafka-golden"),
        MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(topic_id=ZERO_UUID, name="golden-topic")],
            allow_auto_topic_creation=True,
            include_topic_authorized_operations=False,
        ),
    ),
    "kafka-python Metadata v13 for all topics": (
        "0003000d0000000200136b61666b612d707974686f6e2d676f6c64656e0000010000",
        RequestHeader(ApiKey.METADATA, 13, 2, "kafka-python-golden"),
        MetadataRequest(topics=None, allow_auto_topic_creation=True),
    ),
    "kafka-python Produce v9": (
        "000000090000000300136b61666b612d707974686f6e2d676f6c64656e0000ffff00007530020d676f6c64656e2d74"
        "6f70696302000000004d0000000000000000000000400000000002db5e9cdd0000000000000000018bcfe56800000001"
        "8bcfe56800ffffffffffffffffffffffffffff000000011c000000066b65790a76616c756500000000",
        RequestHeader(ApiKey.PRODUCE, 9, 3, "kafka-python-golden"),
        None,  # checked below
    ),
    "librdkafka Produce v10": (
        "0000000a0000000200116c696272646b61666b612d676f6c64656e0000ffff00007530020d676f6c64656e2d746f70"
        "696302000000004d0000000000000000000000400000000002db5e9cdd0000000000000000018bcfe568000000018b"
        "cfe56800ffffffffffffffffffffffffffff000000011c000000066b65790a76616c756500000000",
        RequestHeader(ApiKey.PRODUCE, 10, 2, "librdkafka-golden"),
        None,
    ),
}
# The one-record batch (key b"key", value b"value", timestamp 1700000000000) both clients produced.
GOLDEN_BATCH = bytes.fromhex(
    "0000000000000000000000400000000002db5e9cdd0000000000000000018bcfe568000000018bcfe56800ffffffffffff"
    "ffffffffffffffff000000011c000000066b65790a76616c756500"
)


def golden_produce() -> ProduceRequest:
    return ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name="golden-topic",
                partition_data=[ProduceRequest.PartitionProduceData(index=0, records=GOLDEN_BATCH)],
            )
        ],
    )


@pytest.mark.parametrize("name", GOLDEN)
def test_golden_requests(name: str) -> None:
    frame_hex, expected_header, expected_body = GOLDEN[name]
    frame = memoryview(bytes.fromhex(frame_hex))
    header, body_start = decode_request_header(frame)
    assert header == expected_header
    body = REQUESTS[header.api_key].decode(frame[body_start:], header.api_version)
    assert body == (expected_body or golden_produce())
    w = Writer()
    encode_request_header(w, header)
    body.encode_into(w, header.api_version)
    assert bytes(w).hex() == frame_hex


def test_decoded_records_are_a_view_into_the_input() -> None:
    frame = bytearray.fromhex(GOLDEN["kafka-python Produce v9"][0])
    header, body_start = decode_request_header(memoryview(frame))
    request = ProduceRequest.decode(memoryview(frame)[body_start:], 9)
    records = request.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and records == GOLDEN_BATCH
    frame[frame.find(GOLDEN_BATCH)] = 0x7F  # same memory: no copy was made
    assert records[0] == 0x7F


# -- names, defaults, class layout -------------------------------------------------------------


def test_nested_structs_are_scoped_in_the_message_class() -> None:
    assert ProduceRequest.TopicProduceData.__qualname__ == "ProduceRequest.TopicProduceData"
    assert FetchResponse.PartitionData.__qualname__ == "FetchResponse.PartitionData"
    assert FetchResponse.AbortedTransaction.__qualname__ == "FetchResponse.AbortedTransaction"
    # common structs too
    assert ConsumerProtocolAssignment.TopicPartition.__qualname__ == (
        "ConsumerProtocolAssignment.TopicPartition"
    )


def test_field_names_are_snake_case_of_the_spec() -> None:
    partition = MetadataResponse.MetadataResponsePartition()
    assert {"replica_nodes", "isr_nodes", "offline_replicas", "leader_epoch"} <= set(partition.__slots__)
    topic = MetadataResponse.MetadataResponseTopic()
    assert {"is_internal", "topic_id", "topic_authorized_operations"} <= set(topic.__slots__)
    assert "cluster_id" in MetadataResponse.__slots__
    assert "replica_id" in FetchRequest.__slots__


def test_spec_defaults() -> None:
    response = FetchResponse()
    assert response.session_id == 0 and response.responses == [] and response.node_endpoints == []
    partition = FetchResponse.PartitionData()
    assert partition.last_stable_offset == -1
    assert partition.log_start_offset == -1
    assert partition.preferred_read_replica == -1
    assert partition.aborted_transactions == []  # nullable, but the default is empty
    assert partition.records is None
    assert partition.current_leader == FetchResponse.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)
    assert ProduceRequest().transactional_id is None
    assert MetadataRequest().allow_auto_topic_creation is True
    assert MetadataResponse.MetadataResponseTopic().topic_id == uuid.UUID(int=0)
    assert FetchRequest().cluster_id is None
    assert FetchRequest.FetchPartition().high_watermark == 2**63 - 1


def test_explicit_none_is_kept_for_nullable_lists_with_an_empty_default() -> None:
    assert MetadataRequest(topics=None).topics is None
    assert MetadataRequest().topics == []
    assert FetchResponse.PartitionData(aborted_transactions=None).aborted_transactions is None


def test_lists_and_structs_are_not_shared_between_instances() -> None:
    a, b = FetchResponse.PartitionData(), FetchResponse.PartitionData()
    assert a.aborted_transactions is not b.aborted_transactions
    assert a.current_leader is not b.current_leader


def test_slots_and_keyword_only_construction() -> None:
    request = ProduceRequest(acks=1)
    with pytest.raises(AttributeError):
        request.not_a_field = 1  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        ProduceRequest(None, 1)  # type: ignore[misc]


def test_repr_and_equality() -> None:
    a = ProduceRequest.PartitionProduceData(index=1, records=b"x")
    assert repr(a) == "ProduceRequest.PartitionProduceData(index=1, records=b'x')"
    assert a == ProduceRequest.PartitionProduceData(index=1, records=b"x")
    assert a != ProduceRequest.PartitionProduceData(index=2, records=b"x")
    assert a != ProduceResponse.PartitionProduceResponse(index=1)


def test_class_constants() -> None:
    # Produce v0-2 are generated although Kafka 4.0's spec starts at v3 (KAFKA-18659)
    assert (ProduceRequest.API_KEY, ProduceRequest.MIN_VERSION, ProduceRequest.MAX_VERSION) == (0, 0, 13)
    assert ProduceRequest.FIRST_FLEXIBLE_VERSION == 9
    assert not ProduceRequest.is_flexible(8) and ProduceRequest.is_flexible(9)
    assert ConsumerProtocolSubscription.API_KEY is None
    assert ConsumerProtocolSubscription.FIRST_FLEXIBLE_VERSION is None


# -- tagged fields ------------------------------------------------------------------------------


def test_tagged_fields_are_written_only_when_not_default() -> None:
    plain = ApiVersionsResponse(
        api_keys=[ApiVersionsResponse.ApiVersion(api_key=0, min_version=3, max_version=13)]
    )
    assert plain.encode(3).endswith(b"\x00")  # no tagged fields
    tagged = ApiVersionsResponse(finalized_features_epoch=5, zk_migration_ready=True)
    encoded = tagged.encode(3)
    assert encoded.endswith(bytes([2, 1, 8, 0, 0, 0, 0, 0, 0, 0, 5, 3, 1, 1]))  # tags 1 and 3
    assert ApiVersionsResponse.decode(encoded, 3) == tagged


def test_tagged_struct_field() -> None:
    partition = FetchResponse.PartitionData(
        partition_index=3, current_leader=FetchResponse.LeaderIdAndEpoch(leader_id=2, leader_epoch=9)
    )
    response = FetchResponse(
        responses=[FetchResponse.FetchableTopicResponse(topic="t", partitions=[partition])]
    )
    decoded = FetchResponse.decode(response.encode(12), 12)
    assert decoded.responses[0].partitions[0].current_leader.leader_id == 2
    assert decoded == response


def test_unknown_tagged_fields_are_skipped() -> None:
    encoded = ApiVersionsRequest(client_software_name="a", client_software_version="b").encode(3)
    assert encoded.endswith(b"\x00")
    with_unknown = encoded[:-1] + bytes([2, 7, 3]) + b"xyz" + bytes([9, 0])  # tags 7 and 9
    decoded = ApiVersionsRequest.decode(with_unknown, 3)
    assert decoded == ApiVersionsRequest(client_software_name="a", client_software_version="b")


def test_tagged_field_size_mismatch_is_an_error() -> None:
    good = ApiVersionsResponse(finalized_features_epoch=5).encode(3)
    bad = good.replace(bytes([1, 8]), bytes([1, 9]))  # tag 1 claims 9 bytes for an int64
    with pytest.raises(DecodeError):
        ApiVersionsResponse.decode(bad + b"\x00", 3)


# -- version-dependent encoding -----------------------------------------------------------------


def test_ignorable_field_missing_from_the_version_is_dropped() -> None:
    response = ProduceResponse(throttle_time_ms=0)
    request = ProduceRequest(topic_data=[ProduceRequest.TopicProduceData(name="t", topic_id=uuid.uuid4())])
    # topic_id is v13+ and ignorable: v12 silently leaves it out
    assert ProduceRequest.decode(request.encode(12), 12).topic_data[0].topic_id == ZERO_UUID
    assert ProduceResponse.decode(response.encode(3), 3) == response


def test_non_ignorable_field_missing_from_the_version_is_an_error() -> None:
    response = FetchResponse(session_id=7)  # session_id: v7+, not ignorable
    assert FetchResponse.decode(response.encode(7), 7).session_id == 7
    with pytest.raises(EncodeError, match=r"FetchResponse v6: .*FetchResponse.session_id=7 .*versions 7\+"):
        response.encode(6)
    assert FetchResponse(session_id=0).encode(6)  # the default is fine


def test_non_ignorable_struct_field_missing_from_the_version_is_an_error() -> None:
    partition = ProduceResponse.PartitionProduceResponse(
        current_leader=ProduceResponse.LeaderIdAndEpoch(leader_id=1, leader_epoch=2)
    )
    response = ProduceResponse(
        responses=[ProduceResponse.TopicProduceResponse(partition_responses=[partition])]
    )
    response.encode(10)
    with pytest.raises(EncodeError, match=r"ProduceResponse v9: .*current_leader"):
        response.encode(9)


def test_null_in_a_version_where_the_field_is_not_nullable() -> None:
    request = MetadataRequest(topics=None)  # null means "all topics" from v1
    assert MetadataRequest.decode(request.encode(1), 1).topics is None
    with pytest.raises(EncodeError, match=r"MetadataRequest v0: MetadataRequest.topics is None"):
        request.encode(0)


def test_unknown_version() -> None:
    with pytest.raises(EncodeError, match="ProduceRequest has no version -1"):
        ProduceRequest().encode(-1)
    with pytest.raises(DecodeError, match="ProduceRequest has no version 14"):
        ProduceRequest.decode(b"", 14)


def test_out_of_range_value_is_an_encode_error() -> None:
    with pytest.raises(EncodeError, match="ProduceRequest v9"):
        ProduceRequest(acks=2**15).encode(9)


# -- records and chunks -------------------------------------------------------------------------


def test_records_from_any_buffer(tmp_path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"abcdef")
    with open(path, "rb") as file:
        for records in (b"abc", bytearray(b"abc"), memoryview(b"xabcx")[1:4], FileSlice(file, 0, 3)):
            partition = FetchResponse.PartitionData(records=records)
            response = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(partitions=[partition])])
            for version in (4, 12):
                decoded = FetchResponse.decode(response.encode(version), version)
                assert decoded.responses[0].partitions[0].records == b"abc"


def test_encode_into_keeps_file_slices_separate(tmp_path) -> None:
    path = tmp_path / "log"
    path.write_bytes(bytes(100))
    with open(path, "rb") as file:
        slices = [FileSlice(file, 0, 40), FileSlice(file, 40, 60)]
        response = FetchResponse(
            responses=[
                FetchResponse.FetchableTopicResponse(
                    topic="t",
                    partitions=[
                        FetchResponse.PartitionData(partition_index=i, records=s)
                        for i, s in enumerate(slices)
                    ],
                )
            ]
        )
        w = Writer()
        response.encode_into(w, 11)
        chunks = w.chunks()
        assert [c for c in chunks if isinstance(c, FileSlice)] == slices
        assert all(isinstance(c, (FileSlice, bytearray)) for c in chunks)
        assert w.to_bytes() == response.encode(11)


# -- decoding garbage ---------------------------------------------------------------------------


def test_huge_array_count_is_rejected_without_allocating() -> None:
    # MetadataRequest v4: topics array count 2**31 - 1 with 1 byte left
    with pytest.raises(DecodeError, match="cannot fit"):
        MetadataRequest.decode(b"\x7f\xff\xff\xff\x01", 4)
    # compact array count, v9
    with pytest.raises(DecodeError, match="cannot fit"):
        MetadataRequest.decode(b"\xff\xff\xff\xff\x07\x00\x00", 9)


def test_huge_string_length_is_rejected() -> None:
    with pytest.raises(DecodeError, match="runs past the end"):
        ProduceRequest.decode(b"\x7f\xff" + b"x" * 10, 3)


def test_overlong_varint_is_rejected() -> None:
    with pytest.raises(DecodeError, match="longer than 5 bytes"):
        ProduceRequest.decode(b"\xff" * 10, 9)


def test_invalid_utf8_is_a_decode_error() -> None:
    with pytest.raises(DecodeError):
        ApiVersionsRequest.decode(b"\x03\xff\xfe\x01\x00", 3)


def test_non_nullable_null_is_a_decode_error() -> None:
    with pytest.raises(DecodeError, match="non-nullable string"):
        ApiVersionsRequest.decode(b"\x00\x01\x00", 3)


def test_trailing_bytes_are_a_decode_error() -> None:
    with pytest.raises(DecodeError, match="1 unexpected bytes after the message"):
        ApiVersionsRequest.decode(ApiVersionsRequest().encode(3) + b"\x00", 3)
