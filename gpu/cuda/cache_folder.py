"""The kernel cache folder, which holds generated kernel sources and saved cubins, and the
one way files are written into it.

The folder is ``$FIBERTENSOR_KERNEL_CACHE``, else ``$XDG_CACHE_HOME/fibertensor/kernels``,
else ``~/.cache/fibertensor/kernels``.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["CACHE_ENV", "kernel_cache_dir", "write_once"]

#: Environment variable naming the kernel cache folder.
CACHE_ENV = "FIBERTENSOR_KERNEL_CACHE"


def kernel_cache_dir() -> Path:
    """The folder that holds generated kernel sources and cubins (module docstring)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "fibertensor" / "kernels"


def write_once(path: Path, data: bytes) -> None:
    """Put ``data`` at ``path`` (folders made), written under a temporary name and linked
    into place: a reader sees all of the file or none, and a file already there (written by
    a concurrent process, from the same inputs) stays as it is, modification time included."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
        os.chmod(temporary, 0o644)
        os.link(temporary, path)
    except FileExistsError:
        pass
    finally:
        os.unlink(temporary)
