"""Record Apache Kafka's own answers to the golden request frames: the golden response frames.

``python -m compat_tests.fuzz.kafka_responses`` starts the reference Apache Kafka (compat_tests.reference),
sends it every frame of ``corpus.json`` on a connection of its own, one after the other (so that the
topics and groups the first frames create are there for the later ones), and writes what Kafka answered
to ``kafka_responses.json``: the request's api key and version, and the response frame in hex without
its size prefix. A frame Kafka closes the connection on, or leaves unanswered for a few seconds, is
left out. ``wire/tests/test_golden_frames.py`` decodes every response and encodes it back.

``--from-frame N`` keeps the committed responses as they are and adds the answers to frames N and later
of the corpus (the frames ``capture.py --merge`` appended): every frame is still sent, in order, so that
the later ones meet the topics and groups the earlier ones create.
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import tempfile
from pathlib import Path

from compat_tests.fuzz.corpus import load_corpus
from compat_tests.reference import KafkaBroker

RESPONSES_PATH = Path(__file__).with_name("kafka_responses.json")
ANSWER_TIMEOUT = 5.0


def _exchange(address: tuple[str, int], frame: bytes) -> bytes | None:
    try:
        with socket.create_connection(address, timeout=ANSWER_TIMEOUT) as sock:
            sock.sendall(struct.pack(">i", len(frame)) + frame)
            size = struct.unpack(">i", _read(sock, 4))[0]
            return _read(sock, size)
    except (OSError, ConnectionError):
        return None


def _read(sock: socket.socket, count: int) -> bytes:
    data = bytearray()
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return bytes(data)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from-frame", type=int, metavar="N",
                        help="keep the committed responses and add the answers to frames N and later")
    args = parser.parse_args(argv)
    committed = []
    if args.from_frame is not None:
        committed = json.loads(RESPONSES_PATH.read_text())["responses"]
    with tempfile.TemporaryDirectory(prefix="kafka-responses-") as temp:
        kafka = KafkaBroker(Path(temp) / "data", overrides={"auto.create.topics.enable": "true"})
        kafka.start()
        try:
            recorded = list(committed)
            for index, golden in enumerate(load_corpus()):
                answer = _exchange((kafka.host, kafka.port), golden.frame)
                if answer is not None and index >= (args.from_frame or 0):
                    recorded.append({"client": golden.client, "api_key": golden.api_key,
                                     "api_version": golden.api_version, "response": answer.hex()})
        finally:
            kafka.stop()
    document = {"about": "Apache Kafka 4.4's answers to the frames of corpus.json (hex, without the size "
                         "prefix). Regenerate with: python -m compat_tests.fuzz.kafka_responses",
                "responses": recorded}
    RESPONSES_PATH.write_text(json.dumps(document, indent=1) + "\n")
    print(f"recorded {len(recorded) - len(committed)} responses in {RESPONSES_PATH}"
          + (f" after the {len(committed)} committed" if args.from_frame is not None else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
