"""What produced a result: the versions recorded in every job's JSON sidecar."""

from __future__ import annotations

import platform
from importlib import metadata

__all__ = ["package_versions"]


def package_versions(*extra: str) -> dict[str, str]:
    """Python, fibertensor, numpy and numba versions, plus the packages named in ``extra``."""
    versions = {"python": platform.python_version()}
    for name in ("fibertensor", "numpy", "numba", *extra):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions
