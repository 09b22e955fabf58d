"""The suite tests the checkout it belongs to, loaded by pytest for every run (``-p compat_tests.checkout``
in pyproject.toml): the tests import ``trafka`` and start ``python -m trafka``, which resolve through
the installed distribution. When that is not an editable install of this checkout (another clone, or a
wheel), the run stops at once and says so, instead of testing other code.
"""
from __future__ import annotations

from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parent.parent


def installed_elsewhere() -> str | None:
    """Where the ``trafka`` the tests would import comes from, when that is not this checkout."""
    try:
        import trafka.broker
    except ImportError:
        return "nowhere: trafka is not installed"
    location = Path(next(iter(trafka.broker.__path__))).resolve()
    return None if location == CHECKOUT / "broker" else str(location)


def pytest_configure(config: pytest.Config) -> None:
    elsewhere = installed_elsewhere()
    if elsewhere is not None:
        raise pytest.UsageError(
            f"these tests belong to {CHECKOUT}, but trafka is imported from {elsewhere}; "
            f"install this checkout first: pip install -e '{CHECKOUT}[test]' (make install-test)"
        )
