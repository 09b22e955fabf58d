"""The request frames real clients sent (librdkafka, kafka-python, aiokafka, kafkajs, kcat and the Java
client, recorded by compat_tests/fuzz/capture.py into compat_tests/fuzz/corpus.json): every one decodes,
and encodes back to the very same bytes, header and body."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from wire.messages import REQUESTS
from wire.primitives import Writer
from wire.protocol import decode_request_header, encode_request_header

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
