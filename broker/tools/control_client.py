"""A client of the control endpoint (broker.control): fault rules from scripts, tests and ``trafka control``.

    trafka control --port 9093 faults add '{"action": "error", "api": "produce", "error": "NOT_LEADER_OR_FOLLOWER"}'
    trafka control --port 9093 faults wait 1 --hits 3
    trafka control --port 9093 faults list | remove 1 | clear
"""
from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.request
from collections.abc import Sequence
from urllib.parse import quote, urlencode


class ControlError(Exception):
    """The endpoint refused (its reason), or could not be reached."""


class ControlClient:
    def __init__(self, port: int, host: str = "127.0.0.1") -> None:
        self.base = f"http://{host}:{port}"

    def add(self, rule: dict[str, object]) -> dict[str, object]:
        return self._call("POST", "/faults", rule)

    def rules(self) -> list[dict[str, object]]:
        return self._call("GET", "/faults")["rules"]

    def remove(self, rule_id: int) -> None:
        self._call("DELETE", f"/faults/{rule_id}")

    def clear(self) -> None:
        self._call("DELETE", "/faults")

    def wait_for_hits(self, rule_id: int, hits: int = 1, timeout: float = 30.0) -> dict[str, object]:
        """The rule once it was hit ``hits`` times; ControlError when that takes longer than ``timeout`` s."""
        return self._call("GET", f"/faults/{rule_id}?hits={hits}&timeout_ms={int(timeout * 1000)}",
                          timeout=timeout + 10)

    def group(self, group_id: str, *, state: str | None = None, members: int | None = None,
              timeout: float = 30.0) -> dict[str, object]:
        """A group's state and member count; with ``state`` or ``members``, once the group has them."""
        query = {"state": state, "members": members}
        return self._call("GET", f"/groups/{quote(group_id, safe='')}{_query(query, timeout)}", timeout=timeout + 10)

    def partition(self, topic: str, partition: int, *, end_offset: int | None = None,
                  timeout: float = 30.0) -> dict[str, object]:
        """A partition's log end offset and high watermark; with ``end_offset``, once the end reached it."""
        path = f"/partitions/{quote(topic, safe='')}/{partition}{_query({'end_offset': end_offset}, timeout)}"
        return self._call("GET", path, timeout=timeout + 10)

    def clock(self) -> dict[str, object]:
        """The broker's time (``now_ms``, ``advanced_ms``) and whether it may be advanced (``controllable``)."""
        return self._call("GET", "/clock")

    def advance(self, seconds: float) -> dict[str, object]:
        """Move the time of a broker started with ``--controllable-clock`` ``seconds`` forward."""
        return self._call("POST", f"/clock/advance?seconds={seconds!r}")

    def cluster(self, action: str, node_id: int | None = None, **query: object) -> dict[str, object]:
        """A ``trafka cluster``'s control endpoint (trafka.broker.tools.cluster_control): ``cluster("brokers")``,
        ``cluster("pause", 2)``, ``cluster("isolate", 2, **{"from": "zookeeper"})``, ``cluster("heal")``,
        ``cluster("leader", topic=..., partition=..., broker=...)``."""
        if action == "brokers":
            return self._call("GET", "/brokers")
        if action == "heal":
            return self._call("POST", "/heal", timeout=120)
        if action == "leader":
            path = f"/partitions/{quote(str(query['topic']), safe='')}/{query['partition']}/leader"
            return self._call("POST", f"{path}?{urlencode({'broker': query['broker']})}", timeout=120)
        suffix = f"?{urlencode(query)}" if query else ""
        return self._call("POST", f"/brokers/{node_id}/{action}{suffix}", timeout=120)

    def _call(self, method: str, path: str, body: object = None, timeout: float = 30.0):
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.base + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return json.load(response)
        except urllib.error.HTTPError as exc:
            try:
                reason = json.load(exc).get("error", str(exc))
            except ValueError:
                reason = str(exc)
            raise ControlError(reason) from None
        except OSError as exc:
            raise ControlError(f"cannot reach the control endpoint at {self.base}: {exc}") from None


def _query(params: dict[str, object], timeout: float) -> str:
    given = {key: value for key, value in params.items() if value is not None}
    if not given:
        return ""
    return "?" + urlencode({**given, "timeout_ms": int(timeout * 1000)})


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="trafka control", description="fault rules and the clock of a broker "
                                     "started with --control-port")
    parser.add_argument("--port", type=int, required=True, help="the broker's --control-port")
    what = parser.add_subparsers(dest="what", required=True)
    faults = what.add_parser("faults").add_subparsers(dest="action", required=True)
    clock = what.add_parser("clock").add_subparsers(dest="action", required=True)
    clock.add_parser("show", help="the broker's time (JSON)")
    advance = clock.add_parser("advance", help="move the time of a broker started with --controllable-clock "
                                               "forward")
    advance.add_argument("seconds", type=float)
    cluster = what.add_parser("cluster", help="the brokers of a trafka cluster started with --control-port")
    on_cue = cluster.add_subparsers(dest="action", required=True)
    on_cue.add_parser("brokers", help="each broker: id, address, running, paused (JSON)")
    for action, description in (("stop", "a clean stop"), ("start", "start it again"), ("kill", "SIGKILL"),
                                ("restart", "stop and start"), ("pause", "SIGSTOP: frozen where it stands"),
                                ("resume", "SIGCONT"), ("isolate", "cut it off (a cluster started with --network)")):
        command = on_cue.add_parser(action, help=description)
        command.add_argument("broker", type=int)
        if action == "isolate":
            command.add_argument("--from", dest="from_", choices=("everything", "brokers", "zookeeper"),
                                 default="everything")
    on_cue.add_parser("heal", help="every link back")
    leader = on_cue.add_parser("leader", help="make a broker the leader of a partition")
    leader.add_argument("topic")
    leader.add_argument("partition", type=int)
    leader.add_argument("broker", type=int)
    faults.add_parser("list", help="the rules, with their hits (JSON, one a line)")
    add = faults.add_parser("add", help="add a rule given as JSON; prints it with its id")
    add.add_argument("rule")
    remove = faults.add_parser("remove", help="remove a rule")
    remove.add_argument("id", type=int)
    faults.add_parser("clear", help="remove every rule")
    wait = faults.add_parser("wait", help="wait until a rule was hit N times")
    wait.add_argument("id", type=int)
    wait.add_argument("--hits", type=int, default=1)
    wait.add_argument("--timeout", type=float, default=30.0, help="seconds (default 30)")
    args = parser.parse_args(argv)
    client = ControlClient(args.port)
    try:
        if args.what == "cluster":
            if args.action in ("brokers", "heal"):
                answer = client.cluster(args.action)
            elif args.action == "leader":
                answer = client.cluster("leader", topic=args.topic, partition=args.partition, broker=args.broker)
            elif args.action == "isolate":
                answer = client.cluster("isolate", args.broker, **{"from": args.from_})
            else:
                answer = client.cluster(args.action, args.broker)
            print(json.dumps(answer))
        elif args.what == "clock":
            print(json.dumps(client.clock() if args.action == "show" else client.advance(args.seconds)))
        elif args.action == "list":
            for rule in client.rules():
                print(json.dumps(rule))
        elif args.action == "add":
            try:
                rule = json.loads(args.rule)
            except ValueError as exc:
                raise ControlError(f"the rule is not JSON: {exc}") from None
            print(json.dumps(client.add(rule)))
        elif args.action == "remove":
            client.remove(args.id)
        elif args.action == "clear":
            client.clear()
        else:
            print(json.dumps(client.wait_for_hits(args.id, args.hits, args.timeout)))
    except ControlError as exc:
        print(f"trafka control: {exc}", file=sys.stderr)
        return 1
    return 0
