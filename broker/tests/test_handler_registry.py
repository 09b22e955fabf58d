"""The handler registry: every handler module is declared, and registers exactly what it declares."""
from __future__ import annotations

import pkgutil

import broker.handlers
from broker.handlers import REGISTRY


def test_every_handler_module_is_declared_and_registers_its_declared_versions():
    REGISTRY.load_all()  # raises when a module's @handles differs from its declaration
    declared = {handler.module for handler in REGISTRY}
    modules = {
        f"broker.handlers.{info.name}"
        for info in pkgutil.iter_modules(broker.handlers.__path__)
        if info.name != "registry"
    }
    assert declared == modules
    assert all(handler.coroutine is not None for handler in REGISTRY)
