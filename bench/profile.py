"""Profile trafka under one workload with py-spy and print where its time goes.

    pip install py-spy
    python -m bench.profile produce           # 1,000,000 x 100 B, acks=1, 1 partition
    python -m bench.profile consume           # the same back
    python -m bench.profile produce --size 1024 --count 200000 --partitions 16 --acks all

py-spy samples the broker process (idle time left out) while the workload runs and writes the collapsed
stacks to ``bench/results/profile-<workload>.txt`` (load them into speedscope or flamegraph.pl); the
summary lists the functions with the largest share of samples, by self time and including callees,
with file:line.
"""
from __future__ import annotations

import argparse
import collections
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from bench import brokers
from bench.run import RESULTS_DIR, WORKLOAD_TIMEOUT_S
from bench.workloads import run_workload


def summarize(collapsed: Path, top: int) -> str:
    """Top functions by self and inclusive share of samples from py-spy's raw (collapsed) output."""
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in collapsed.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_text)
        frames = [_frame_name(frame) for frame in stack.split(";")]
        total += count
        own[frames[-1]] += count
        for frame in set(frames):
            inclusive[frame] += count
    if not total:
        return "no samples"
    out = [f"{total} samples (broker busy)", "", "self time:"]
    out += [f"  {100 * n / total:5.1f}%  {frame}" for frame, n in own.most_common(top)]
    out += ["", "including callees:"]
    out += [f"  {100 * n / total:5.1f}%  {frame}" for frame, n in inclusive.most_common(top)]
    return "\n".join(out)


def _frame_name(frame: str) -> str:
    # py-spy frames read "function (path/to/file.py:line)"; keep paths relative to the repository.
    return frame.replace(str(brokers.REPO_ROOT) + "/", "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__.split("\n\n")[0])
    parser.add_argument("workload", choices=["produce", "consume"])
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--acks", default="1")
    parser.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    py_spy = shutil.which("py-spy")
    if py_spy is None:
        parser.error("py-spy is not installed (pip install py-spy)")

    broker = brokers.start(brokers.SPECS["trafka"])
    output = RESULTS_DIR / f"profile-{args.workload}.txt"
    output.parent.mkdir(parents=True, exist_ok=True)
    recorder = None
    try:
        topic = "bench-profile"
        broker.create_topic(topic, args.partitions)
        common = {"bootstrap": broker.bootstrap, "topic": topic, "size": args.size, "count": args.count}
        if args.workload == "consume":
            run_workload({**common, "workload": "produce", "acks": "1"}, WORKLOAD_TIMEOUT_S)
        recorder = subprocess.Popen(
            [py_spy, "record", "--pid", str(broker.pid), "--rate", str(args.rate), "--format", "raw",
             "--output", str(output), "--nonblocking"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(1.0)  # py-spy attaches
        if args.workload == "produce":
            result = run_workload({**common, "workload": "produce", "acks": args.acks}, WORKLOAD_TIMEOUT_S)
        else:
            result = run_workload({**common, "workload": "consume", "partitions": args.partitions}, WORKLOAD_TIMEOUT_S)
        recorder.send_signal(signal.SIGINT)
        recorder.wait(30)
    finally:
        if recorder is not None and recorder.poll() is None:
            recorder.kill()
            recorder.wait()
        broker.stop()
    print(f"{args.workload}: {result}")
    print(f"collapsed stacks: {output}\n")
    print(summarize(output, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
