"""Preparing sshopm_peaks ahead of the data (prepare_peaks, run on a thread of the caller's):
the same peaks, bit for bit, on the CPU backend and the CUDA kernels (simulator); one
preparation per process and settings, however many threads ask at once; kernels loaded by
the preparation are the ones the run launches; failures surface in the caller."""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np
import pytest

from gpu.peaks import search, sshopm_generated_cpu
from gpu.peaks.phantom import fod_phantom
from gpu.peaks.search import PeaksOptions, _one_fiber_voxel, prepare_peaks, sshopm_peaks


def assert_identical(got, expected) -> None:
    for name in ("directions", "amplitudes", "count"):
        np.testing.assert_array_equal(getattr(got, name), getattr(expected, name), err_msg=name)
    assert {k: v for k, v in got.stats.items() if k != "seconds"} == \
        {k: v for k, v in expected.stats.items() if k != "seconds"}


@pytest.fixture
def fresh(monkeypatch) -> list[tuple]:
    """No preparation made yet in this process; returns the settings of each one made."""
    made = []

    def recorded(*args, _prepare=search._prepare):
        made.append(args)
        return _prepare(*args)

    monkeypatch.setattr(search, "_preparations", OrderedDict())
    monkeypatch.setattr(search, "_prepare", recorded)
    return made


@pytest.mark.parametrize("backend, shape, options", [
    ("cpu", (6, 5, 4), PeaksOptions()),
    ("cpu", (6, 5, 4), PeaksOptions(threshold=0.05, npeaks=4)),
    ("cuda", (2, 2, 1), PeaksOptions(starts=32)),
])
def test_a_run_prepared_on_another_thread_equals_one_that_prepares(backend, shape, options, fresh, monkeypatch):
    sh = fod_phantom(shape, 4, seed=5)["sh"]
    sh = np.asfortranarray(sh)  # as a NIfTI volume is read: voxels in x-fastest order
    mask = np.ones(shape, bool)
    mask[0] = False
    expected = sshopm_peaks(sh, mask, options, backend)
    assert fresh == [(4, "mrtrix", options, backend)]
    seconds = expected.stats["seconds"]
    assert 0 < seconds["prepare_kernels"] <= seconds["prepare"]
    monkeypatch.setattr(search, "_preparations", OrderedDict())
    ahead = threading.Thread(target=prepare_peaks, args=(4, "mrtrix", options, backend))
    ahead.start()
    got = sshopm_peaks(sh, mask, options, backend)  # waits for the thread's preparation, or finds it
    ahead.join()
    assert_identical(got, expected)
    assert len(fresh) == 2
    # A preparation serves any number of volumes of its lmax and options.
    assert_identical(sshopm_peaks(sh, mask, options, backend), expected)
    assert len(fresh) == 2


def test_threads_asking_at_once_share_one_preparation_per_settings(fresh):
    options = PeaksOptions(starts=64)
    threads = [threading.Thread(target=prepare_peaks, args=(4, basis, options, "cpu"))
               for basis in ("mrtrix", "dipy") for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(fresh) == [(4, "dipy", options, "cpu"), (4, "mrtrix", options, "cpu")]
    # other options, lmax or basis: a preparation of their own
    sshopm_peaks(fod_phantom((2, 2, 1), 4, seed=1)["sh"], backend="cpu", options=options)
    assert len(fresh) == 2
    sshopm_peaks(fod_phantom((2, 2, 1), 4, seed=1)["sh"], backend="cpu")
    sshopm_peaks(fod_phantom((2,), 8)["sh"], backend="cpu", options=options)
    assert fresh[2:] == [(4, "mrtrix", PeaksOptions(), "cpu"), (8, "mrtrix", options, "cpu")]


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


def test_prepare_loads_the_cpu_loop_the_run_uses(fresh):
    """After preparing, the run finds its compiled loop in memory: no new signature."""
    loop = sshopm_generated_cpu.sshopm_cpu_m4
    prepare_peaks(4, backend="cpu")
    signatures = set(loop.overloads)
    assert signatures
    sshopm_peaks(fod_phantom((3, 2, 2), 4, seed=1)["sh"], backend="cpu")
    assert set(loop.overloads) == signatures
    assert len(fresh) == 1


def test_a_failed_preparation_raises_in_the_caller_and_is_tried_again(fresh, monkeypatch):
    with pytest.raises(ValueError, match="backend must be auto, cpu or cuda, not 'gpu'"):
        prepare_peaks(4, "mrtrix", PeaksOptions(), "gpu")
    failures = [RuntimeError("no kernels today")]

    def fails_once(*args, _prepare=search._prepare):
        if failures:
            raise failures.pop()
        return _prepare(*args)

    monkeypatch.setattr(search, "_prepare", fails_once)
    sh = fod_phantom((2,), 4)["sh"]

    def prepare_ahead() -> None:
        with pytest.raises(RuntimeError, match="no kernels today"):
            prepare_peaks(4, "mrtrix", PeaksOptions(), "cpu")

    ahead = threading.Thread(target=prepare_ahead)
    ahead.start()
    ahead.join()  # failed on its thread, kept nothing
    assert not failures
    assert sshopm_peaks(sh, backend="cpu").count.sum() > 0
    failures.append(RuntimeError("no kernels today"))
    monkeypatch.setattr(search, "_preparations", OrderedDict())
    with pytest.raises(RuntimeError, match="no kernels today"):
        sshopm_peaks(sh, backend="cpu")
