"""Preparing sshopm_peaks ahead of the data (prepare_peaks, start_preparing): the same peaks,
bit for bit, on the CPU backend and the CUDA kernels (simulator); kernels loaded by the
preparation are the ones the run launches; mismatches and failures surface in the caller."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from gpu.peaks import sshopm_generated_cpu
from gpu.peaks.phantom import fod_phantom
from gpu.peaks.search import PeaksOptions, _one_fiber_voxel, prepare_peaks, sshopm_peaks, start_preparing


def assert_identical(got, expected) -> None:
    for name in ("directions", "amplitudes", "count"):
        np.testing.assert_array_equal(getattr(got, name), getattr(expected, name), err_msg=name)
    assert {k: v for k, v in got.stats.items() if k != "seconds"} == \
        {k: v for k, v in expected.stats.items() if k != "seconds"}


@pytest.mark.parametrize("backend, shape, options", [
    ("cpu", (6, 5, 4), PeaksOptions()),
    ("cpu", (6, 5, 4), PeaksOptions(shift="fixed", threshold=0.05, npeaks=4)),
    ("cuda", (2, 2, 1), PeaksOptions(starts=32)),
])
def test_prepared_run_equals_unprepared_run(backend, shape, options):
    sh = fod_phantom(shape, 4, seed=5)["sh"]
    sh = np.asfortranarray(sh)  # as a NIfTI volume is read: voxels in x-fastest order
    mask = np.ones(shape, bool)
    mask[0] = False
    expected = sshopm_peaks(sh, mask=mask, options=options, backend=backend)
    future = start_preparing(4, "mrtrix", options, backend)
    from_future = sshopm_peaks(sh, mask=mask, options=options, backend=backend, prepared=future)
    assert_identical(from_future, expected)
    prepared = future.result()
    assert prepared.seconds > 0 and from_future.stats["seconds"]["prepare_kernels"] == prepared.seconds
    # A preparation serves any number of volumes of its lmax and options.
    assert_identical(sshopm_peaks(sh, mask=mask, options=options, backend=backend, prepared=prepared), expected)
    for thread in threading.enumerate():
        if thread.name.startswith("prepare-peaks"):
            thread.join(timeout=60)
            assert not thread.is_alive()


@pytest.mark.parametrize("lmax", [4, 8])
def test_one_fiber_voxel_has_one_peak_along_z_of_its_amplitude(lmax):
    """The voxel prepare_peaks runs: its only maximum is the fiber (so its seeds climb and
    every kernel runs), of the amplitude asked for; checked against the SH series itself."""
    coeffs = _one_fiber_voxel(lmax, 3.5)
    result = sshopm_peaks(coeffs.T, backend="cpu", options=PeaksOptions(relative_threshold=0.0))
    assert result.count.tolist() == [1]
    np.testing.assert_allclose(np.abs(result.directions[0, 0]), [0, 0, 1], atol=1e-6)
    np.testing.assert_allclose(result.amplitudes[0, 0], 3.5, rtol=1e-6)
    assert result.stats["starts_climbed_per_voxel"] >= 1


def test_prepare_loads_the_cpu_loop_the_run_uses():
    """After preparing, the run finds its compiled loop in memory: no new signature."""
    loop = sshopm_generated_cpu.sshopm_cpu_m4
    prepared = prepare_peaks(4, backend="cpu")
    signatures = set(loop.overloads)
    assert signatures
    sshopm_peaks(fod_phantom((3, 2, 2), 4, seed=1)["sh"], backend="cpu", prepared=prepared)
    assert set(loop.overloads) == signatures


def test_mismatched_preparation_is_refused():
    prepared = prepare_peaks(4, backend="cpu", options=PeaksOptions(starts=64))
    sh = fod_phantom((2, 2, 1), 4, seed=1)["sh"]
    with pytest.raises(ValueError, match=r"prepared is for lmax 4, basis 'mrtrix', backend 'cpu' .*starts=64"):
        sshopm_peaks(sh, backend="cpu", prepared=prepared)
    with pytest.raises(ValueError, match=r"not for this call's lmax 4, basis 'dipy'"):
        sshopm_peaks(sh, backend="cpu", basis="dipy", options=PeaksOptions(starts=64), prepared=prepared)
    with pytest.raises(ValueError, match=r"not for this call's lmax 8"):
        sshopm_peaks(fod_phantom((2,), 8)["sh"], backend="cpu", options=PeaksOptions(starts=64), prepared=prepared)


def test_a_failed_preparation_raises_in_the_caller():
    future = start_preparing(4, "mrtrix", PeaksOptions(), "gpu")
    with pytest.raises(ValueError, match="backend must be auto, cpu or cuda, not 'gpu'"):
        sshopm_peaks(fod_phantom((2,), 4)["sh"], backend="cpu", prepared=future)
