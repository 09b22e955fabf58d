"""A kafkajs consumer group (compat_tests/js/groups.js, one node process, three consumers) against a
real trafka process: every partition owned once, every message consumed once with synchronous commits."""
from __future__ import annotations

import base64
import json
import subprocess
import uuid
from pathlib import Path

import pytest

from compat_tests.test_groups_consumers import produce

GROUPS_JS = Path(__file__).parent / "js" / "groups.js"


def run_group(bootstrap: str, topic: str, members: int, expected: int) -> dict:
    if not (GROUPS_JS.parent / "node_modules" / "kafkajs").is_dir():
        pytest.skip("kafkajs is not installed: run compat_tests/setup.sh")
    command = {"bootstrap": bootstrap, "topic": topic, "groupId": f"group-{uuid.uuid4().hex[:8]}",
               "members": members, "expected": expected, "timeoutMs": 60000}
    completed = subprocess.run(["node", str(GROUPS_JS)], input=json.dumps(command), capture_output=True, text=True,
                               timeout=120, cwd=GROUPS_JS.parent)
    output = json.loads(completed.stdout)
    assert output["ok"], f"{output['error']}\nstderr:\n{completed.stderr[-3000:]}"
    return output["result"]


def test_kafkajs_group_of_three_reads_each_message_once(broker, topic):
    name = topic(partitions=6)
    produced = produce(broker.bootstrap, name, 20)
    result = run_group(broker.bootstrap, name, 3, len(produced))
    owned = sorted(p for partitions in result["assignments"].values() for p in partitions)
    assert owned == list(range(6)) and len(result["assignments"]) == 3
    values = sorted(base64.b64decode(value) for _, _, _, value in result["consumed"])
    assert values == sorted(produced), "messages were skipped or read twice"
