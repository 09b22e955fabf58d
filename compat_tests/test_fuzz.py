"""Fuzzing: mutated golden frames from real clients against a real broker process.

A short campaign (``compat_tests/fuzz/``): frames that real clients sent for every API trafka serves (for the
share state APIs, which only brokers send, frames trafka brokers sent each other),
mutated with a fixed seed (bit flips, overwritten counts and lengths, truncation, api key and version
swaps, random tails, wrong size prefixes), each sent on its own connection while a confluent-kafka
client keeps producing and consuming. The broker must stay up, its RSS must grow by less than 64 MB,
its log must hold no traceback, and the served client must get every record, never waiting more than
a few seconds for the broker. A failure names the seed and the frames behind it;
``python -m bench.fuzz --seed S --replay N`` sends frame N again.

A second, shorter campaign fuzzes a SASL_PLAINTEXT listener of a broker (``mutate.sasl_mutant``): mutated
SaslHandshake and SaslAuthenticate frames and bare SASL tokens, and frames of other APIs, first on their
connection, during an exchange a golden SaslHandshake started, or after a whole golden login, while a
confluent-kafka client logged in with SCRAM-SHA-512 keeps producing and consuming on that listener; the
same checks hold. ``python -m bench.fuzz --sasl`` runs it long.

``TRAFKA_FUZZ_SEED``, ``TRAFKA_FUZZ_FRAMES`` and ``TRAFKA_FUZZ_SASL_FRAMES`` change the seed and the length of
the runs; the long run is ``python -m bench.fuzz`` (``make fuzz``).
"""

from __future__ import annotations

import os
import socket
import struct
from collections import Counter

import pytest

from compat_tests.fuzz.campaign import (
    BROKER_OVERRIDES,
    LogWatcher,
    metadata_request,
    run_campaign,
    sasl_served_settings,
    start_sasl_broker,
)
from compat_tests.fuzz.corpus import BROKER_CLIENT, load_corpus
from compat_tests.fuzz.mutate import (
    MUTATIONS,
    SASL_SCENARIOS,
    mutant,
    sasl_frames_complete,
    sasl_mutant,
    served_versions,
)

SEED = int(os.environ.get("TRAFKA_FUZZ_SEED", "20261125"))
FRAMES = int(os.environ.get("TRAFKA_FUZZ_FRAMES", "12000"))
SASL_FRAMES = int(os.environ.get("TRAFKA_FUZZ_SASL_FRAMES", "2000"))


@pytest.fixture(scope="module")
def corpus():
    return load_corpus()


#: The share state APIs, which only brokers send (a share partition's leader and a share group's coordinator, to
#: the share coordinator of a key): their golden frames are those trafka brokers sent each other, recorded between
#: two of them (``capture.share_state_between_brokers``).
BROKER_TO_BROKER_APIS = {83, 84, 85, 86, 87}


def test_the_corpus_holds_every_served_api_from_real_clients(corpus) -> None:
    """Every served API has golden frames from real clients; those only brokers send, from trafka brokers."""
    served = served_versions()
    sent = {frame.api_key for frame in corpus}
    missing = sorted(key for key in served if key not in sent)
    assert not missing, f"no golden frame for api keys {missing}: run python -m compat_tests.fuzz.capture"
    assert len({frame.client for frame in corpus}) >= 5
    assert {frame.client for frame in corpus if frame.api_key in BROKER_TO_BROKER_APIS} == {BROKER_CLIENT}
    for frame in corpus:
        low, high = served.get(frame.api_key, (0, -1))
        assert low <= frame.api_version <= high, f"{frame.name} is not a served version"


def test_mutants_are_deterministic_and_cover_every_mutation_and_api(corpus) -> None:
    first = [mutant(corpus, SEED, index) for index in range(2000)]
    assert [mutant(corpus, SEED, index) for index in (0, 7, 1999)] == [first[0], first[7], first[1999]]
    assert [m.data for m in first[:50]] != [mutant(corpus, SEED + 1, index).data for index in range(50)]
    kinds = Counter(kind for m in first for kind in m.mutations)
    assert set(kinds) == set(MUTATIONS)
    assert {m.golden.api_key for m in first} == set(served_versions())
    # Nearly every mutant differs from its golden frame as sent (size prefix included: a wrong size is a
    # mutation too).
    assert sum(m.data != len(m.golden.frame).to_bytes(4, "big") + m.golden.frame for m in first) > 1950


def test_the_broker_survives_mutated_frames_and_serves_a_client_throughout(broker_factory, corpus) -> None:
    broker = broker_factory(BROKER_OVERRIDES)
    result = run_campaign(broker, corpus, seed=SEED, frames=FRAMES, workers=16, reply_timeout=0.25)
    print(result.summary())
    assert result.frames == FRAMES, f"sent {result.frames} of {FRAMES} frames\n" + "\n\n".join(result.problems)
    assert not result.problems, (f"{len(result.problems)} problem(s) with seed {SEED} "
                                 f"(replay one frame with: python -m bench.fuzz --seed {SEED} --replay N)\n"
                                 + "\n\n".join(result.problems[:10]) + f"\n\n{result.summary()}")
    assert result.served.produced > 0 and result.served.consumed == result.served.produced
    assert result.probe_count > 0


def test_a_traceback_in_the_log_is_tied_to_the_frame_sent_on_its_connection(corpus) -> None:
    class Log:
        text = "2026-01-01 00:00:00,000 INFO broker: started\n"

        def log_text(self) -> str:
            return self.text

    log = Log()
    suspect = mutant(corpus, SEED, 3)
    watcher = LogWatcher(log, {40123: [suspect]})  # type: ignore[arg-type]
    log.text += ("2026-01-01 00:00:01,000 ERROR trafka.broker.connection: closing connection 9 from 127.0.0.1:40123: "
                 "METADATA v12 request (correlation id 5) failed\n"
                 "Traceback (most recent call last):\n"
                 '  File "broker/handlers/metadata.py", line 1, in handle\n'
                 "ValueError: boom\n"
                 "2026-01-01 00:00:02,000 WARNING trafka.broker.connection: closing connection 10 from "
                 "127.0.0.1:40124: unknown api key 99\n")
    watcher.poll()
    (problem,) = watcher.tracebacks
    assert f"seed {SEED} frame 3:" in problem and "ValueError: boom" in problem and "unknown api key" not in problem
    assert watcher.protocol_errors == 1


def test_sasl_mutants_are_deterministic_and_meet_the_listener_in_every_scenario(corpus) -> None:
    assert not sasl_frames_complete(corpus), "run python -m compat_tests.fuzz.capture --only sasl --merge"
    first = [sasl_mutant(corpus, SEED, index) for index in range(2000)]
    assert [sasl_mutant(corpus, SEED, index) for index in (0, 7, 1999)] == [first[0], first[7], first[1999]]
    assert [m.prelude + m.data for m in first[:50]] != [
        (m.prelude + m.data) for m in (sasl_mutant(corpus, SEED + 1, index) for index in range(50))]
    assert {m.scenario for m in first} == set(SASL_SCENARIOS)
    assert set(Counter(kind for m in first for kind in m.mutations)) == set(MUTATIONS)
    # Mostly SASL frames, and some of every other API out of turn.
    assert sum(m.golden.api_key in (17, 36) for m in first) > 1000
    assert {m.golden.api_key for m in first} == set(served_versions())
    # The prelude of an authenticated mutant is a golden SaslHandshake v1 and a whole golden PLAIN login.
    authenticated = next(m for m in first if m.scenario == "authenticated")
    handshake, login = authenticated.prelude_names
    assert "(SASL_HANDSHAKE v1 from " in handshake and "(SASL_AUTHENTICATE v" in login
    assert authenticated.answers == 3


def _answers(sock: socket.socket, count: int) -> list[bytes]:
    answers = []
    for _ in range(count):
        size = struct.unpack(">i", _read(sock, 4))[0]
        answers.append(_read(sock, size))
    return answers


def _read(sock: socket.socket, count: int) -> bytes:
    data = bytearray()
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError(f"closed after {len(data)} of {count} bytes")
        data += chunk
    return bytes(data)


def test_a_sasl_listener_survives_mutated_frames_and_serves_an_authenticated_client(tmp_path, corpus) -> None:
    broker, address = start_sasl_broker(tmp_path / "fuzz-sasl")
    try:
        # The golden logins the authenticated mutants follow log in here: a Metadata request is answered
        # after each, and closes the connection without one.
        mutants = (sasl_mutant(corpus, SEED, index) for index in range(400))
        logins = {m.prelude for m in mutants if m.scenario == "authenticated"}
        assert len(logins) > 1
        for login in sorted(logins):
            with socket.create_connection(address, timeout=10) as sock:
                sock.sendall(login + metadata_request(7))
                *_, metadata = _answers(sock, 3)
                assert struct.unpack_from(">i", metadata)[0] == 7
        with socket.create_connection(address, timeout=10) as sock:
            sock.sendall(metadata_request(7))
            assert sock.recv(100) == b""
        result = run_campaign(broker, corpus, seed=SEED, frames=SASL_FRAMES, workers=16, reply_timeout=0.25,
                              target=address, make_mutant=sasl_mutant, served_settings=sasl_served_settings(address),
                              settle=0.5)
    finally:
        broker.close()
    print(result.summary())
    assert result.frames == SASL_FRAMES, f"sent {result.frames} of {SASL_FRAMES} frames\n" + "\n\n".join(
        result.problems)
    assert not result.problems, (f"{len(result.problems)} problem(s) with seed {SEED} (replay one frame with: "
                                 f"python -m bench.fuzz --sasl --seed {SEED} --replay N)\n"
                                 + "\n\n".join(result.problems[:10]) + f"\n\n{result.summary()}")
    assert result.served.produced > 0 and result.served.consumed == result.served.produced
    assert result.answered > SASL_FRAMES // 2
