"""numba's on-disk cache shared by processes: a function's index updated under a lock, its
machine code written before the index names it, and an entry run only for the argument types
it was compiled for. Importing this module makes it so, for every ``cache=True`` function of
the process; each module that defines one imports it (the parallel loops' through
:mod:`gpu.cpu_parallel`).

numba saves a function's machine code for new argument types by reading the function's
index, taking the first data file number the index does not name, writing the index, then
the data file (``IndexDataCacheFile.save``). Two processes that compile two signatures of one
function at once (a cold cache under pytest-xdist, a worker's job processes) both read the
index before either writes it and take the same number: one's index and the other's data
survive, and every process that later loads the first signature from the cache runs the
machine code of the second. For an array typed contiguous there and strided here (the peaks
QC picture's colour pass on a flipped slice) that code reads the wrong voxels, and past the
array's end, whatever memory held: pictures that differ from run to run in one process.

numba also judges an entry fresh by the function's own source file alone, so an edit of a
module the function calls (the FMLS math under the fixels CPU loop, a branch switched in a
checkout) left the old machine code running: here a function of this package is stamped with
all of the package's sources as well.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import itertools
from pathlib import Path

from numba.core import caching, sigutils

__all__: list[str] = []


def _save(self, key, data) -> None:
    """``IndexDataCacheFile.save`` as one step among processes: the index read, the data
    written, then the index naming it, under an exclusive lock beside the index."""
    with open(f"{self._index_path}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or the process dies
        overloads = self._load_index()
        name = overloads.get(key)
        if name is None:
            taken = set(overloads.values())
            name = next(n for n in map(self._data_name, itertools.count(1)) if n not in taken)
        self._save_data(name, data)
        if overloads.get(key) != name:
            self._save_index({**overloads, key: name})


_load_overload = caching.FunctionCache.load_overload


def _checked_load_overload(self, sig, target_context):
    """A cache entry of a CPU function, or None (compile) when its machine code was compiled
    for other argument types than ``sig`` (an index and data file that two processes wrote
    crosswise before this module existed)."""
    loaded = _load_overload(self, sig, target_context)
    if loaded is None or tuple(loaded.signature.args) == tuple(sigutils.normalize_signature(sig)[0]):
        return loaded
    return None


#: The package whose functions' entries are stamped with all its sources.
_SOURCES = Path(__file__).resolve().parent


@functools.cache
def _sources_stamp(root: Path) -> str:
    """sha256 of the relative path, modification time and size of every Python source under
    ``root`` (once a process; as numba stamps a file, without reading it)."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        stat = path.stat()
        digest.update(f"{path.relative_to(root)}:{stat.st_mtime_ns}:{stat.st_size};".encode())
    return digest.hexdigest()


_file_stamp = caching._SourceFileBackedLocatorMixin.get_source_stamp


def _package_stamp(self):
    """numba's stamp of a cached function's source file, with :func:`_sources_stamp` beside
    it for a function of this package: an index saved under other sources is stale."""
    stamp = _file_stamp(self)
    if Path(self._py_file).resolve().is_relative_to(_SOURCES):
        return stamp, _sources_stamp(_SOURCES)
    return stamp


caching.IndexDataCacheFile.save = _save
caching.FunctionCache.load_overload = _checked_load_overload
caching._SourceFileBackedLocatorMixin.get_source_stamp = _package_stamp
