"""Profile trafka under one workload with py-spy and print where its time goes.

    pip install py-spy
    python -m bench.profile produce           # 1,000,000 x 100 B, acks=1, 1 partition
    python -m bench.profile consume           # the same back
    python -m bench.profile produce --size 1024 --count 200000 --partitions 16 --acks all

py-spy samples the broker process (idle time left out) while the workload runs and writes the collapsed
stacks to ``bench/results/profile-<workload>.txt`` (load them into speedscope or flamegraph.pl); the
summary lists the functions with the largest share of samples, by self time and including callees,
with file:line.

With ``--perf``, Linux ``perf`` samples the broker's CPU time instead (``cpu-clock``, so it works where
the machine has no hardware counters): kernel and native functions, where py-spy sees Python lines
only and counts a thread preempted inside a system call as busy. The report, by library and symbol, is
written to ``bench/results/profile-<workload>-perf.txt``.
"""
from __future__ import annotations

import argparse
import collections
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import brokers
from bench.common import RESULTS_DIR, WORKLOAD_TIMEOUT_S
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
    parser.add_argument("--perf", action="store_true", help="sample CPU time with Linux perf (kernel and native frames)")
    args = parser.parse_args(argv)
    tool = shutil.which("perf" if args.perf else "py-spy")
    if tool is None:
        parser.error("perf is not installed (Debian: apt install linux-perf)" if args.perf else "py-spy is not installed (pip install py-spy)")

    broker = brokers.start(brokers.SPECS["trafka"])
    output = RESULTS_DIR / f"profile-{args.workload}{'-perf' if args.perf else ''}.txt"
    output.parent.mkdir(parents=True, exist_ok=True)
    perf_data = Path(tempfile.mkdtemp(prefix="bench-perf-")) / "perf.data"
    recorder = None
    try:
        topic = "bench-profile"
        broker.create_topic(topic, args.partitions)
        common = {"bootstrap": broker.bootstrap, "topic": topic, "size": args.size, "count": args.count}
        if args.workload == "consume":
            run_workload({**common, "workload": "produce", "acks": "1"}, WORKLOAD_TIMEOUT_S)
        command = (
            [tool, "record", "-e", "cpu-clock", "-F", str(args.rate), "-p", str(broker.pid), "-o", str(perf_data)]
            if args.perf
            else [tool, "record", "--pid", str(broker.pid), "--rate", str(args.rate), "--format", "raw",
                  "--output", str(output), "--nonblocking"]
        )
        recorder = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)  # the sampler attaches
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
    if args.perf:
        report = perf_report(tool, perf_data, args.top)
        shutil.rmtree(perf_data.parent, ignore_errors=True)
        output.write_text(report + "\n")
        print(f"perf report: {output}\n")
        print(report)
        return 0
    print(f"collapsed stacks: {output}\n")
    print(summarize(output, args.top))
    return 0


def perf_report(perf: str, data: Path, top: int) -> str:
    """The broker's CPU samples by library and symbol, largest first."""
    report = subprocess.run(
        [perf, "report", "-i", str(data), "--stdio", "--no-children", "--sort", "dso,sym"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    lines = report.splitlines()
    samples = next((line.lstrip("# ") for line in lines if line.startswith("# Samples")), "")
    rows = [line.strip() for line in lines if line.strip() and not line.startswith("#") and "%" in line[:10]]
    return "\n".join([samples, "", *rows[:top]])


if __name__ == "__main__":
    sys.exit(main())
