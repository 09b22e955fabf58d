"""Golden frames: the request frames real clients sent (librdkafka, kafka-python, aiokafka, kafkajs, kcat
and the Java client, recorded by compat_tests/fuzz/capture.py into compat_tests/fuzz/corpus.json), and
Apache Kafka 4.4's answers to them (compat_tests/fuzz/kafka_responses.py): every one decodes, and encodes
back to the very same bytes, header and body."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from trafka.wire.messages import REQUESTS, RESPONSES
from trafka.wire.primitives import Writer
from trafka.wire.protocol import (
    decode_request_header,
    decode_response_header,
    encode_request_header,
    encode_response_header,
    response_header_version,
)

CORPUS = Path(__file__).resolve().parents[2] / "compat_tests" / "fuzz" / "corpus.json"
FRAMES = [(entry["client"], bytes.fromhex(entry["frame"])) for entry in json.loads(CORPUS.read_text())["frames"]]


def test_the_corpus_covers_every_client_and_many_apis():
    clients = {client for client, _ in FRAMES}
    assert {"confluent-kafka", "kafka-python", "aiokafka", "kafkajs", "kcat", "java"} <= clients, clients
    assert len({int.from_bytes(frame[:2], "big") for _, frame in FRAMES}) >= 25


@pytest.mark.parametrize(("client", "frame"), FRAMES, ids=[f"{i}-{client}" for i, (client, _) in enumerate(FRAMES)])
def test_a_clients_request_decodes_and_encodes_back_to_its_bytes(client, frame):
    header, body_start = decode_request_header(memoryview(frame))
    request = REQUESTS[header.api_key].decode(memoryview(frame)[body_start:], header.api_version)

    writer = Writer()
    encode_request_header(writer, header)
    request.encode_into(writer, header.api_version)

    assert writer.to_bytes() == frame


KAFKA_RESPONSES = [
    (entry["api_key"], entry["api_version"], bytes.fromhex(entry["response"]))
    for entry in json.loads((CORPUS.parent / "kafka_responses.json").read_text())["responses"]
]


@pytest.mark.parametrize(("api_key", "version", "frame"), KAFKA_RESPONSES,
                         ids=[f"{i}-{key}v{version}" for i, (key, version, _) in enumerate(KAFKA_RESPONSES)])
def test_apache_kafkas_answer_decodes_and_encodes_back_to_its_bytes(api_key, version, frame):
    header_version = response_header_version(api_key, version)
    correlation_id, body_start = decode_response_header(memoryview(frame), header_version)
    response = RESPONSES[api_key].decode(memoryview(frame)[body_start:], version)

    writer = Writer()
    encode_response_header(writer, correlation_id, header_version)
    response.encode_into(writer, version)

    assert writer.to_bytes() == frame
