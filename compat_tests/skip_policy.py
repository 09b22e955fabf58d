"""The suite's rule on skipped tests, loaded by pytest for every run (``-p compat_tests.skip_policy`` in
pyproject.toml): a test that skips fails the run unless its node id matches a pattern of the allow-list
in ``.ci/allowed-skips``, each entry with the reason it may skip. A skip CI silently accepts is a test
that silently stopped testing; the allow-list keeps the few skips that cannot be avoided in sight.
"""
from __future__ import annotations

from fnmatch import fnmatchcase
from pathlib import Path

import pytest

ALLOW_LIST = Path(__file__).resolve().parent.parent / ".ci" / "allowed-skips"


def allowed_patterns(path: Path = ALLOW_LIST) -> list[str]:
    """The node id patterns of the allow-list: one per line, after ``#`` comments are taken off."""
    patterns = []
    for line in path.read_text().splitlines():
        pattern = line.split("#", 1)[0].strip()
        if pattern:
            patterns.append(pattern)
    return patterns


def unexpected_skips(reports: list[pytest.TestReport], patterns: list[str]) -> list[str]:
    """``node id: reason`` of each skipped test no pattern allows."""
    unexpected = []
    for report in reports:
        if any(fnmatchcase(report.nodeid, pattern) for pattern in patterns):
            continue
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        unexpected.append(f"{report.nodeid}: {reason}")
    return unexpected


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    skipped = [r for r in reporter.stats.get("skipped", []) if isinstance(r, pytest.TestReport)]
    unexpected = unexpected_skips(skipped, allowed_patterns())
    if unexpected:
        reporter.write_sep("=", f"{len(unexpected)} skipped tests are not on the allow-list ({ALLOW_LIST.name})",
                           red=True)
        for line in unexpected:
            reporter.write_line(line)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
