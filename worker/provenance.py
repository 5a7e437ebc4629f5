"""What produced a result: the versions recorded in every job's JSON sidecar, the
``GeneratedBy`` entry of BIDS derivatives, and checksums of inputs."""

from __future__ import annotations

import hashlib
import platform
from importlib import metadata
from pathlib import Path

__all__ = ["package_versions", "generated_by", "file_sha256"]

# Project-URL labels that name the source code, in order of preference.
_CODE_URL_LABELS = ("source", "repository", "homepage")


def package_versions(*extra: str) -> dict[str, str]:
    """Python, fibertensor, numpy and numba versions, plus the packages named in ``extra``."""
    versions = {"python": platform.python_version()}
    for name in ("fibertensor", "numpy", "numba", *extra):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def generated_by() -> dict[str, str]:
    """This software as a BIDS ``GeneratedBy`` entry (BIDS 1.4+, "Derived dataset and
    pipeline description"): ``Name``, ``Version`` and, when the installed package declares
    one (``[project.urls]`` Source, Repository or Homepage), ``CodeURL``."""
    entry = {"Name": "fibertensor", "Version": package_versions()["fibertensor"]}
    try:
        urls = metadata.metadata("fibertensor").get_all("Project-URL") or []
    except metadata.PackageNotFoundError:
        urls = []
    labelled = {label.strip().lower(): url.strip() for label, _, url in (u.partition(",") for u in urls)}
    code_url = next((labelled[label] for label in _CODE_URL_LABELS if label in labelled), None)
    if code_url:
        entry["CodeURL"] = code_url
    return entry


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks (hashlib releases the GIL on each)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
