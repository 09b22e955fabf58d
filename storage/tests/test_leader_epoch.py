"""LeaderEpochCache: assignment, OffsetForLeaderEpoch answers, truncation and the checkpoint file."""
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trafka.storage.leader_epoch import (
    LEADER_EPOCH_CHECKPOINT,
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEntry,
    LeaderEpochCache,
)

UNDEFINED = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / LEADER_EPOCH_CHECKPOINT


def cache_with(path: Path, *entries: tuple[int, int]) -> LeaderEpochCache:
    cache = LeaderEpochCache(path)
    for epoch, start_offset in entries:
        cache.assign(epoch, start_offset)
    return cache


def test_empty_cache_has_no_file_and_no_epoch(path: Path) -> None:
    cache = LeaderEpochCache(path)
    assert cache.latest_epoch() is None
    assert cache.entries == []
    assert cache.end_offset_for(0, 10) == UNDEFINED
    assert not path.exists()


def test_checkpoint_file_is_kafka_text_format(path: Path) -> None:
    cache_with(path, (0, 0), (3, 1200))
    assert path.read_text() == "0\n2\n0 0\n3 1200\n"


def test_reassigning_the_latest_epoch_later_changes_nothing(path: Path) -> None:
    cache = cache_with(path, (2, 10))
    path.unlink()  # a rewrite would bring it back
    cache.assign(2, 11)
    cache.assign(2, 10)
    assert cache.entries == [EpochEntry(2, 10)]
    assert not path.exists()


def test_latest_epoch_at_an_earlier_offset_replaces_it(path: Path) -> None:
    cache = cache_with(path, (1, 0), (2, 10))
    cache.assign(2, 5)
    assert cache.entries == [EpochEntry(1, 0), EpochEntry(2, 5)]


def test_new_entry_removes_entries_it_would_make_non_monotonic(path: Path) -> None:
    cache = cache_with(path, (1, 0), (2, 10), (4, 20))
    cache.assign(3, 15)  # epoch 4 is newer than 3: gone
    assert cache.entries == [EpochEntry(1, 0), EpochEntry(2, 10), EpochEntry(3, 15)]
    cache.assign(5, 12)  # epoch 3 starts after 12: gone
    assert cache.entries == [EpochEntry(1, 0), EpochEntry(2, 10), EpochEntry(5, 12)]


def test_invalid_entries_are_rejected(path: Path) -> None:
    cache = LeaderEpochCache(path)
    with pytest.raises(ValueError):
        cache.assign(-1, 0)
    with pytest.raises(ValueError):
        cache.assign(0, -1)


@pytest.mark.parametrize(
    ("requested", "expected"),
    [
        (UNDEFINED_EPOCH, UNDEFINED),
        (0, (0, 10)),  # older than every known epoch: itself, ending where the earliest starts
        (1, (1, 20)),
        (2, (1, 20)),  # unknown epoch in a gap: the largest known below it
        (3, (3, 35)),
        (4, (3, 35)),
        (5, (5, 100)),  # latest epoch ends at the log end offset
        (6, UNDEFINED),  # above every known epoch
    ],
)
def test_end_offset_for(path: Path, requested: int, expected: tuple[int, int]) -> None:
    cache = cache_with(path, (1, 10), (3, 20), (5, 35))
    assert cache.end_offset_for(requested, log_end_offset=100) == expected


@pytest.mark.parametrize(
    ("end_offset", "expected"),
    [
        (40, [(1, 10), (3, 20), (5, 35)]),
        (36, [(1, 10), (3, 20), (5, 35)]),
        (35, [(1, 10), (3, 20)]),
        (21, [(1, 10), (3, 20)]),
        (20, [(1, 10)]),
        (10, []),
        (0, []),
    ],
)
def test_truncate_from_end(path: Path, end_offset: int, expected: list[tuple[int, int]]) -> None:
    cache = cache_with(path, (1, 10), (3, 20), (5, 35))
    cache.truncate_from_end(end_offset)
    assert cache.entries == expected
    assert LeaderEpochCache(path).entries == expected


@pytest.mark.parametrize(
    ("start_offset", "expected"),
    [
        (5, [(1, 10), (3, 20), (5, 35)]),
        (10, [(1, 10), (3, 20), (5, 35)]),
        (15, [(1, 15), (3, 20), (5, 35)]),
        (20, [(3, 20), (5, 35)]),
        (34, [(3, 34), (5, 35)]),
        (99, [(5, 99)]),
    ],
)
def test_truncate_from_start(path: Path, start_offset: int, expected: list[tuple[int, int]]) -> None:
    cache = cache_with(path, (1, 10), (3, 20), (5, 35))
    cache.truncate_from_start(start_offset)
    assert cache.entries == expected
    assert LeaderEpochCache(path).entries == expected


def test_reopening_reads_the_checkpoint(path: Path) -> None:
    cache_with(path, (0, 0), (2, 7), (9, 100))
    reopened = LeaderEpochCache(path)
    assert reopened.entries == [(0, 0), (2, 7), (9, 100)]
    assert reopened.latest_epoch() == 9
    assert reopened.earliest_entry() == EpochEntry(0, 0)


@pytest.mark.parametrize(
    "text",
    ["", "0\n", "1\n0\n", "0\n2\n0 0\n", "0\n1\n0\n", "0\n1\nx 0\n"],
)
def test_malformed_checkpoint_raises(path: Path, text: str) -> None:
    path.write_text(text)
    with pytest.raises(ValueError):
        LeaderEpochCache(path)


def reference_end_offset_for(entries: list[EpochEntry], requested: int, leo: int) -> tuple[int, int]:
    """OffsetForLeaderEpoch spelled out over a plain list."""
    if requested == UNDEFINED_EPOCH or not entries:
        return UNDEFINED
    if requested == entries[-1].epoch:
        return requested, leo
    later = [e for e in entries if e.epoch > requested]
    if not later:
        return UNDEFINED
    earlier = [e for e in entries if e.epoch <= requested]
    return (earlier[-1].epoch if earlier else requested), later[0].start_offset


@settings(max_examples=200, deadline=None)
@given(
    assignments=st.lists(st.tuples(st.integers(0, 20), st.integers(0, 200)), max_size=30),
    requested=st.integers(-1, 22),
)
def test_entries_stay_monotonic_and_answers_match_reference(
    tmp_path_factory: pytest.TempPathFactory,
    assignments: list[tuple[int, int]],
    requested: int,
) -> None:
    path = tmp_path_factory.mktemp("epochs") / LEADER_EPOCH_CHECKPOINT
    cache = cache_with(path, *assignments)
    entries = cache.entries
    assert all(a.epoch < b.epoch and a.start_offset < b.start_offset for a, b in zip(entries, entries[1:]))
    if assignments:
        assert entries[-1] == assignments[-1] or entries[-1].epoch == assignments[-1][0]
    leo = 1000
    assert cache.end_offset_for(requested, leo) == reference_end_offset_for(entries, requested, leo)
    assert LeaderEpochCache(path).entries == entries
