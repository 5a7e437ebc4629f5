"""Lazy package exports, so that importing a light submodule (limits, schemas) never pulls in
numba or scipy through its package's ``__init__``."""

from __future__ import annotations

import importlib
from typing import Any, Callable

__all__ = ["lazy_exports"]


def lazy_exports(package: str, exports: dict[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that imports ``exports[name]`` (a submodule of ``package``) on first use."""

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{exports[name]}"), name)

    return __getattr__
