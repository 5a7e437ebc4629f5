"""gpu.cpu_parallel with processes sharing one numba cache: on a fresh cache, two job
processes that call the loops from several threads at once; after a source change, a process
that loads a loop while another saves it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from numba import get_thread_id, prange

from gpu.conv.direct import direct_conv2d
from tests.gpu.cold_cache_child import CHUNKS, PEAKS_CASE, conv_inputs
from tests.gpu.peaks.test_backend_cpu import OUTPUTS, stored

ROOT = Path(__file__).resolve().parents[2]


def test_processes_on_a_cold_cache_compile_each_loop_once_and_get_the_reference_outputs(tmp_path):
    """Two processes (tests/gpu/cold_cache_child.py) start at once on a fresh cache, each
    calling the lmax-8 SS-HOPM loop from three threads and the Tucker core loop from a
    fourth, as two job processes of a worker (or two xdist workers) do when nothing is
    compiled yet."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba-cache"), "PYTHONPATH": str(ROOT)}
    outs = [tmp_path / f"process{i}.npz" for i in range(2)]
    children = [subprocess.Popen([sys.executable, "-m", "tests.gpu.cold_cache_child", str(out)], cwd=ROOT, env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for out in outs]
    for child in children:
        output, _ = child.communicate(timeout=600)
        assert child.returncode == 0, output
    results = [np.load(out) for out in outs]
    # One process compiled each loop; the other waited on the cache's lock and loaded it.
    for loop in ("peaks", "conv"):
        assert sorted(int(r[f"{loop}_compiled"]) for r in results) == [0, 1], loop
        assert sorted(int(r[f"{loop}_loaded"]) for r in results) == [0, 1], loop
    x, core = conv_inputs()
    conv_reference = direct_conv2d(x, core, padding=1)
    for r in results:
        for chunk in CHUNKS:
            for key in OUTPUTS:
                np.testing.assert_array_equal(r[f"peaks{chunk}_{key}"], stored(PEAKS_CASE, key),
                                              err_msg=f"chunks of {chunk}: {key}")
        assert np.abs(r["conv"] - conv_reference).max() / np.abs(conv_reference).max() < 1e-5


VERSIONED_LOOP = """from numba import njit, prange


@njit(parallel=True, cache=True)
def fill(out):
    for i in prange(out.shape[0]):
        out[i] = {version}
"""


def _child(module: str, role: str, env: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.gpu.cache_race_child", module, role], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _printed(child: subprocess.Popen) -> float:
    output, _ = child.communicate(timeout=600)
    assert child.returncode == 0, output
    return float(output.split()[-1])


def test_a_process_never_runs_the_old_code_of_a_loop_another_is_saving(tmp_path):
    """numba writes a function's cache index before its data: a process reading between the
    two would load the data file the index names, which after a source change is the old
    version's. Version 1 of a loop is cached, then its source becomes version 2; while a
    writer process saves version 2 (its data write held back 2 s), a reader calls the loop:
    it waits for the writer and runs version 2 (tests/gpu/cache_race_child.py)."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba-cache"), "PYTHONPATH": str(ROOT)}
    source = tmp_path / "versioned_loop.py"
    source.write_text(VERSIONED_LOOP.format(version=1.0))
    assert _printed(_child(str(tmp_path), "first", env)) == 1.0
    source.write_text(VERSIONED_LOOP.format(version=2.0) + "# version 2\n")  # another size: numba sees a new source
    writer, reader = _child(str(tmp_path), "writer", env), _child(str(tmp_path), "reader", env)
    assert (_printed(writer), _printed(reader)) == (2.0, 2.0)


def _thread_ids(out):
    for i in prange(out.shape[0]):
        out[i] = get_thread_id()


def test_a_loop_can_run_on_fewer_threads_and_the_count_comes_back():
    """``threads=1`` runs every iteration on the calling thread of the team; the runner's
    thread count is the full one again after the call."""
    from numba import get_num_threads, njit

    from gpu.cpu_parallel import _the_runner, run_parallel_loop

    loop = njit(parallel=True)(_thread_ids)
    ids = np.full(4096, -1, np.int64)
    run_parallel_loop(loop, ids, threads=1)
    assert set(ids.tolist()) == {0}
    assert _the_runner().submit(get_num_threads).result() == get_num_threads()
    run_parallel_loop(loop, ids)
    assert ids.min() >= 0 and ids.max() < get_num_threads()
