"""Package attributes imported on first use, for the ``__init__`` files whose packages must stay cheap
to import (``import monitor.gpu`` must not pay for pydantic, ``import trainer.loop`` not for MLflow,
``driftloop --help`` not for Evidently). One helper instead of a ``__getattr__`` per package:

    __getattr__, __dir__ = lazy_attributes(__name__, {"Daemon": "monitor.daemon.runtime.daemon",
                                                      "default_champion":
                                                          "monitor.daemon.runtime.wiring"})

A value is ``"module"`` (same attribute name there) or ``"module:attribute"``. Once imported, the
value is cached in the package's namespace, so later lookups are plain attribute reads.
"""
from __future__ import annotations

import importlib
import sys
from typing import Any, Callable


def lazy_attributes(package: str, where: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    def __getattr__(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, attribute = where[name].partition(":")
        value = getattr(importlib.import_module(module), attribute or name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(where) | set(vars(sys.modules[package])))

    return __getattr__, __dir__
