"""Cluster coordination: which brokers are alive, which one is the controller, and the cluster's id.

Brokers in separate processes coordinate through Apache ZooKeeper in Kafka's own ZooKeeper-mode layout
(``broker.cluster.zookeeper``), so that the state can be read with ZooKeeper's tools as Kafka engineers
know it. A broker without ``zookeeper.connect`` is a cluster of one and needs none of this; until
replication is served, a broker refuses ``zookeeper.connect`` (broker.config) and this package is the
coordination layer the replicated cluster is built on.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

SECURITY_PROTOCOL = "PLAINTEXT"


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """A live broker as it registers itself: its id, where clients reach it, and its rack."""

    node_id: int
    host: str
    port: int
    rack: str | None = None

    def to_json(self, timestamp_ms: int) -> bytes:
        """The registration as Kafka writes ``/brokers/ids/<id>`` (version 5)."""
        document: dict[str, object] = {
            "features": {},
            "listener_security_protocol_map": {SECURITY_PROTOCOL: SECURITY_PROTOCOL},
            "endpoints": [f"{SECURITY_PROTOCOL}://{self.host}:{self.port}"],
            "jmx_port": -1,
            "port": self.port,
            "host": self.host,
            "version": 5,
            "timestamp": str(timestamp_ms),
        }
        if self.rack is not None:
            document["rack"] = self.rack
        return json.dumps(document, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, node_id: int, data: bytes) -> BrokerRegistration:
        """A registration read from ``/brokers/ids/<id>``: the first PLAINTEXT endpoint (or the legacy
        host and port fields)."""
        document = json.loads(data)
        protocols = document.get("listener_security_protocol_map") or {}
        for endpoint in document.get("endpoints") or []:
            name, _, address = endpoint.partition("://")
            if protocols.get(name, name) == SECURITY_PROTOCOL:
                host, _, port = address.rpartition(":")
                return cls(node_id, host.strip("[]"), int(port), document.get("rack"))
        return cls(node_id, document["host"], int(document["port"]), document.get("rack"))
