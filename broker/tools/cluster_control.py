"""The control endpoint of a ``trafka cluster`` (``--control-port``): its brokers on cue, as a small JSON API over
HTTP on 127.0.0.1, for test suites in any language and for ``trafka control --port P cluster ...``:

    GET  /brokers                                   each broker: id, address, running, paused
    POST /brokers/N/stop | start | kill | restart   a clean stop (SIGTERM), a start, SIGKILL, a restart
    POST /brokers/N/pause | resume                  SIGSTOP / SIGCONT: the process frozen where it stands
    POST /brokers/N/isolate?from=everything|brokers|zookeeper
                                                    cut off (a cluster started with --network); until healed
    POST /heal                                      every link back
    POST /partitions/TOPIC/P/leader?broker=N        broker N made the partition's leader

Each call answers once done, with the brokers as they are then (or ``{"error": ...}`` and 400, 404 or 409). The
server runs in a thread of its own; the cluster handle's calls block, and are made one at a time.
"""
from __future__ import annotations

import logging
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, unquote, urlsplit

from trafka.broker.control import send_json
from trafka.broker.testing import BrokerError

if TYPE_CHECKING:
    from trafka.broker.testing import TrafkaCluster

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"
BROKER_ACTIONS = ("stop", "start", "kill", "restart", "pause", "resume", "isolate")


class ClusterControlServer:
    """Serves ``cluster`` on ``127.0.0.1:port`` (0: a free one) until closed."""

    def __init__(self, cluster: TrafkaCluster, port: int) -> None:
        handler = type("Handler", (_Handler,), {"cluster": cluster, "lock": threading.Lock(), "paused": set()})
        self._server = ThreadingHTTPServer((LOOPBACK, port), handler)
        self._server.daemon_threads = True
        self.port: int = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="trafka-cluster-control", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class _Handler(BaseHTTPRequestHandler):
    cluster: TrafkaCluster
    lock: threading.Lock
    paused: set[int]
    server_version = "trafka-cluster-control"

    def do_GET(self) -> None:
        self._answer("GET")

    def do_POST(self) -> None:
        self._answer("POST")

    def log_message(self, format: str, *args: object) -> None:
        log.debug("cluster control %s: " + format, self.client_address[0], *args)

    def _brokers(self) -> dict[str, object]:
        return {"brokers": [{"id": node_id, "bootstrap": broker.bootstrap_servers if broker.running else None,
                             "running": broker.running, "paused": node_id in self.paused}
                            for node_id, broker in enumerate(self.cluster.brokers, start=1)],
                "isolated": self.cluster.network.rules() if self.cluster.network is not None else []}

    def _route(self, method: str, parts: list[str], query: dict[str, str]) -> tuple[HTTPStatus, object]:
        cluster = self.cluster
        if method == "GET" and parts == ["brokers"]:
            return HTTPStatus.OK, self._brokers()
        if method != "POST":
            return HTTPStatus.NOT_FOUND, {"error": "GET /brokers; POST /brokers/N/ACTION, /heal, "
                                                   "/partitions/TOPIC/P/leader?broker=N"}
        if len(parts) == 3 and parts[0] == "brokers" and parts[1].isdigit() and parts[2] in BROKER_ACTIONS:
            node_id, action = int(parts[1]), parts[2]
            broker = cluster.broker(node_id)
            if action == "isolate":
                cluster.isolate(node_id, from_=query.get("from", "everything"))
            elif action == "pause":
                broker.pause()
                self.paused.add(node_id)
            elif action == "resume":
                broker.resume()
                self.paused.discard(node_id)
            elif action == "restart":
                self.paused.discard(node_id)
                broker.restart()
            else:
                if action == "stop" and node_id in self.paused:
                    broker.resume()  # (a frozen process cannot stop cleanly)
                self.paused.discard(node_id)
                getattr(broker, action)()
            return HTTPStatus.OK, self._brokers()
        if parts == ["heal"]:
            cluster.heal()
            return HTTPStatus.OK, self._brokers()
        if len(parts) == 4 and parts[0] == "partitions" and parts[2].isdigit() and parts[3] == "leader":
            target = query.get("broker", "")
            if not target.isdigit():
                return HTTPStatus.BAD_REQUEST, {"error": "broker: the id of the broker to lead the partition"}
            cluster.move_leadership(parts[1], int(parts[2]), int(target))
            return HTTPStatus.OK, {"topic": parts[1], "partition": int(parts[2]), "leader": int(target)}
        return HTTPStatus.NOT_FOUND, {"error": f"no POST /{'/'.join(parts)}"}

    def _answer(self, method: str) -> None:
        url = urlsplit(self.path)
        parts = [unquote(part) for part in url.path.split("/") if part]
        query = {key: values[-1] for key, values in parse_qs(url.query).items()}
        length = self.headers.get("Content-Length") or "0"
        if length.isdigit() and int(length):
            self.rfile.read(min(int(length), 64 * 1024))
        try:
            with self.lock:
                status, body = self._route(method, parts, query)
        except BrokerError as exc:
            status, body = HTTPStatus.CONFLICT, {"error": str(exc)}
        except Exception as exc:  # a request fails alone; the cluster goes on
            log.exception("cluster control: %s %s failed", method, url.path)
            status, body = HTTPStatus.INTERNAL_SERVER_ERROR, {"error": f"{type(exc).__name__}: {exc}"}
        send_json(self, status, body)
