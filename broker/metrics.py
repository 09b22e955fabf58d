"""Prometheus metrics, served when ``metrics.port`` (``--metrics-port``) is set, with prometheus_client.

Counted as they happen: requests and their handling time per API, record bytes in (Produce) and out
(Fetch) per topic, SASL authentications per listener, mechanism and outcome, authorization denials per API and
resource type, and the time clients were throttled for by their quotas, per quota type (Produce, Fetch,
Request) and entity (Kafka's user and client-id tags: "" where the quota is shared). Read when scraped: the size
of each partition's log held here, its log end offset and high watermark, the partitions this broker
leads and how many of them are under-replicated (ISR smaller than the replica set, as Kafka's
UnderReplicatedPartitions), the open connections, and the consumer groups by state with their members.
Without the setting nothing here is loaded, and the request path only tests for ``None``.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trafka.broker.groups.coordinator import GroupCoordinator
    from trafka.broker.topics import Topic

log = logging.getLogger(__name__)

#: Request handling times, in seconds, from 100 µs to 10 s.
LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                   10.0)


class Metrics:
    """The broker's metrics in a registry of their own. Scrapes read the broker's ``topics``, its group
    coordinator (``groups()``: None until started) and how many ``connections()`` are open."""

    def __init__(self, topics: Iterable[Topic], groups: Callable[[], GroupCoordinator | None],
                 connections: Callable[[], int]) -> None:
        from prometheus_client import CollectorRegistry, Counter, Histogram

        self.registry = CollectorRegistry()
        self._requests = Counter("trafka_requests", "Requests handled, by API.", ["api"], registry=self.registry)
        self._latency = Histogram("trafka_request_seconds", "Time from a request's arrival to its response, by API.",
                                  ["api"], buckets=LATENCY_BUCKETS, registry=self.registry)
        self._bytes_in = Counter("trafka_bytes_in", "Record bytes appended by Produce, by topic.", ["topic"],
                                 registry=self.registry)
        self._bytes_out = Counter("trafka_bytes_out", "Record bytes sent by Fetch, by topic.", ["topic"],
                                  registry=self.registry)
        self._authentications = Counter(
            "trafka_authentications", "SASL authentications, by listener, mechanism and outcome.",
            ["listener", "mechanism", "outcome"], registry=self.registry)
        self._denials = Counter(
            "trafka_authorization_denials", "Operations the authorizer denied, by API and resource type.",
            ["api", "resource_type"], registry=self.registry)
        self._throttle_time = Counter(
            "trafka_throttle_time_seconds", "Time clients were throttled for by their quotas, by quota type and "
            "entity.", ["quota_type", "user", "client_id"], registry=self.registry)
        self._throttled = Counter(
            "trafka_throttled_responses", "Responses that throttled their client, by quota type and entity.",
            ["quota_type", "user", "client_id"], registry=self.registry)
        self.registry.register(_StateCollector(topics, groups, connections))
        self._server = None

    def serve(self, host: str, port: int) -> None:
        """Serve ``/metrics`` on ``host:port`` (an HTTP server in a thread of its own)."""
        from prometheus_client import start_http_server

        self._server, _ = start_http_server(port, addr=host, registry=self.registry)
        log.info("serving Prometheus metrics on http://%s:%d/metrics", host, self._server.server_port)

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def request(self, api: str, seconds: float) -> None:
        self._requests.labels(api).inc()
        self._latency.labels(api).observe(seconds)

    def authentication(self, listener: str, mechanism: str | None, *, succeeded: bool) -> None:
        self._authentications.labels(listener, mechanism or "", "succeeded" if succeeded else "failed").inc()

    def authorization_denied(self, api: str, resource_type: str) -> None:
        self._denials.labels(api, resource_type).inc()

    def throttled(self, quota_type: str, tags: tuple[str, str], throttle_ms: int) -> None:
        """A client was throttled by a quota (``trafka.broker.security.quotas``)."""
        self._throttle_time.labels(quota_type, *tags).inc(throttle_ms / 1000)
        self._throttled.labels(quota_type, *tags).inc()

    def bytes_in(self, topic: str, size: int) -> None:
        self._bytes_in.labels(topic).inc(size)

    def bytes_out(self, topic: str, size: int) -> None:
        self._bytes_out.labels(topic).inc(size)

    def watch_share_partitions(self, manager) -> None:
        """Read the share partitions' figures (broker.share.manager) at each scrape, from now on."""
        self.registry.register(_ShareCollector(manager))


class _StateCollector:
    """What the broker holds, read at each scrape."""

    def __init__(self, topics: Iterable[Topic], groups: Callable[[], GroupCoordinator | None],
                 connections: Callable[[], int]) -> None:
        self.topics = topics
        self.groups = groups
        self.connections = connections

    def collect(self) -> Iterable[object]:
        from prometheus_client.core import GaugeMetricFamily

        size = GaugeMetricFamily("trafka_log_size_bytes", "Bytes in a partition's log.", labels=["topic", "partition"])
        end = GaugeMetricFamily("trafka_log_end_offset", "A partition's log end offset.", labels=["topic", "partition"])
        watermark = GaugeMetricFamily("trafka_high_watermark", "A partition's high watermark.",
                                      labels=["topic", "partition"])
        leading = under_replicated = 0
        for topic in self.topics:
            for partition in topic.partitions:
                if partition.log is None:  # a partition of the cluster with no replica here
                    continue
                labels = [topic.name, str(partition.index)]
                size.add_metric(labels, sum(segment.size for segment in partition.log.segments))
                end.add_metric(labels, partition.log.log_end_offset)
                watermark.add_metric(labels, partition.high_watermark)
                if partition.is_leader:
                    leading += 1
                    under_replicated += len(partition.isr) < len(partition.replicas)
        yield from (size, end, watermark)
        yield GaugeMetricFamily("trafka_leader_partitions", "Partitions this broker leads.", value=leading)
        yield GaugeMetricFamily("trafka_under_replicated_partitions",
                                "Partitions led here whose ISR is smaller than their replica set.",
                                value=under_replicated)
        yield GaugeMetricFamily("trafka_connections", "Open client connections.", value=self.connections())
        groups = GaugeMetricFamily("trafka_groups", "Groups, by type (classic, consumer, share) and state.",
                                   labels=["type", "state"])
        members = GaugeMetricFamily("trafka_group_members", "Members of a group.", labels=["group"])
        coordinator = self.groups()
        if coordinator is not None and coordinator.active:
            counts: dict[tuple[str, str], int] = {}
            for group in list(coordinator.groups.values()):
                key = (group.type.value, str(group.state))
                counts[key] = counts.get(key, 0) + 1
                members.add_metric([group.group_id], len(group.members))
            for (kind, state), count in sorted(counts.items()):
                groups.add_metric([kind, state], count)
        yield from (groups, members)


class _ShareCollector:
    """The share partitions led here, read at each scrape: records in flight and archived, expired locks."""

    def __init__(self, manager) -> None:
        self.manager = manager

    def collect(self) -> Iterable[object]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        labels = ["group", "topic", "partition"]
        in_flight = GaugeMetricFamily("trafka_share_in_flight_records",
                                      "Records of a share partition in flight (from its start offset to its end).",
                                      labels=labels)
        acquired = GaugeMetricFamily("trafka_share_acquired_records", "Records of a share partition acquired now.",
                                     labels=labels)
        archived = CounterMetricFamily("trafka_share_archived_records",
                                       "Records of a share partition archived (rejected, past the delivery limit, "
                                       "aborted).", labels=labels)
        expired = CounterMetricFamily("trafka_share_lock_expiries",
                                      "Acquisition locks of a share partition that ran out.", labels=labels)
        for share_partition in self.manager.share_partitions():
            names = [share_partition.group_id, share_partition.topic, str(share_partition.partition)]
            in_flight.add_metric(names, share_partition.in_flight_records)
            acquired.add_metric(names, share_partition.acquired_records())
            archived.add_metric(names, share_partition.archived_records)
            expired.add_metric(names, share_partition.lock_expiries)
        yield from (in_flight, acquired, archived, expired)
        yield GaugeMetricFamily("trafka_share_sessions", "Share sessions kept by this broker.",
                                value=len(self.manager.sessions))
