"""Profile trafka under one workload with py-spy and print where its time goes.

    pip install py-spy
    python -m bench.profile produce           # 1,000,000 x 100 B, acks=1, 1 partition
    python -m bench.profile consume           # the same back
    python -m bench.profile produce --size 1024 --count 200000 --partitions 16 --acks all

py-spy samples the broker process (idle time left out) while the workload runs and writes the collapsed
stacks to ``bench/results/profile-<workload>.txt`` (load them into speedscope or flamegraph.pl); the
summary lists the functions with the largest share of samples, by self time and including callees,
with file:line.

``python -m bench.profile start`` profiles a broker's start instead: it starts ``python -X importtime -m trafka``
ten times (a warm page cache: the first start is left out) and writes to ``bench/results/profile-start.txt``
the median time from spawn to the ready line, how much of it the interpreter and its site, trio and
trafka's own modules take to load, and the modules that take longest.

With ``--perf``, Linux ``perf`` samples the broker's CPU time instead (``cpu-clock``, so it works where
the machine has no hardware counters): kernel and native functions, where py-spy sees Python lines
only and counts a thread preempted inside a system call as busy. The report, by library and symbol, is
written to ``bench/results/profile-<workload>-perf.txt``.
"""
from __future__ import annotations

import argparse
import collections
import re
import shutil
import signal
import statistics
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


_IMPORT_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


def profile_start(starts: int, top: int) -> str:
    """Spawn-to-ready times and import times (each module's fastest of ``starts``) of ``python -m trafka``."""
    ready_times: list[float] = []
    fastest: dict[str, tuple[int, int, int]] = {}  # module -> (self us, cumulative us, depth)
    for attempt in range(starts + 1):
        data = Path(tempfile.mkdtemp(prefix="bench-start-"))
        started = time.perf_counter()
        process = subprocess.Popen(
            [sys.executable, "-X", "importtime", "-m", "trafka", "--port", "0", "--data-dir", str(data / "data"),
             "--log-level", "WARNING"], cwd=brokers.REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith("trafka ready: "):
                break
        elapsed = time.perf_counter() - started
        process.terminate()
        _, stderr = process.communicate(timeout=30)
        shutil.rmtree(data, ignore_errors=True)
        if attempt == 0:
            continue  # the page cache is warm from the second start on
        ready_times.append(elapsed)
        for match in _IMPORT_LINE.finditer(stderr):
            own, cumulative, depth, name = int(match[1]), int(match[2]), len(match[3]) // 2, match[4]
            best = fastest.get(name)
            if best is None or cumulative < best[1]:
                fastest[name] = (own, cumulative, depth)

    def own_ms(*prefixes: str) -> float:
        return sum(own for name, (own, _, _) in fastest.items() if name.startswith(prefixes)) / 1000

    top_level = sum(cumulative for own, cumulative, depth in fastest.values() if depth == 0) / 1000
    site_ms = fastest.get("site", (0, 0, 0))[1] / 1000
    trafka_ms, trio_ms = own_ms("trafka"), own_ms("trio", "attr", "outcome", "sniffio", "sortedcontainers", "idna")
    lines = [
        f"start to ready, median of {starts} warm starts: {statistics.median(ready_times) * 1000:.0f} ms "
        f"(fastest {min(ready_times) * 1000:.0f} ms)",
        f"modules loaded: {len(fastest)}, {sum(1 for name in fastest if name.startswith('trafka'))} of them trafka's",
        f"all imports (each module's fastest): {top_level:.1f} ms, of which",
        f"  site (the interpreter's start-up .pth files and what they load): {site_ms:.1f} ms",
        f"  trio and its dependencies: {trio_ms:.1f} ms",
        f"  trafka's own modules: {trafka_ms:.1f} ms",
        f"  the rest (standard library and other packages): {top_level - site_ms - trafka_ms - trio_ms:.1f} ms",
        "",
        "modules by their own import time (ms; fastest start):",
        *(f"  {own / 1000:6.2f}  {name}" for name, (own, _, _) in
          sorted(fastest.items(), key=lambda item: -item[1][0])[:top]),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__.split("\n\n")[0])
    parser.add_argument("workload", choices=["produce", "consume", "start"])
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--acks", default="1")
    parser.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--perf", action="store_true", help="sample CPU time with Linux perf (kernel and native frames)")
    args = parser.parse_args(argv)
    if args.workload == "start":
        report = profile_start(10, args.top)
        output = RESULTS_DIR / "profile-start.txt"
        output.write_text(report + "\n")
        print(f"{report}\n\nwritten to {output}")
        return 0
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
