"""Output files compared by what they hold: a gzip file by the bytes it inflates to (header,
extensions and data, all of it), any other file by its bytes.

Our ``.gz`` writer deflates with ISA-L (:mod:`worker.io.gzip_blocks`), which does not promise
to encode the same block the same way every time: a 352-byte NIfTI header was once encoded
in 68 bytes instead of 67 in a spawned batch worker, the file inflating to the same bytes.
So a test of reproducibility compares the inflated files, which is what a job determines."""

from __future__ import annotations

import gzip
from pathlib import Path

__all__ = ["file_content", "assert_same_file"]


def file_content(path: Path) -> bytes:
    """The bytes ``path`` holds: inflated where it is gzip data."""
    content = Path(path).read_bytes()
    return gzip.decompress(content) if content[:2] == b"\x1f\x8b" else content


def assert_same_file(ours: Path, theirs: Path, label: str | None = None) -> None:
    """``ours`` holds the same bytes as ``theirs`` (inflated where they are gzip files)."""
    assert file_content(ours) == file_content(theirs), label or Path(ours).name
