"""The control endpoint: the broker's fault rules (broker.faults) and waits that spare tests their sleeps, as
a small JSON API over HTTP for test suites in any language. It listens on the loopback interface only
(``--control-port``).

    GET    /faults                          the rules, with their hits
    POST   /faults                          add a rule (the body is its JSON form); 201 and the rule, or 400
    GET    /faults/ID[?hits=N]              the rule; with ``hits``, once it was hit N times
    DELETE /faults/ID                       remove the rule (404 when there is none)
    DELETE /faults                          remove every rule
    GET    /clock                           the broker's time (now_ms, advanced_ms) and whether it may be advanced
    POST   /clock/advance?seconds=S         move the time of a broker started with --controllable-clock forward
    GET    /groups/ID[?state=S&members=M]   a group's state and member count; with either, once they hold
    GET    /partitions/TOPIC/P[?end_offset=X] a partition's offsets; with ``end_offset``, once it reached X

A wait takes ``timeout_ms`` (default 30,000) and answers 408 with what it last saw when that passes.

Answers are JSON; errors are ``{"error": "..."}``. The server runs in a thread of its own and hands each
request to the broker's Trio loop, where the rules live.
"""
from __future__ import annotations

import json
import logging
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, unquote, urlsplit

import trio

from trafka.broker.faults import RuleError

if TYPE_CHECKING:
    from trafka.broker.broker import Broker
    from trafka.broker.faults import FaultRules

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"
#: The longest a hits wait may ask for.
MAX_WAIT_MS = 300_000
#: The furthest one advance of the clock may move it (ten years).
MAX_ADVANCE_S = 10 * 365 * 86_400
#: The largest rule body read.
MAX_BODY_BYTES = 64 * 1024
#: How often a wait for a group or a partition looks again (inside the broker).
POLL_S = 0.01


class ControlServer:
    """Serves ``broker``'s rules and waits on ``127.0.0.1:port`` until closed."""

    def __init__(self, broker: Broker, port: int) -> None:
        token = trio.lowlevel.current_trio_token()
        handler = type("Handler", (_Handler,), {"broker": broker, "rules": broker.faults, "token": token})
        self._server = ThreadingHTTPServer((LOOPBACK, port), handler)
        self._server.daemon_threads = True
        self.port: int = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="trafka-control", daemon=True)
        self._thread.start()
        log.info("serving the control endpoint on http://%s:%d/faults", LOOPBACK, self.port)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class _Reply(Exception):
    def __init__(self, status: HTTPStatus, body: object) -> None:
        self.status = status
        self.body = body


class _Handler(BaseHTTPRequestHandler):
    broker: Broker
    rules: FaultRules
    token: trio.lowlevel.TrioToken
    server_version = "trafka-control"

    def do_GET(self) -> None:
        self._answer(self._get)

    def do_POST(self) -> None:
        self._answer(self._post)

    def do_DELETE(self) -> None:
        self._answer(self._delete)

    def log_message(self, format: str, *args: object) -> None:
        log.debug("control %s: " + format, self.client_address[0], *args)

    # -- the API -----------------------------------------------------------------------------------

    def _get(self, rule_id: int | None, query: dict[str, str]) -> tuple[HTTPStatus, object]:
        if rule_id is None:
            return HTTPStatus.OK, {"rules": self._on_trio(lambda: [rule.to_json() for rule in self.rules])}
        if "hits" not in query:
            return HTTPStatus.OK, self._on_trio(lambda: self._rule(rule_id).to_json())
        hits = _int(query, "hits", 1, None)
        timeout_ms = _timeout_ms(query)

        async def wait() -> dict[str, object]:
            self._rule(rule_id)
            with trio.move_on_after(timeout_ms / 1000):
                try:
                    return (await self.rules.wait_for_hits(rule_id, hits)).to_json()
                except KeyError:
                    raise _Reply(HTTPStatus.NOT_FOUND, {"error": f"rule {rule_id} was removed"}) from None
            rule = self._rule(rule_id)
            raise _Reply(HTTPStatus.REQUEST_TIMEOUT,
                         {"error": f"rule {rule_id} was hit {rule.hits} times of {hits} in {timeout_ms} ms",
                          "rule": rule.to_json()})

        return HTTPStatus.OK, trio.from_thread.run(wait, trio_token=self.token)

    def _post(self, rule_id: int | None, query: dict[str, str]) -> tuple[HTTPStatus, object]:
        if rule_id is not None:
            raise _Reply(HTTPStatus.METHOD_NOT_ALLOWED, {"error": "POST /faults adds a rule"})
        length_header = self.headers.get("Content-Length") or "0"
        length = int(length_header) if length_header.isdigit() else 0
        if not 0 < length <= MAX_BODY_BYTES:
            raise _Reply(HTTPStatus.BAD_REQUEST, {"error": "the body is the rule as a JSON object"})
        try:
            spec = json.loads(self.rfile.read(length))
        except ValueError as exc:
            raise _Reply(HTTPStatus.BAD_REQUEST, {"error": f"the body is not JSON: {exc}"}) from None
        if not isinstance(spec, dict):
            raise _Reply(HTTPStatus.BAD_REQUEST, {"error": "the body is the rule as a JSON object"})
        try:
            rule = self._on_trio(lambda: self.rules.add(spec).to_json())
        except RuleError as exc:
            raise _Reply(HTTPStatus.BAD_REQUEST, {"error": str(exc)}) from None
        return HTTPStatus.CREATED, rule

    def _delete(self, rule_id: int | None, query: dict[str, str]) -> tuple[HTTPStatus, object]:
        if rule_id is None:
            self._on_trio(self.rules.clear)
            return HTTPStatus.OK, {"rules": []}
        if not self._on_trio(lambda: self.rules.remove(rule_id)):
            raise _Reply(HTTPStatus.NOT_FOUND, {"error": f"no rule {rule_id}"})
        return HTTPStatus.OK, {"removed": rule_id}

    def _group(self, group_id: str, query: dict[str, str]) -> tuple[HTTPStatus, object]:
        state = query.get("state")
        members = _int(query, "members", 0, None) if "members" in query else None

        def seen() -> dict[str, object] | None:
            group = self.broker.group_coordinator().groups.get(group_id)
            if group is None:
                return None
            return {"group": group_id, "state": str(group.state), "members": len(group.members)}

        def holds(now: dict[str, object] | None) -> bool:
            return now is not None and (state is None or str(now["state"]).lower() == state.lower()) and (
                members is None or now["members"] == members)

        if state is None and members is None:
            now = self._on_trio(seen)
            if now is None:
                raise _Reply(HTTPStatus.NOT_FOUND, {"error": f"no group {group_id!r}"})
            return HTTPStatus.OK, now
        wanted = " and ".join(part for part in (state and f"state {state}",
                                                 members is not None and f"{members} members") if part)
        return self._wait(seen, holds, _timeout_ms(query), f"group {group_id!r} {wanted}")

    def _partition(self, topic: str, index: str, query: dict[str, str]) -> tuple[HTTPStatus, object]:
        if not index.isdigit():
            raise _Reply(HTTPStatus.NOT_FOUND, {"error": f"no partition {index!r}"})
        end_offset = _int(query, "end_offset", 0, None) if "end_offset" in query else None

        def seen() -> dict[str, object] | None:
            partition = self.broker.topics.partition(topic, int(index))
            if partition is None or partition.log is None:  # (in a cluster: no replica here)
                return None
            return {"topic": topic, "partition": int(index), "log_end_offset": partition.log_end_offset,
                    "high_watermark": partition.high_watermark}

        if end_offset is None:
            now = self._on_trio(seen)
            if now is None:
                raise _Reply(HTTPStatus.NOT_FOUND, {"error": f"no partition {topic}-{index}"})
            return HTTPStatus.OK, now
        return self._wait(seen, lambda now: now is not None and now["log_end_offset"] >= end_offset,
                          _timeout_ms(query), f"{topic}-{index} end offset {end_offset}")

    def _clock(self, method, rest: list[str], query: dict[str, str]) -> tuple[HTTPStatus, object]:
        """``GET /clock``: the broker's time; ``POST /clock/advance?seconds=S``: move it forward (a broker started
        with ``--controllable-clock``; broker.clock)."""
        from trafka.broker import clock

        controllable = clock.current
        if method == self._get and not rest:
            return HTTPStatus.OK, {"controllable": controllable is not None,
                                   **self._on_trio(clock.ControllableClock.state)}
        if method != self._post or rest != ["advance"]:
            raise _Reply(HTTPStatus.NOT_FOUND, {"error": "GET /clock, or POST /clock/advance?seconds=S"})
        if controllable is None:
            raise _Reply(HTTPStatus.CONFLICT, {"error": "this broker keeps the real time: start it with "
                                                        "--controllable-clock to advance its clock"})
        try:
            seconds = float(query["seconds"])
        except (KeyError, ValueError):
            raise _Reply(HTTPStatus.BAD_REQUEST, {"error": "seconds: how far to move the clock forward"}) from None
        if not 0 <= seconds <= MAX_ADVANCE_S:
            raise _Reply(HTTPStatus.BAD_REQUEST, {"error": f"seconds {seconds:g}: from 0 to {MAX_ADVANCE_S}"})

        def advance() -> dict[str, object]:
            controllable.advance(seconds)
            return controllable.state()

        return HTTPStatus.OK, {"controllable": True, **self._on_trio(advance)}

    def _wait(self, seen, holds, timeout_ms: int, wanted: str) -> tuple[HTTPStatus, object]:
        """Look at ``seen()`` on the broker's loop until ``holds`` it, or answer 408 after ``timeout_ms``."""
        async def wait() -> dict[str, object]:
            with trio.move_on_after(timeout_ms / 1000):
                while not holds(now := seen()):
                    await trio.sleep(POLL_S)
                return now
            raise _Reply(HTTPStatus.REQUEST_TIMEOUT, {"error": f"no {wanted} in {timeout_ms} ms", "seen": seen()})

        return HTTPStatus.OK, trio.from_thread.run(wait, trio_token=self.token)

    # -- plumbing ----------------------------------------------------------------------------------

    def _rule(self, rule_id: int):
        rule = self.rules.get(rule_id)
        if rule is None:
            raise _Reply(HTTPStatus.NOT_FOUND, {"error": f"no rule {rule_id}"})
        return rule

    def _on_trio(self, fn):
        return trio.from_thread.run_sync(fn, trio_token=self.token)

    def _answer(self, method) -> None:
        try:
            url = urlsplit(self.path)
            parts = [unquote(part) for part in url.path.split("/") if part]
            query = {key: values[-1] for key, values in parse_qs(url.query).items()}
            if method == self._get and len(parts) == 2 and parts[0] == "groups":
                status, body = self._group(parts[1], query)
            elif method == self._get and len(parts) == 3 and parts[0] == "partitions":
                status, body = self._partition(parts[1], parts[2], query)
            elif parts and parts[0] == "clock":
                status, body = self._clock(method, parts[1:], query)
            elif parts and parts[0] == "faults" and len(parts) <= 2:
                rule_id = None
                if len(parts) == 2:
                    if not parts[1].isdigit():
                        raise _Reply(HTTPStatus.NOT_FOUND, {"error": f"no rule {parts[1]!r}"})
                    rule_id = int(parts[1])
                status, body = method(rule_id, query)
            else:
                raise _Reply(HTTPStatus.NOT_FOUND, {"error": f"no {url.path}: the endpoint serves /faults, "
                                                             "/groups/ID, /partitions/TOPIC/P and /clock"})
        except _Reply as reply:
            status, body = reply.status, reply.body
        except trio.RunFinishedError:
            status, body = HTTPStatus.SERVICE_UNAVAILABLE, {"error": "the broker is shutting down"}
        send_json(self, status, body)


def send_json(handler: BaseHTTPRequestHandler, status: HTTPStatus, body: object) -> None:
    """Answer an HTTP request with ``body`` as JSON (this endpoint's, and a trafka cluster's: tools.cluster_control)."""
    data = json.dumps(body).encode() + b"\n"
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def _timeout_ms(query: dict[str, str]) -> int:
    return _int(query, "timeout_ms", 0, MAX_WAIT_MS) if "timeout_ms" in query else 30_000


def _int(query: dict[str, str], name: str, low: int, high: int | None) -> int:
    try:
        value = int(query[name])
    except ValueError:
        raise _Reply(HTTPStatus.BAD_REQUEST, {"error": f"{name}: a whole number"}) from None
    if value < low or (high is not None and value > high):
        bound = f"{low}-{high}" if high is not None else f"at least {low}"
        raise _Reply(HTTPStatus.BAD_REQUEST, {"error": f"{name} {value}: {bound}"})
    return value
