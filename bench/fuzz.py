"""The long fuzz run: ``python -m bench.fuzz --frames 1000000`` (or ``make fuzz``).

Starts a broker process in a temporary directory and runs a fuzz campaign against it
(``compat_tests/fuzz/campaign.py``): mutated golden frames on their own connections while a served
client produces and consumes and a probe times Metadata requests. Prints progress, then the figures:
frames sent, the broker's RSS before and after (and its peak), the probe's worst latency, what the
served client saw, and every problem found with the seed and frame behind it. Writes the figures to
``bench/results/fuzz-<time>.txt`` with ``--save``.

``--sasl`` fuzzes the broker's SASL_PLAINTEXT listener instead (``mutate.sasl_mutant``: mutated SASL frames
and bare tokens, and other APIs, first on a connection, during an exchange or after a golden login) while
the served client logs in with SCRAM-SHA-512 there.

``--replay N`` sends only frame N of the seed (with ``--sasl``: after its prelude, to the SASL listener) to a
fresh broker and prints what the broker answered and logged: the reproduction of a problem the campaign
named.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from pathlib import Path

from compat_tests.fuzz.campaign import (
    BROKER_OVERRIDES,
    CampaignResult,
    replay,
    run_campaign,
    sasl_served_settings,
    start_sasl_broker,
)
from compat_tests.fuzz.corpus import load_corpus
from compat_tests.fuzz.mutate import mutant, sasl_mutant
from compat_tests.harness import BrokerProcess

RESULTS = Path(__file__).parent / "results"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Fuzz a broker process with mutated golden frames.")
    parser.add_argument("--frames", type=int, default=1_000_000, help="how many mutated frames to send")
    parser.add_argument("--seed", type=int, default=int(time.time()), help="campaign seed (default: the time)")
    parser.add_argument("--start", type=int, default=0, help="index of the first frame of the seed")
    parser.add_argument("--workers", type=int, default=32, help="concurrent fuzzing connections")
    parser.add_argument("--per-connection", type=int, default=1, help="mutated frames sent per connection")
    parser.add_argument("--reply-timeout", type=float, default=0.3, help="how long to wait for an answer")
    parser.add_argument("--sasl", action="store_true", help="fuzz the broker's SASL_PLAINTEXT listener")
    parser.add_argument("--replay", type=int, metavar="N", help="send only frame N of the seed and show the outcome")
    parser.add_argument("--save", action="store_true", help="write the figures to bench/results/")
    args = parser.parse_args(argv)
    logging.getLogger("librdkafka").setLevel(logging.CRITICAL)
    corpus = load_corpus()
    with tempfile.TemporaryDirectory(prefix="trafka-fuzz-") as work_dir:
        if args.sasl:
            broker, target = start_sasl_broker(Path(work_dir) / "data", name="fuzz")
            extra = {"target": target, "make_mutant": sasl_mutant}
        else:
            broker = BrokerProcess(Path(work_dir) / "data", overrides=BROKER_OVERRIDES, name="fuzz")
            broker.start()
            target, extra = (broker.host, broker.port), {}
        try:
            if args.replay is not None:
                return _replay(broker, corpus, args.seed, args.replay, target, extra.get("make_mutant", mutant))
            print(f"fuzzing {target[0]}:{target[1]}{' (SASL_PLAINTEXT)' if args.sasl else ''} with {args.frames} "
                  f"frames, seed {args.seed}, {len(corpus)} golden frames", flush=True)
            result = run_campaign(broker, corpus, seed=args.seed, frames=args.frames, start=args.start,
                                  workers=args.workers, per_connection=args.per_connection,
                                  reply_timeout=args.reply_timeout, progress=_progress, progress_every=30.0,
                                  served_settings=sasl_served_settings(target) if args.sasl else None, **extra)
        finally:
            broker.close()
    report = _report(result, args)
    print(report)
    if args.save:
        RESULTS.mkdir(exist_ok=True)
        path = RESULTS / f"fuzz-{time.strftime('%Y-%m-%d-%H%M', time.gmtime())}.txt"
        path.write_text(report + "\n")
        print(f"written to {path}")
    return 1 if result.problems else 0


def _progress(result: CampaignResult) -> None:
    print(f"  {result.elapsed:6.0f} s: {result.frames} frames, peak RSS {result.rss_peak / 2**20:.1f} MB, "
          f"probe worst {result.probe_worst * 1000:.0f} ms, served client {result.served.produced} produced, "
          f"{result.served.consumed} consumed",
          flush=True)


def _report(result: CampaignResult, args: argparse.Namespace) -> str:
    mb = 2**20
    lines = [
        f"fuzz campaign{' (SASL_PLAINTEXT listener)' if args.sasl else ''}: seed {result.seed}, "
        f"frames {args.start}..{args.start + result.frames - 1}, "
        f"{args.workers} workers, {args.per_connection} frame(s) per connection",
        f"frames sent:          {result.frames} on {result.connections} connections in {result.elapsed:.0f} s "
        f"({result.frames / max(result.elapsed, 1e-9):.0f} frames/s)",
        f"connections answered: {result.answered}; closed for a protocol error: {result.protocol_errors}; "
        f"could not send: {result.connect_failures}",
        f"swept away:           {result.topics_deleted} topics, {result.groups_deleted} groups the frames created",
        f"broker RSS:           {result.rss_before / mb:.1f} MB before, {result.rss_after / mb:.1f} MB after "
        f"(the final sweep done), peak {result.rss_peak / mb:.1f} MB",
        f"probe (Metadata):     {result.probe_count} requests, worst {result.probe_worst * 1000:.0f} ms "
        f"(at {result.probe_worst_at:.0f} s)",
        f"served client:        {result.served.produced} produced, {result.served.consumed} consumed, longest gap "
        f"{result.served.max_gap * 1000:.0f} ms",
        f"problems:             {len(result.problems)}",
    ]
    lines += [f"--- problem {n}:\n{problem}" for n, problem in enumerate(result.problems[:20], 1)]
    return "\n".join(lines)


def _replay(broker: BrokerProcess, corpus, seed: int, index: int, target, make_mutant) -> int:
    position = len(broker.log_text())
    m, answer = replay(broker, corpus, seed, index, target=target, make_mutant=make_mutant)
    time.sleep(0.5)
    print(m.describe())
    if m.prelude:
        print(f"prelude ({len(m.prelude)} bytes, sent as it is): {m.prelude.hex()}")
    print(f"frame ({len(m.data)} bytes): {m.data.hex()}")
    print(f"answer ({len(answer)} bytes): {answer[:512].hex()}")
    print(f"broker alive: {broker.running}")
    print("broker log:\n" + broker.log_text()[position:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
