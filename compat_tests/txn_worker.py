"""A transactional confluent-kafka (librdkafka) client in its own process, for the transaction tests that
kill a producer with SIGKILL (compat_tests/test_transactions.py).

Every event goes to stdout as one JSON line; librdkafka's own log goes to stderr.

``open``: init_transactions, begin a transaction, write ``--count`` records to ``--topic`` partition
``--partition``, flush, print ``{"event": "open", "offsets": [...]}``, then wait for one command on stdin:
``commit`` or ``abort`` (printing ``{"event": "committed"}`` / ``{"event": "aborted"}``). End of stdin ends
the process with the transaction left open; so does SIGKILL.

``eos``: one member of a consume-transform-produce group, as confluent-kafka's exactly-once example: a
read_committed consumer in group ``--group`` subscribed to ``--input``, a producer with its own
``--transactional-id``; for each batch, begin, write one output record per input record (same key and
partition, value ``out:<input value>``) to ``--output``, send the consumer's positions with its group
metadata to the transaction and commit. Prints ``{"event": "committed", ...}`` per batch. With
``--hang-after K``, after K committed batches it writes the next batch's outputs, flushes them, prints
``{"event": "hanging"}`` and waits (for its SIGKILL) with the transaction open. SIGTERM ends it after the
batch in hand (the consumer leaves the group).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

OPERATION_TIMEOUT = 30.0


def emit(event: str, **fields: object) -> None:
    sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
    sys.stdout.flush()


def producer_config(args: argparse.Namespace) -> dict:
    return {"bootstrap.servers": args.bootstrap, "transactional.id": args.transactional_id,
            "transaction.timeout.ms": args.transaction_timeout_ms, "logger": logging.getLogger("librdkafka")}


def run_open(args: argparse.Namespace) -> None:
    producer = Producer(producer_config(args))
    producer.init_transactions(OPERATION_TIMEOUT)
    producer.begin_transaction()
    offsets: list[int] = []
    errors: list[str] = []

    def delivered(err, msg):
        if err:
            errors.append(str(err))
        else:
            offsets.append(msg.offset())

    for i in range(args.count):
        producer.produce(args.topic, key=f"{args.prefix}-key-{i}".encode(), value=f"{args.prefix}-{i}".encode(),
                         partition=args.partition, on_delivery=delivered)
    if producer.flush(OPERATION_TIMEOUT) or errors:
        emit("failed", errors=errors)
        sys.exit(1)
    emit("open", offsets=sorted(offsets), started=time.time())
    for line in sys.stdin:
        command = line.strip()
        if command == "commit":
            producer.commit_transaction(OPERATION_TIMEOUT)
            emit("committed")
        elif command == "abort":
            producer.abort_transaction(OPERATION_TIMEOUT)
            emit("aborted")
        elif command:
            emit("unknown", command=command)
    # Leave without ending an open transaction: librdkafka would not end it either.
    os._exit(0)


def run_eos(args: argparse.Namespace) -> None:
    stopping = False

    def stop(*_):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    consumer = Consumer({
        "bootstrap.servers": args.bootstrap, "group.id": args.group, "isolation.level": "read_committed",
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
        "session.timeout.ms": args.session_timeout_ms, "heartbeat.interval.ms": max(args.session_timeout_ms // 4, 100),
        "logger": logging.getLogger("librdkafka"),
    })
    producer = Producer(producer_config(args))
    producer.init_transactions(OPERATION_TIMEOUT)

    def assigned(consumer_, partitions):
        emit("assigned", partitions=sorted(tp.partition for tp in partitions))

    consumer.subscribe([args.input], on_assign=assigned)
    batches = 0
    processed = 0
    while not stopping:
        messages = [m for m in consumer.consume(num_messages=args.batch, timeout=0.2) if not _ignorable(m)]
        if not messages:
            continue
        hang = args.hang_after is not None and batches == args.hang_after
        try:
            producer.begin_transaction()
            for m in messages:
                producer.produce(args.output, key=m.key(), value=b"out:" + m.value(), partition=m.partition())
            if hang:
                producer.flush(OPERATION_TIMEOUT)
                emit("hanging", inputs=[[m.partition(), m.offset()] for m in messages])
                while True:
                    time.sleep(1)
            positions = [tp for tp in consumer.position(consumer.assignment()) if tp.offset >= 0]
            producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), OPERATION_TIMEOUT)
            producer.commit_transaction(OPERATION_TIMEOUT)
        except KafkaException as exc:
            error = exc.args[0]
            if not error.txn_requires_abort():
                raise
            # A rebalance since these records were read (the group's generation moved on): throw the
            # batch away and read again from the committed offsets.
            emit("abortable", error=str(error))
            producer.abort_transaction(OPERATION_TIMEOUT)
            _rewind(consumer)
            continue
        batches += 1
        processed += len(messages)
        emit("committed", batch=batches, records=len(messages), processed=processed,
             inputs=[[m.partition(), m.offset()] for m in messages])
        time.sleep(args.pause)
    consumer.close()
    emit("stopped", processed=processed)


def _ignorable(message) -> bool:
    error = message.error()
    if error is None:
        return False
    if error.code() == error._PARTITION_EOF:
        return True
    raise KafkaException(error)


def _rewind(consumer: Consumer) -> None:
    assignment = consumer.assignment()
    if not assignment:
        return
    for tp in consumer.committed(assignment, timeout=OPERATION_TIMEOUT):
        consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING))


def main() -> None:
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["open", "eos"])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--transactional-id", required=True)
    parser.add_argument("--transaction-timeout-ms", type=int, default=60000)
    # open
    parser.add_argument("--topic")
    parser.add_argument("--partition", type=int, default=0)
    parser.add_argument("--count", type=int, default=3)
    parser.add_argument("--prefix", default="open")
    # eos
    parser.add_argument("--input")
    parser.add_argument("--output")
    parser.add_argument("--group")
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--pause", type=float, default=0.05)
    parser.add_argument("--hang-after", type=int)
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    args = parser.parse_args()
    (run_open if args.mode == "open" else run_eos)(args)


if __name__ == "__main__":
    main()
