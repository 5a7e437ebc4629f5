"""numba's cache shared by processes (gpu/numba_cache.py): two processes that save two
signatures of one function at once leave each signature its own machine code, and an entry
written crosswise is compiled anew rather than run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from tests.gpu.cache_signatures_child import colour_inputs

ROOT = Path(__file__).resolve().parents[2]


def _child(out: Path, role: str, env: dict, *alone: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.gpu.cache_signatures_child", str(out), role, *alone],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _expected_colours() -> np.ndarray:
    """⌊|d_1| · a_1 · scale⌋, 0 where no peak, computed in float32 by numpy."""
    directions, afd_max, count, scale = colour_inputs()
    expected = np.minimum(np.abs(directions[:, 0]) * (afd_max * scale)[:, None], np.float32(255)).astype(np.uint8)
    expected[count == 0] = 0
    return expected


def _colours(child: subprocess.Popen, out: Path) -> tuple[np.ndarray, int]:
    """The colours a child computed, and how many of its calls loaded from the cache."""
    output, _ = child.communicate(timeout=600)
    assert child.returncode == 0, output
    return np.load(out), int(output.split()[-1])


def test_a_signature_saved_beside_another_runs_its_own_machine_code(tmp_path):
    """The QC picture's colour pass is compiled for contiguous arrays (the fODF metrics) and
    for strided ones (a flipped slice): on a fresh cache, one process saves each with their
    index and data writes interleaved as two processes can interleave them
    (tests/gpu/cache_signatures_child.py); a third process then loads the strided one. Each
    gets the colours numpy computes, the third from the cache. numba alone gave both signatures one data file, the contiguous one's: the third process
    read the strided arrays as contiguous ones, past their ends."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba-cache"), "PYTHONPATH": str(ROOT)}
    expected = _expected_colours()
    outs = {role: tmp_path / f"{role}.npy" for role in ("strided", "contiguous", "reader")}
    writers = {role: _child(outs[role], role, env) for role in ("strided", "contiguous")}
    for role, child in writers.items():
        np.testing.assert_array_equal(_colours(child, outs[role])[0], expected, err_msg=role)
    colours, loaded = _colours(_child(outs["reader"], "reader", env), outs["reader"])
    np.testing.assert_array_equal(colours, expected)
    assert loaded == 1


def test_an_entry_whose_data_holds_another_signature_is_compiled_anew(tmp_path):
    """A cache written crosswise before the lock (the strided signature's index entry naming
    the contiguous one's data file, made here by swapping the two files): a process calling
    the strided signature compiles it and gets the right colours."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba-cache"), "PYTHONPATH": str(ROOT)}
    expected = _expected_colours()
    for role in ("contiguous", "strided"):  # data files 1 and 2
        np.testing.assert_array_equal(_colours(_child(tmp_path / f"{role}.npy", role, env, "alone"),
                                               tmp_path / f"{role}.npy")[0], expected, err_msg=role)
    first, second = sorted((tmp_path / "numba-cache").rglob("fodf_metrics_compiled._colour-*.nbc"))
    swap = first.with_suffix(".swap")
    first.rename(swap)
    second.rename(first)
    swap.rename(second)
    colours, loaded = _colours(_child(tmp_path / "reader.npy", "reader", env), tmp_path / "reader.npy")
    np.testing.assert_array_equal(colours, expected)
    assert loaded == 0


_CALLER = """
import sys
from pathlib import Path

import gpu.numba_cache

gpu.numba_cache._SOURCES = Path(sys.argv[1]).resolve()
sys.path.insert(0, str(Path(sys.argv[1]).parent))
from pkg.caller import through_callee

print(through_callee(3.0))
"""


def test_an_edit_of_a_called_module_makes_the_callers_entry_stale(tmp_path):
    """A cached function of the package calls an uncached one from another module of it; an
    edit of the callee alone (the caller's file untouched) reaches the next process. numba
    alone judged the caller's entry by the caller's file and ran the old callee."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "caller.py").write_text("from numba import njit\n\nfrom pkg.callee import scaled\n\n\n"
                                       "@njit(cache=True)\ndef through_callee(x):\n    return scaled(x) + 1.0\n")
    callee = package / "callee.py"
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba-cache"), "PYTHONPATH": str(ROOT)}

    def run() -> float:
        done = subprocess.run([sys.executable, "-c", _CALLER, str(package)], env=env, cwd=ROOT, capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        return float(done.stdout.split()[-1])

    callee.write_text("from numba import njit\n\n\n@njit\ndef scaled(x):\n    return 2.0 * x\n")
    assert run() == 7.0
    assert list((tmp_path / "numba-cache").rglob("*.nbi"))
    callee.write_text("from numba import njit\n\n\n@njit\ndef scaled(x):\n    return 10.0 * x\n")
    assert run() == 31.0
