"""The rule on skipped tests (compat_tests/skip_policy.py): only the allow-list may skip."""
from __future__ import annotations

from pathlib import Path

import pytest

from compat_tests.skip_policy import ALLOW_LIST, allowed_patterns, unexpected_skips


def skipped(nodeid: str, reason: str) -> pytest.TestReport:
    return pytest.TestReport(nodeid, ("x.py", 1, "x"), {}, "skipped", ("x.py", 1, f"Skipped: {reason}"), "call")


def test_skips_off_the_allow_list_are_reported(tmp_path: Path):
    allow_list = tmp_path / "allowed-skips"
    allow_list.write_text("# why\ncompat_tests/test_restart.py::*  # the port was taken\n\n")
    patterns = allowed_patterns(allow_list)

    assert patterns == ["compat_tests/test_restart.py::*"]
    assert unexpected_skips([skipped("compat_tests/test_restart.py::test_x[a]", "port taken"),
                             skipped("wire/tests/test_codegen.py::test_y", "no specs")], patterns) == [
        "wire/tests/test_codegen.py::test_y: Skipped: no specs"]


def test_the_allow_list_is_short_and_commented():
    lines = ALLOW_LIST.read_text().splitlines()
    patterns = allowed_patterns()
    assert 0 < len(patterns) <= 10
    assert sum(line.startswith("#") for line in lines) >= len(patterns)
