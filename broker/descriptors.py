"""File descriptors: the process's limit, and whether new partitions fit in it.

A partition holds one descriptor, its active segment's ``.log`` file: index files are mapped with
no descriptor kept, and segments no longer written to are opened for reads on demand through a
bounded cache (``trafka.storage.open_files``). Besides its partitions the broker needs descriptors for
client connections, that cache of readers, and the files flushes and checkpoints open for a
moment; ``RESERVE`` keeps room for them. Until ``__consumer_offsets`` exists, room for its
partitions is kept too, so that consumer groups work on a broker whose other topics took the rest.

At start-up the soft limit is raised to the hard limit, as the JVM does for Kafka, and the broker
logs the limit and about how many partitions it allows (and warns when ``vm.max_map_count``, the
limit on memory maps that mapped index files count against, is too low for that many). Topic
creation and partition growth check that the new partitions fit before creating anything, and
refuse the whole request otherwise with POLICY_VIOLATION (as Kafka refuses a CreateTopics over its
partition limits), naming the limit.
"""
from __future__ import annotations

import os
import resource
from dataclasses import dataclass

from trafka.storage.open_files import READER_CACHE_SIZE
from trafka.wire.errors import ErrorCode, KafkaError

#: Descriptors each partition holds.
DESCRIPTORS_PER_PARTITION = 1
#: Room kept for client connections and the files opened for a moment (flushes, checkpoints).
CONNECTION_RESERVE = 256
#: Descriptors never given to partitions.
RESERVE = READER_CACHE_SIZE + CONNECTION_RESERVE
#: Descriptors the broker holds besides its partitions' (standard streams, the data directory's
#: lock, listeners, the event loop's own).
BROKER_DESCRIPTORS = 32
#: Descriptors kept free whatever the process holds: files opened for a moment (flushes, checkpoints).
MARGIN = 64
#: The hard limit set where the kernel reports none (Linux's default fs.nr_open).
_NR_OPEN_DEFAULT = 1_048_576
#: What Kafka's documentation advises as a starting point for a broker.
ADVISED_LIMIT = 100_000
#: Memory maps the interpreter and its libraries take, besides index files.
_MAPS_KEPT_FOR_THE_PROCESS = 1_000


def raise_limit() -> tuple[int, int]:
    """Raise the soft RLIMIT_NOFILE to the hard limit; returns the soft limit before and after
    (unchanged when it cannot be raised)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = _nr_open() if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            return soft, soft
        return soft, target
    return soft, soft


def _nr_open() -> int:
    try:
        with open("/proc/sys/fs/nr_open") as file:
            return int(file.read())
    except (OSError, ValueError):
        return _NR_OPEN_DEFAULT


def descriptor_limit() -> int:
    """The soft RLIMIT_NOFILE: the most descriptors this process may hold."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return _nr_open() if soft == resource.RLIM_INFINITY else soft


def descriptors_in_use() -> int:
    """How many descriptors the process holds now (0 where the system does not tell)."""
    for directory in ("/proc/self/fd", "/dev/fd"):
        try:
            return max(len(os.listdir(directory)) - 1, 0)  # less the one listing the directory
        except OSError:
            continue
    return 0


@dataclass(frozen=True)
class DescriptorBudget:
    """What new partitions may still take of the descriptor limit.

    Partitions get what the limit leaves after the broker's own descriptors, those of its
    partitions, and ``reserve`` (connections, readers of older segments); should the process hold
    more than that accounts for (many connections at once), what it holds counts instead.
    """

    limit: int
    in_use: int
    partitions: int
    reserve: int = RESERVE

    @property
    def left(self) -> int:
        """Descriptors new partitions may take."""
        held = BROKER_DESCRIPTORS + self.partitions * DESCRIPTORS_PER_PARTITION
        return max(min(self.limit - self.reserve - held, self.limit - self.in_use - MARGIN), 0)

    @property
    def partitions_left(self) -> int:
        return self.left // DESCRIPTORS_PER_PARTITION

    def describe(self) -> str:
        """One line for the start-up log."""
        return (
            f"file descriptors: limit {self.limit} (ulimit -n), {self.in_use} in use, {self.partitions} partitions: "
            f"room for about {self.partitions_left} more partitions ({DESCRIPTORS_PER_PARTITION} descriptor each; "
            f"{self.reserve} kept for connections and reads)"
        )

    def check(self, new_partitions: int, *, kept_for_offsets: int = 0) -> None:
        """Raise KafkaError(POLICY_VIOLATION) unless ``new_partitions`` more partitions fit, with
        room left for ``kept_for_offsets`` partitions of the group coordinator's topic to come."""
        needed = new_partitions * DESCRIPTORS_PER_PARTITION
        kept = kept_for_offsets * DESCRIPTORS_PER_PARTITION
        if needed + kept <= self.left:
            return
        offsets = f", and {kept} for the consumer offsets topic to come" if kept else ""
        advice = f"; Kafka's documentation advises at least {ADVISED_LIMIT}" if self.limit < ADVISED_LIMIT else ""
        raise KafkaError(
            ErrorCode.POLICY_VIOLATION,
            f"Creating {new_partitions} partitions needs about {needed} more file descriptors; this broker has "
            f"{max(self.left - kept, 0)} left of its limit of {self.limit} (ulimit -n): its {self.partitions} "
            f"partitions hold {DESCRIPTORS_PER_PARTITION} each, {self.reserve} are kept for connections and "
            f"reads{offsets}. Raise the limit (ulimit -n, or LimitNOFILE in a systemd unit{advice}) and restart "
            f"the broker, or create fewer partitions.",
        )


def max_map_count() -> int | None:
    """The kernel's limit on memory maps per process (None where it does not tell)."""
    try:
        with open("/proc/sys/vm/max_map_count") as file:
            return int(file.read())
    except (OSError, ValueError):
        return None


def map_count_warning(partitions: int) -> str | None:
    """A warning when ``vm.max_map_count`` is too low for ``partitions`` partitions to take data:
    the active segment of a partition with data maps its two index files (each map is one of
    the process's memory maps, whatever its size), so appends fail past about half the limit."""
    limit = max_map_count()
    if limit is None or 2 * partitions + _MAPS_KEPT_FOR_THE_PROCESS <= limit:
        return None
    return (
        f"vm.max_map_count is {limit}: partitions with data map two index files each, so only about "
        f"{(limit - _MAPS_KEPT_FOR_THE_PROCESS) // 2} of the {partitions} partitions this descriptor limit "
        f"allows can take appends; raise it as Kafka's documentation advises (sysctl vm.max_map_count=262144)"
    )


def current_budget(partitions: int) -> DescriptorBudget:
    """The budget of a broker holding ``partitions`` partitions, as the process stands now."""
    return DescriptorBudget(descriptor_limit(), descriptors_in_use(), partitions)


def check_new_partitions(count: int, *, partitions: int, kept_for_offsets: int = 0, in_use: int | None = None) -> None:
    """Refuse (POLICY_VIOLATION) ``count`` new partitions, next to the ``partitions`` there are, that
    would not fit in the descriptor limit, keeping room for ``kept_for_offsets`` partitions of
    ``__consumer_offsets`` when it is still to come. ``in_use``: the descriptors held, when the caller
    knows (otherwise they are counted)."""
    budget = current_budget(partitions) if in_use is None else DescriptorBudget(descriptor_limit(), in_use, partitions)
    budget.check(count, kept_for_offsets=kept_for_offsets)
