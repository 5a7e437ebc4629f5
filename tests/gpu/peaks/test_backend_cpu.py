"""CPU backend (gpu.peaks.backend_cpu): bit for bit the peaks, statistics and iteration
histogram of the sequential search it replaced.

``data/sshopm_cpu_reference.npz`` holds, for each case of ``CASES``, the loop's inputs
(``inputs(name)`` on the machine that made it) and the float64 outputs of the CPU loop at
commit 0d9ad5a, which climbed one seed at a time and evaluated A x^(m−1) one start at a
time. The loop now climbs a voxel's seeds in lockstep and evaluates the polynomials and
steps over many points in vectorized loops; each value still comes from the same
floating-point operations in the same order, so every output must be identical, not merely
close. The inputs are stored because the SH→tensor matrix (LAPACK) and the phantom and
starts (vectorized sin/cos) may round differently on another CPU.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from gpu.peaks.backend_cpu import run_sshopm_cpu
from gpu.peaks.phantom import fod_phantom
from gpu.peaks.search import PeaksOptions, _prepared_arrays, convexity_shift
from gpu.peaks.symmetric_tensor import sh_to_tensor

REFERENCE = Path(__file__).with_name("data") / "sshopm_cpu_reference.npz"

# name: (spatial shape, lmax, relative noise, options); the noisy phantom has noise SD 0.3 ×
# each voxel's l = 0 coefficient on every coefficient, as in python3 -m bench.peaks noisy.
CASES = {
    "clean": ((6, 6, 4), 8, 0.0, PeaksOptions()),
    "noisy": ((8, 8, 6), 8, 0.3, PeaksOptions()),
    "noisy_bounded": ((8, 8, 6), 8, 0.3, PeaksOptions(bounded=True, basin_angle=5.0)),
    "noisy_lmax4_fixed_shift": ((4, 4, 4), 4, 0.3, PeaksOptions(shift="fixed", max_iter=100)),
    "noisy_lmax6_no_newton": ((4, 4, 4), 6, 0.3, PeaksOptions(newton=False, seeding="all", starts=50)),
}
INPUTS = ("coeffs", "sh2t", "alphas", "starts", "neighbors", "fparams", "iparams")
OUTPUTS = ("directions", "amplitudes", "count", "stats", "hist")


def inputs(name: str) -> dict[str, np.ndarray]:
    """The loop's arguments for case ``name``, as gpu.peaks.search.sshopm_peaks makes them."""
    shape, lmax, noise, options = CASES[name]
    coeffs = fod_phantom(shape, lmax, relative_noise=noise, seed=0)["sh"].reshape(-1, (lmax + 1) * (lmax + 2) // 2).T
    prepared = _prepared_arrays(lmax, "mrtrix", options, "cpu")
    alphas = convexity_shift(sh_to_tensor(coeffs.T, "mrtrix"), lmax) if options.shift == "fixed" else np.zeros(coeffs.shape[1])
    return {"coeffs": coeffs, "sh2t": prepared.sh2t, "alphas": alphas, "starts": prepared.starts,
            "neighbors": prepared.neighbors, "fparams": prepared.fparams, "iparams": prepared.iparams}


def run_case(name: str, chunk_voxels: int = 16384) -> dict[str, np.ndarray]:
    stored = np.load(REFERENCE)
    lmax, options = CASES[name][1], CASES[name][3]
    return run_sshopm_cpu(lmax, *(stored[f"{name}_{key}"] for key in INPUTS), options.npeaks, chunk_voxels=chunk_voxels)


@pytest.mark.parametrize("name", CASES)
def test_outputs_are_bit_identical_to_the_sequential_search(name):
    reference = np.load(REFERENCE)
    got = run_case(name)
    for key in OUTPUTS:
        np.testing.assert_array_equal(got[key], reference[f"{name}_{key}"], err_msg=f"{name}: {key}")


def test_chunking_does_not_change_the_outputs():
    whole = run_case("noisy")
    chunked = run_case("noisy", chunk_voxels=37)
    for key in OUTPUTS:
        np.testing.assert_array_equal(chunked[key], whole[key], err_msg=key)


@pytest.mark.parametrize("name", CASES)
def test_stored_inputs_are_the_cases(name):
    """The stored inputs are what ``inputs`` makes, to rounding (see the module docstring)."""
    stored = np.load(REFERENCE)
    for key, value in inputs(name).items():
        np.testing.assert_allclose(stored[f"{name}_{key}"], value, rtol=1e-6, atol=1e-9, err_msg=f"{name}: {key}")


def test_loops_from_several_threads_give_each_its_own_outputs():
    """Jobs prepared in threads call the loop at once (chunk by chunk, through
    gpu.cpu_parallel): each thread gets the outputs of its case run alone."""
    reference = np.load(REFERENCE)
    names = ["clean", "noisy", "noisy_bounded", "noisy"]
    with ThreadPoolExecutor(len(names)) as pool:
        results = list(pool.map(lambda name: run_case(name, chunk_voxels=29), names))
    for name, got in zip(names, results):
        for key in OUTPUTS:
            np.testing.assert_array_equal(got[key], reference[f"{name}_{key}"], err_msg=f"{name}: {key}")
