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
from gpu.peaks.search import PeaksOptions, _kernel_params
from gpu.peaks.sshopm_layout import N_FPARAMS, N_STATS
from gpu.peaks.sshopm_starts import hemisphere_starts, start_neighbors
from gpu.peaks.symmetric_tensor import sh_to_tensor_matrix

REFERENCE = Path(__file__).with_name("data") / "sshopm_cpu_reference.npz"

# name: (spatial shape, lmax, relative noise, options); the noisy phantom has noise SD 0.3 ×
# each voxel's l = 0 coefficient on every coefficient, as in python3 -m bench.peaks noisy. The
# file also holds cases of search modes the engine no longer has; only these are read.
CASES = {
    "clean": ((6, 6, 4), 8, 0.0, PeaksOptions()),
    "noisy": ((8, 8, 6), 8, 0.3, PeaksOptions()),
}
INPUTS = ("coeffs", "sh2t", "starts", "neighbors", "fparams", "iparams")
OUTPUTS = ("directions", "amplitudes", "count", "stats", "hist")

# The reference's loop took more settings than the one search it now has: float parameters
# [the N_FPARAMS of today, cos of the basin angle], integer parameters [max iterations, shift
# mode, Newton steps, local-max seeding, npeaks, bounded], a shift per voxel (alphas), and
# N_STATS statistics per voxel followed by starts skipped and climbs stopped. Its cases ran
# today's search: no basin stop (cos 2), GEAP's adaptive shift (mode 0), Newton steps, no
# bound, no fixed shift; nothing skipped or stopped.
_STORED_IPARAMS = [0, 3, 4]  # of today's P_MAX_ITER, P_SEED_LOCAL, P_NPEAKS
_STORED_SEARCH = {"fparams": ([N_FPARAMS], [2.0]), "iparams": ([1, 2, 5], [0, 1, 0])}


def stored(name: str, key: str) -> np.ndarray:
    """Input or output ``key`` of case ``name`` in today's layout, after checking that the
    entries it leaves out are those of today's search."""
    value = np.load(REFERENCE)[f"{name}_{key}"]
    if key in _STORED_SEARCH:
        positions, expected = _STORED_SEARCH[key]
        np.testing.assert_array_equal(value[positions], expected, err_msg=f"{name}: {key} of another search")
        return value[:N_FPARAMS] if key == "fparams" else value[_STORED_IPARAMS]
    if key == "stats":
        np.testing.assert_array_equal(value[:, N_STATS:], 0, err_msg=f"{name}: starts skipped or climbs stopped")
        return value[:, :N_STATS]
    return value


def inputs(name: str) -> dict[str, np.ndarray]:
    """The loop's arguments for case ``name``, as gpu.peaks.search.sshopm_peaks makes them."""
    shape, lmax, noise, options = CASES[name]
    coeffs = fod_phantom(shape, lmax, relative_noise=noise, seed=0)["sh"].reshape(-1, (lmax + 1) * (lmax + 2) // 2).T
    fparams, iparams = _kernel_params(options)
    return {"coeffs": coeffs, "sh2t": sh_to_tensor_matrix(lmax, "mrtrix"), "starts": hemisphere_starts(options.starts),
            "neighbors": start_neighbors(options.starts), "fparams": fparams, "iparams": iparams}


def run_case(name: str, chunk_voxels: int = 16384) -> dict[str, np.ndarray]:
    lmax, options = CASES[name][1], CASES[name][3]
    return run_sshopm_cpu(lmax, *(stored(name, key) for key in INPUTS), options.npeaks, chunk_voxels=chunk_voxels)


def test_the_stored_cases_ran_without_a_shift_of_their_own():
    for name in CASES:
        np.testing.assert_array_equal(np.load(REFERENCE)[f"{name}_alphas"], 0.0, err_msg=name)


@pytest.mark.parametrize("name", CASES)
def test_outputs_are_bit_identical_to_the_sequential_search(name):
    got = run_case(name)
    for key in OUTPUTS:
        np.testing.assert_array_equal(got[key], stored(name, key), err_msg=f"{name}: {key}")


def test_chunking_does_not_change_the_outputs():
    whole = run_case("noisy")
    chunked = run_case("noisy", chunk_voxels=37)
    for key in OUTPUTS:
        np.testing.assert_array_equal(chunked[key], whole[key], err_msg=key)


@pytest.mark.parametrize("name", CASES)
def test_stored_inputs_are_the_cases(name):
    """The stored inputs are what ``inputs`` makes, to rounding (see the module docstring)."""
    for key, value in inputs(name).items():
        np.testing.assert_allclose(stored(name, key), value, rtol=1e-6, atol=1e-9, err_msg=f"{name}: {key}")


def test_loops_from_several_threads_give_each_its_own_outputs():
    """Jobs prepared in threads call the loop at once (chunk by chunk, through
    gpu.cpu_parallel): each thread gets the outputs of its case run alone."""
    names = ["clean", "noisy", "clean", "noisy"]
    with ThreadPoolExecutor(len(names)) as pool:
        results = list(pool.map(lambda name: run_case(name, chunk_voxels=29), names))
    for name, got in zip(names, results):
        for key in OUTPUTS:
            np.testing.assert_array_equal(got[key], stored(name, key), err_msg=f"{name}: {key}")
