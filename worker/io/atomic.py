"""Files written so that no reader ever sees a partial one: write beside, then rename.

Job outputs, sidecars and ``job.json`` all go through here: a temporary name in the same
folder (same file system, so the rename is atomic), removed again if writing fails.
"""

from __future__ import annotations

import json
import os
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

__all__ = ["atomic_path", "write_bytes_atomic", "write_json_atomic"]

_COMPOUND_SUFFIXES = (".nii.gz", ".tar.gz")


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """A temporary path beside ``path`` with the same suffix (writers such as nibabel and
    numpy pick the format from it); renamed onto ``path`` when the block succeeds."""
    path = Path(path)
    suffix = next((s for s in _COMPOUND_SUFFIXES if path.name.endswith(s)), path.suffix)
    stem = path.name[: len(path.name) - len(suffix)] if suffix else path.name
    temporary = path.with_name(f".{stem}.{uuid.uuid4().hex}.partial{suffix}")
    try:
        yield temporary
        os.replace(temporary, path)
    except OSError as exc:
        if exc.errno is not None and (exc.filename is None or str(exc.filename) == str(temporary)):
            # an error names the file asked for (a full disk's write names none)
            raise type(exc)(exc.errno, exc.strerror, str(path)) from exc
        raise
    finally:
        temporary.unlink(missing_ok=True)


def write_bytes_atomic(path: Path, data: bytes, fsync: bool = False) -> Path:
    """Write ``data`` to ``path`` atomically; ``fsync`` also makes it durable before the rename."""
    with atomic_path(path) as temporary:
        with open(temporary, "wb") as handle:
            handle.write(data)
            if fsync:
                handle.flush()
                os.fsync(handle.fileno())
    return Path(path)


def write_json_atomic(path: Path, content: dict) -> Path:
    """``content`` as indented JSON (numpy scalars as floats), written atomically."""
    return write_bytes_atomic(path, json.dumps(content, indent=2, default=float).encode())
