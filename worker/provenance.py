"""What produced a result: the versions recorded in every job's JSON sidecar, the
``GeneratedBy`` entry of BIDS derivatives, and checksums of inputs."""

from __future__ import annotations

import hashlib
import platform
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import BinaryIO

__all__ = ["package_versions", "generated_by", "file_sha256", "hash_to_end", "read_and_hash_into"]

# Project-URL labels that name the source code, in order of preference.
_CODE_URL_LABELS = ("source", "repository", "homepage")


def package_versions(*extra: str) -> dict[str, str]:
    """Python, fibertensor, numpy and numba versions, plus the packages named in ``extra``."""
    names = ("fibertensor", "numpy", "numba", *extra)
    return {"python": platform.python_version(), **{name: _version(name) for name in names}}


@lru_cache(maxsize=None)
def _version(name: str) -> str:
    # Read once a process: importlib.metadata scans every installed distribution each time.
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def generated_by() -> dict[str, str]:
    """This software as a BIDS ``GeneratedBy`` entry (BIDS 1.4+, "Derived dataset and
    pipeline description"): ``Name``, ``Version`` and, when the installed package declares
    one (``[project.urls]`` Source, Repository or Homepage), ``CodeURL``."""
    entry = {"Name": "fibertensor", "Version": _version("fibertensor")}
    code_url = _code_url()
    if code_url:
        entry["CodeURL"] = code_url
    return entry


@lru_cache(maxsize=None)
def _code_url() -> str | None:
    try:
        urls = metadata.metadata("fibertensor").get_all("Project-URL") or []
    except metadata.PackageNotFoundError:
        urls = []
    labelled = {label.strip().lower(): url.strip() for label, _, url in (u.partition(",") for u in urls)}
    return next((labelled[label] for label in _CODE_URL_LABELS if label in labelled), None)


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks (hashlib releases the GIL on each)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        hash_to_end(handle, digest)
    return digest.hexdigest()


# docs/decisions/checksums-option.md
def hash_to_end(handle: BinaryIO, digest: "hashlib._Hash") -> None:
    """Update ``digest`` with the rest of the open file ``handle``, read in 1 MiB blocks: what
    a reader that hashes the bytes it takes in (the input's checksum in the same read as its
    data) has left behind its data."""
    for block in iter(lambda: handle.read(1 << 20), b""):
        digest.update(block)


# Pieces a read hands to the hashing thread: small enough that the last one's hash, which
# nothing overlaps, is short; large enough that a piece costs the threads little.
_HASHED_PIECE = 4 << 20


def read_and_hash_into(handle: BinaryIO, view: memoryview, digest: "hashlib._Hash") -> int:
    """``handle.readinto(view)`` that also updates ``digest`` with the bytes read, each piece
    hashed on a thread of its own while the next is read (both release the interpreter
    lock): the read then takes about as long as the hash alone, not the two one after the
    other. Returns the bytes read (fewer than ``len(view)`` where the file ends). A view of
    one piece or less is read and hashed here (a header's few bytes start no thread)."""
    from concurrent.futures import ThreadPoolExecutor

    if len(view) <= _HASHED_PIECE:
        count = handle.readinto(view)
        digest.update(view[:count])
        return count
    filled = 0
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="sha256") as hasher:
        hashed = None
        while filled < len(view):
            count = handle.readinto(view[filled:filled + _HASHED_PIECE])
            if not count:
                break
            # one thread: the pieces are hashed in the order they were read
            hashed = hasher.submit(digest.update, view[filled:filled + count])
            filled += count
        if hashed is not None:
            hashed.result()
    return filled
