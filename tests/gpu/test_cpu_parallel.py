"""gpu.cpu_parallel on a cold numba cache: two processes (tests/gpu/cold_cache_child.py) start
at once on a fresh ``NUMBA_CACHE_DIR``, each calling the lmax-4 SS-HOPM loop from three
threads and the Tucker core loop from a fourth, as two job processes of a worker (or two
xdist workers) do when nothing is compiled yet."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from gpu.conv.direct import direct_conv2d
from tests.gpu.cold_cache_child import CHUNKS, PEAKS_CASE, conv_inputs
from tests.gpu.peaks.test_backend_cpu import OUTPUTS, REFERENCE

ROOT = Path(__file__).resolve().parents[2]


def test_processes_on_a_cold_cache_compile_each_loop_once_and_get_the_reference_outputs(tmp_path):
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
    reference = np.load(REFERENCE)
    x, core = conv_inputs()
    conv_reference = direct_conv2d(x, core, padding=1)
    for r in results:
        for chunk in CHUNKS:
            for key in OUTPUTS:
                np.testing.assert_array_equal(r[f"peaks{chunk}_{key}"], reference[f"{PEAKS_CASE}_{key}"],
                                              err_msg=f"chunks of {chunk}: {key}")
        assert np.abs(r["conv"] - conv_reference).max() / np.abs(conv_reference).max() < 1e-5
