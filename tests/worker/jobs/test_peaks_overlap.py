"""The peaks job prepares the engine while it reads the volume: the same outputs, bit for
bit, as reading and computing one after the other; a failed read leaves no thread behind."""

from __future__ import annotations

import threading

import nibabel as nib
import numpy as np
import pytest

from gpu.peaks.phantom import fod_phantom
from worker.errors import InputError
from worker.jobs.peaks import PeaksOutputs, compute_peaks, plan_peaks, prepare_engine, read_peaks_inputs, run_peaks
from worker.params import PeaksParams

SHAPE = (4, 3, 2)


def join_preparations() -> None:
    for thread in threading.enumerate():
        if thread.name.startswith("prepare-peaks"):
            thread.join(timeout=60)
            assert not thread.is_alive()


@pytest.fixture
def fod(tmp_path):
    sh = fod_phantom(SHAPE, 6, seed=4)["sh"]
    sh[1, 1, 1, 2] = np.nan
    path = tmp_path / "fod.nii.gz"
    nib.save(nib.Nifti1Image(sh, np.diag([2.0, 2.0, 2.0, 1.0])), path)
    return path


@pytest.mark.parametrize("params", [PeaksParams(backend="cpu"), PeaksParams(backend="cpu", basis="dipy", npeaks=2),
                                    PeaksParams(backend="cuda", starts=32)])
def test_overlapped_read_and_prepare_give_the_same_peaks(fod, tmp_path, params):
    plan = plan_peaks(fod, params=params)
    plain = read_peaks_inputs(plan)
    expected = compute_peaks(plan, plain)
    preparing = prepare_engine(plan)
    assert isinstance(preparing, threading.Thread)
    overlapped = read_peaks_inputs(plan)
    np.testing.assert_array_equal(overlapped.sh, plain.sh)
    assert overlapped.warnings == plain.warnings == [
        "1 of 24 voxels of 'fod.nii.gz' have NaN or infinite SH coefficients; their peaks are NaN and their count 0"]
    got = compute_peaks(plan, overlapped, preparing)
    for name in ("directions", "amplitudes", "count"):
        np.testing.assert_array_equal(getattr(got, name), getattr(expected, name), err_msg=name)
    assert got.stats["seconds"]["prepare_kernels"] > 0
    # run_peaks overlaps the two: its images hold the same numbers.
    sidecar = run_peaks(fod, PeaksOutputs.with_prefix(tmp_path / "out"), params)
    peaks = np.asarray(nib.load(tmp_path / "out_peaks.nii.gz").dataobj)
    k = params.npeaks
    np.testing.assert_array_equal(peaks, (expected.directions * expected.amplitudes[..., None]).reshape(*SHAPE, 3 * k))
    np.testing.assert_array_equal(np.asarray(nib.load(tmp_path / "out_count.nii.gz").dataobj), expected.count)
    assert sidecar["seconds"]["peaks_prepare_kernels"] > 0
    join_preparations()


def test_a_failed_read_raises_and_the_preparation_ends(tmp_path):
    sh = fod_phantom((8, 8, 8), 4, seed=1)["sh"]
    path = tmp_path / "fod.nii.gz"
    nib.save(nib.Nifti1Image(sh, np.eye(4)), path)
    content = path.read_bytes()
    path.write_bytes(content[: len(content) // 2])
    with pytest.raises(InputError, match="cut short"):
        run_peaks(path, PeaksOutputs.with_prefix(tmp_path / "out"), PeaksParams(backend="cpu"))
    join_preparations()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fod.nii.gz"]
