"""Seeded mutations of golden frames: the same (seed, index) always gives the same bytes.

``mutant(corpus, seed, index)`` picks a golden frame and applies one to three mutations, each chosen
from:

- ``bit_flips``: flip a few bits anywhere in the frame;
- ``int32``, ``int16``: overwrite a 4- or 2-byte field with an edge value (0, -1, the maximum, the
  minimum, a large power of two), preferring positions where the golden frame holds a small positive
  number: those are array counts and string or bytes lengths;
- ``varint``: overwrite a byte that looks like a compact length or count with a long varint (a huge
  value, an unterminated run of continuation bytes);
- ``truncate``: cut the frame short;
- ``api_key``: put another served api key in the header, at a version that API serves, so that one
  API's body is decoded as another's;
- ``api_version``: put another version in the header (served or not), so that the body is decoded
  with another version's layout (flexible against classic encodings);
- ``random_tail``: overwrite the end of the frame with random bytes, or append some;
- ``splice``: overwrite a stretch with bytes from another golden frame;
- ``size_prefix``: a 4-byte frame size that does not match the frame (shorter, longer, negative,
  enormous, just over the maximum).

Golden frames are drawn API by API, so that every API is fuzzed as often as any other. The result is the
bytes to send, size prefix included. Each mutant's random generator is seeded from
(seed, index) alone, so one mutant can be reproduced without generating those before it.
"""

from __future__ import annotations

import functools
import random
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from compat_tests.fuzz.corpus import GoldenFrame

MAX_FRAME_SIZE = 104857600  # the broker's default socket.request.max.bytes


@functools.lru_cache(maxsize=1)
def served_versions() -> dict[int, tuple[int, int]]:
    """The api keys trafka serves and their version ranges, from the handler registry."""
    from trafka.broker.handlers import REGISTRY

    return dict(sorted(REGISTRY.served_versions().items()))


_INT32_EDGES = (0, -1, 1, -2, 0x7FFFFFFF, -0x80000000, 0x7FFFFFFE, 0x10000, 0x1000000, 0x40000000, 255, 256)
_INT16_EDGES = (0, -1, 1, -2, 0x7FFF, -0x8000, 0x7FFE, 0x100, 0xFF)
_VARINTS = (
    b"\xff\xff\xff\xff\x0f",  # 2**32 - 1
    b"\xff\xff\xff\xff\x07",  # 2**31 - 1
    b"\x80\x80\x80\x80\x08",  # 2**31
    b"\xff\xff\xff\xff\xff\x01",  # more than five bytes
    b"\x80\x80\x80\x80\x80\x80\x80\x80\x80",  # never terminates
    b"\x80\x80\x80\x01",  # 2**21
    b"\xff\x7f",
    b"\x00",  # null
    b"\x01",  # empty
)

MUTATIONS = ("bit_flips", "int32", "int16", "varint", "truncate", "api_key", "api_version", "random_tail",
             "splice", "size_prefix")
_WEIGHTS = (14, 14, 10, 10, 8, 8, 8, 8, 6, 6)


@dataclass(frozen=True)
class Mutant:
    """One mutated frame: what to send, and how it was made (for failure messages and replays).

    A SASL mutant (`sasl_mutant`) may follow a `prelude`: golden frames sent as they are before it on the
    same connection (a SaslHandshake, a whole login), each of which the broker answers."""

    seed: int
    index: int
    golden: GoldenFrame
    golden_index: int
    mutations: tuple[str, ...]
    data: bytes  # size prefix included
    prelude: bytes = b""  # size prefixes included
    prelude_names: tuple[str, ...] = ()
    scenario: str = ""

    @property
    def answers(self) -> int:
        """How many answers the broker may give: one per prelude frame, and one to the mutant."""
        return len(self.prelude_names) + 1

    def describe(self) -> str:
        head = self.data[:48].hex()
        what = "its token as a bare frame" if self.scenario == "bare_tokens" else "it"
        after = (f"after {' then '.join(self.prelude_names)} (sent as they are; SASL scenario {self.scenario}), "
                 if self.prelude_names else ("first on a SASL connection, " if self.scenario else ""))
        return (f"seed {self.seed} frame {self.index}: {after}corpus[{self.golden_index}] ({self.golden.name}), "
                f"{what} mutated by {', '.join(self.mutations)}; {len(self.data)} bytes, first 48: {head}")


def mutant(corpus: Sequence[GoldenFrame], seed: int, index: int) -> Mutant:
    """The `index`-th mutant of the campaign with `seed`."""
    rng = random.Random(seed * 0x9E3779B1 + index)
    # Every API equally often, whatever its share of the corpus.
    by_api = _by_api(tuple(corpus))
    golden_index = rng.choice(by_api[rng.randrange(len(by_api))])
    golden = corpus[golden_index]
    applied, data = _mutated(rng, golden.frame, corpus)
    return Mutant(seed, index, golden, golden_index, applied, data)


def _mutated(rng: random.Random, original: bytes, corpus: Sequence[GoldenFrame]) -> tuple[tuple[str, ...], bytes]:
    """One to three mutations of `original`: their names, and the bytes to send (size prefix included)."""
    frame = bytearray(original)
    applied: list[str] = []
    size: int | None = None
    for _ in range(rng.choice((1, 1, 1, 2, 2, 3))):
        kind = rng.choices(MUTATIONS, _WEIGHTS)[0]
        if kind == "size_prefix":
            size = _bogus_size(rng, len(frame))
        else:
            _APPLY[kind](rng, frame, original, corpus)
        applied.append(kind)
    if size is None:
        size = len(frame)
    return tuple(applied), struct.pack(">i", size) + bytes(frame)


# --------------------------------------------------------------------------------------- SASL listeners

#: How a SASL mutant meets a SASL_PLAINTEXT listener (`sasl_mutant`):
#: - ``first``: first on its connection, before any handshake (only ApiVersions and the SASL APIs may come
#:   then; anything else closes the connection);
#: - ``handshake``: after a golden SaslHandshake v1 (and, for SCRAM, now and then bob's golden first
#:   message), as the exchange's next SaslAuthenticate, or as another request out of turn;
#: - ``bare_tokens``: after a golden SaslHandshake v0, a golden SaslAuthenticate's token, mutated, as the
#:   bare frame such a client sends;
#: - ``authenticated``: after a whole golden PLAIN login, any request (a SaslHandshake then starts a
#:   re-authentication).
SASL_SCENARIOS = ("first", "handshake", "bare_tokens", "authenticated")
_SASL_WEIGHTS = (25, 35, 15, 25)


@dataclass(frozen=True)
class _SaslFrames:
    """Corpus indices of the golden SASL frames, by what they are."""

    handshakes: dict[tuple[int, str], list[int]]  # (version, mechanism) -> SaslHandshake frames
    tokens: dict[str, list[int]]  # mechanism -> SaslAuthenticate frames whose token belongs to it
    sasl: list[int]  # every SaslHandshake and SaslAuthenticate frame
    logins: list[int]  # PLAIN tokens of users the fuzzed broker knows (sasl.PLAIN_USERS)
    scram_firsts: list[int]  # SCRAM first messages of bob (sasl.SCRAM_USERS)
    scram_finals: dict[str, list[int]]  # mechanism -> SCRAM final messages


@functools.lru_cache(maxsize=4)
def _sasl_frames(corpus: tuple[GoldenFrame, ...]) -> _SaslFrames:
    from compat_tests.fuzz import sasl

    frames = _SaslFrames({}, {}, [], [], [], {})
    for position, frame in enumerate(corpus):
        request = sasl.sasl_request(frame)
        if request is None:
            continue
        frames.sasl.append(position)
        if frame.api_key == 17:
            frames.handshakes.setdefault((frame.api_version, str(request.mechanism)), []).append(position)
            continue
        token = bytes(request.auth_bytes)
        kind = sasl.token_kind(token)
        for mechanism in sasl.TOKEN_MECHANISMS[kind]:
            frames.tokens.setdefault(mechanism, []).append(position)
            if kind.startswith("scram-final"):
                frames.scram_finals.setdefault(mechanism, []).append(position)
        _, user, password = (token.split(b"\0") + [b"", b""])[:3]
        if kind == "plain" and sasl.PLAIN_USERS.get(user.decode(errors="replace")) == password.decode(errors="replace"):
            frames.logins.append(position)
        if kind == "scram-first" and any(f"n={u},".encode() in token for u in sasl.SCRAM_USERS):
            frames.scram_firsts.append(position)
    return frames


def sasl_frames_complete(corpus: Sequence[GoldenFrame]) -> list[str]:
    """What `sasl_mutant` needs and the corpus lacks (empty when nothing)."""
    frames = _sasl_frames(tuple(corpus))
    lacking = [f"a SaslHandshake v1 for {m}" for m in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
               if (1, m) not in frames.handshakes]
    lacking += [f"a SaslHandshake v0 for {m}" for m in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
                if (0, m) not in frames.handshakes]
    lacking += [f"a SaslAuthenticate token for {m}" for m in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
                if m not in frames.tokens]
    lacking += [what for what, present in (("a PLAIN login of a user the broker knows", frames.logins),
                                           ("a SCRAM first message of bob", frames.scram_firsts)) if not present]
    return lacking


def sasl_mutant(corpus: Sequence[GoldenFrame], seed: int, index: int) -> Mutant:
    """The `index`-th mutant of the campaign with `seed` against a SASL_PLAINTEXT listener: a mutated frame
    in one of the SASL_SCENARIOS, after its prelude of golden frames. The corpus must hold the frames
    `sasl_frames_complete` asks for."""
    rng = random.Random(seed * 0x9E3779B1 + index + 0x5A5150)
    frames = _sasl_frames(tuple(corpus))
    by_api = _by_api(tuple(corpus))

    def any_api() -> int:
        return rng.choice(by_api[rng.randrange(len(by_api))])

    scenario = rng.choices(SASL_SCENARIOS, _SASL_WEIGHTS)[0]
    prelude: list[int] = []
    bare = False
    if scenario == "first":
        golden_index = rng.choice(frames.sasl) if rng.random() < 0.5 else any_api()
    elif scenario == "handshake":
        version_mechanisms = sorted(key for key in frames.handshakes if key[0] == 1)
        _, mechanism = rng.choice(version_mechanisms)
        prelude.append(rng.choice(frames.handshakes[(1, mechanism)]))
        candidates = frames.tokens.get(mechanism, frames.sasl)
        if mechanism.startswith("SCRAM") and frames.scram_firsts and rng.random() < 0.5:
            prelude.append(rng.choice(frames.scram_firsts))  # the server's first message comes back
            candidates = frames.scram_finals.get(mechanism, candidates)
        golden_index = rng.choice(candidates) if rng.random() < 0.75 else any_api()
    elif scenario == "bare_tokens":
        version_mechanisms = sorted(key for key in frames.handshakes if key[0] == 0)
        _, mechanism = rng.choice(version_mechanisms)
        prelude.append(rng.choice(frames.handshakes[(0, mechanism)]))
        golden_index = rng.choice(frames.tokens.get(mechanism, frames.sasl))
        bare = True
    else:  # authenticated
        prelude.append(rng.choice(frames.handshakes[(1, "PLAIN")]))
        prelude.append(rng.choice(frames.logins))
        golden_index = rng.choice(frames.sasl) if rng.random() < 0.4 else any_api()
    golden = corpus[golden_index]
    original = golden.frame
    if bare:
        from compat_tests.fuzz import sasl

        request = sasl.sasl_request(golden)
        original = bytes(request.auth_bytes) if request is not None and golden.api_key == 36 else golden.frame
    applied, data = _mutated(rng, original, corpus)
    return Mutant(seed, index, golden, golden_index, applied, data,
                  prelude=b"".join(struct.pack(">i", len(corpus[i].frame)) + corpus[i].frame for i in prelude),
                  prelude_names=tuple(f"corpus[{i}] ({corpus[i].name})" for i in prelude), scenario=scenario)


@functools.lru_cache(maxsize=4)
def _by_api(corpus: tuple[GoldenFrame, ...]) -> list[list[int]]:
    """Corpus indices grouped by api key."""
    groups: dict[int, list[int]] = {}
    for position, frame in enumerate(corpus):
        groups.setdefault(frame.api_key, []).append(position)
    return [groups[key] for key in sorted(groups)]


# --------------------------------------------------------------------------------------- mutations

def _bit_flips(rng: random.Random, frame: bytearray, golden: bytes, corpus: Sequence[GoldenFrame]) -> None:
    if not frame:
        return
    for _ in range(rng.choice((1, 1, 2, 3, 8))):
        position = rng.randrange(len(frame))
        frame[position] ^= 1 << rng.randrange(8)


@functools.lru_cache(maxsize=4096)
def _count_positions(golden: bytes, width: int, limit: int) -> tuple[int, ...]:
    """Where a golden frame holds a big-endian number of `width` bytes in 1..limit: likely counts and
    lengths (computed once per golden frame; mutations keep most positions in place)."""
    fmt = ">i" if width == 4 else ">h"
    return tuple(p for p in range(0, len(golden) - width + 1) if 0 < struct.unpack_from(fmt, golden, p)[0] <= limit)


def _overwrite(rng: random.Random, frame: bytearray, width: int, edges: tuple[int, ...], limit: int,
               golden: bytes) -> None:
    if len(frame) < width:
        return
    candidates = [p for p in _count_positions(golden, width, limit) if p <= len(frame) - width]
    if candidates and rng.random() < 0.8:
        position = rng.choice(candidates)
    else:
        position = rng.randrange(len(frame) - width + 1)
    if rng.random() < 0.75:
        value = rng.choice(edges)
    else:
        value = rng.randrange(-(1 << (8 * width - 1)), 1 << (8 * width - 1))
    struct.pack_into(">i" if width == 4 else ">h", frame, position, value)


def _int32(rng: random.Random, frame: bytearray, golden: bytes, corpus: Sequence[GoldenFrame]) -> None:
    _overwrite(rng, frame, 4, _INT32_EDGES + (len(frame), len(frame) - 4), 100_000, golden)


def _int16(rng: random.Random, frame: bytearray, golden: bytes, corpus: Sequence[GoldenFrame]) -> None:
    _overwrite(rng, frame, 2, _INT16_EDGES + (len(frame),), 1_000, golden)


def _varint(rng: random.Random, frame: bytearray, golden: bytes, corpus: Sequence[GoldenFrame]) -> None:
    if not frame:
        return
    # Compact lengths and counts are single bytes in 1..127 in small frames.
    candidates = [p for p in _small_bytes(golden) if p < len(frame)]
    position = rng.choice(candidates) if candidates and rng.random() < 0.8 else rng.randrange(len(frame))
    value = rng.choice(_VARINTS)
    if rng.random() < 0.5:
        frame[position : position + 1] = value  # inserted in place of the byte
    else:
        frame[position : position + len(value)] = value  # overwriting what follows


@functools.lru_cache(maxsize=4096)
def _small_bytes(golden: bytes) -> tuple[int, ...]:
    """Where a golden frame's body holds a byte in 1..127: compact lengths and counts among them."""
    return tuple(p for p in range(10, len(golden)) if 0 < golden[p] < 0x80)


def _truncate(rng: random.Random, frame: bytearray, golden: bytes, corpus: Sequence[GoldenFrame]) -> None:
    if frame:
        del frame[rng.randrange(len(frame)) :]


def _api_key(rng: random.Random, frame: bytearray, golden: bytes, corpus: Sequence[GoldenFrame]) -> None:
    if len(frame) < 4:
        return
    if rng.random() < 0.9:
        served = served_versions()
        api_key = rng.choice(list(served))
        low, high = served[api_key]
        version = rng.randint(low, high)
    else:
        api_key, version = rng.randrange(-0x8000, 0x8000), rng.randrange(0, 20)
    struct.pack_into(">hh", frame, 0, api_key, version)


def _api_version(rng: random.Random, frame: bytearray, golden: bytes, corpus: Sequence[GoldenFrame]) -> None:
    if len(frame) < 4:
        return
    (api_key,) = struct.unpack_from(">h", frame)
    low, high = served_versions().get(api_key, (0, 20))
    version = rng.randint(low, high) if rng.random() < 0.85 else rng.choice((-1, high + 1, 0x7FFF, -0x8000))
    struct.pack_into(">h", frame, 2, version)


def _random_tail(rng: random.Random, frame: bytearray, golden: bytes, corpus: Sequence[GoldenFrame]) -> None:
    tail = rng.randbytes(rng.choice((1, 4, 16, 64, 256)))
    if frame and rng.random() < 0.5:
        start = rng.randrange(len(frame))
        frame[start:] = tail
    else:
        frame += tail


def _splice(rng: random.Random, frame: bytearray, golden: bytes, corpus: Sequence[GoldenFrame]) -> None:
    donor = rng.choice(corpus).frame
    if not frame or not donor:
        return
    start = rng.randrange(len(donor))
    piece = donor[start : start + rng.randint(1, 64)]
    position = rng.randrange(len(frame))
    frame[position : position + len(piece)] = piece


def _bogus_size(rng: random.Random, length: int) -> int:
    return rng.choice((
        length - 1,
        length + 1,
        max(0, length - rng.randint(1, 16)),
        length + rng.randint(2, 100_000),
        0,
        -1,
        9,
        -0x80000000,
        0x7FFFFFFF,
        MAX_FRAME_SIZE,
        MAX_FRAME_SIZE + 1,
        rng.randrange(65536, MAX_FRAME_SIZE),
    ))


_APPLY = {
    "bit_flips": _bit_flips,
    "int32": _int32,
    "int16": _int16,
    "varint": _varint,
    "truncate": _truncate,
    "api_key": _api_key,
    "api_version": _api_version,
    "random_tail": _random_tail,
    "splice": _splice,
}
