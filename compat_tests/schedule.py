"""The longest test modules run first, loaded by pytest for every run (``-p compat_tests.schedule`` in
pyproject.toml).

``make test`` runs the suite on several workers with ``--dist loadfile --no-loadscope-reorder``: each
module goes whole to the next free worker, in collection order (pytest-xdist's default order is by number
of tests, which says little about how long a module takes). Collected alphabetically, the longest modules
came last and one worker ran them alone while the others had finished. Handing them out first, longest
first, lets the workers end together; the many short modules fill in behind them.
"""
from __future__ import annotations

from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parent.parent

#: The modules that take 45 s or more of one worker, longest first (from ``pytest --durations=0`` on the
#: two-core machine CI runs on; their order matters more than the exact figures).
LONGEST_FIRST = (
    "compat_tests/test_security_clients.py",    # 157 s
    "compat_tests/test_cluster_faults.py",      # 101 s
    "compat_tests/test_differential_quotas.py",  # 88 s
    "compat_tests/test_differential_offsets.py",  # 84 s
    "compat_tests/test_sasl.py",                # 84 s
    "compat_tests/test_nemesis_links.py",       # 82 s
    "compat_tests/test_quotas.py",              # 77 s
    "compat_tests/test_cluster_chaos.py",       # 66 s
    "compat_tests/test_spark.py",               # 66 s
    "compat_tests/test_transactions.py",        # 64 s
    "compat_tests/test_differential_share_fetch.py",  # 59 s
    "compat_tests/test_secure_broker.py",       # 56 s
    "compat_tests/test_nemesis.py",             # 54 s
    "compat_tests/test_groups_consumers.py",    # 51 s
    "compat_tests/test_oauthbearer_jwks.py",    # 50 s
    "compat_tests/test_cluster_control.py",     # 49 s
    "compat_tests/test_install.py",             # 47 s
    "compat_tests/test_share_consumers.py",     # 46 s
)
_RANK = {path: rank for rank, path in enumerate(LONGEST_FIRST)}


def pytest_configure(config: pytest.Config) -> None:
    missing = [path for path in LONGEST_FIRST if not (CHECKOUT / path).is_file()]
    if missing:
        raise pytest.UsageError(f"compat_tests/schedule.py names modules that are gone: {', '.join(missing)}")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Move the listed modules' tests to the front, longest module first; every other test keeps its
    place after them, and each module's tests keep their own order."""
    items.sort(key=lambda item: _RANK.get(item.nodeid.split("::", 1)[0], len(LONGEST_FIRST)))
