"""The peaks job's memory estimate with ``--format fixel``: the FMLS segmentation it runs
beside the other writers counts, and the door refuses a job that it takes over the limit."""

from __future__ import annotations

import tracemalloc

import nibabel as nib
import numpy as np
import pytest

from gpu.peaks.phantom import fod_phantom
from tests.worker.test_input_limits import DEFAULT_LIMITS, write_header_and_zeros
from worker.input_limits import InputTooLarge, check_job_inputs, job_memory_bytes
from worker.job_kinds import get_job_kind
from worker.jobs.peaks import PeaksOutputs, PeaksParams, run_peaks

# 256·256·64 voxels of lmax-8 SH: within the default 4 GiB without fixels, over it with them.
_SHAPE = (256, 256, 64, 45)


@pytest.fixture(scope="module")
def large_fod(tmp_path_factory):
    return write_header_and_zeros(tmp_path_factory.mktemp("large") / "fod.nii.gz", _SHAPE)


def test_fixel_format_adds_the_segmentation(large_fod):
    kind = get_job_kind("peaks")
    n, c, k = 256 * 256 * 64, 45, 3
    plain = job_memory_bytes(kind, {"fod": large_fod}, PeaksParams())
    with_fixels = job_memory_bytes(kind, {"fod": large_fod}, PeaksParams(format=["fixel"]))
    dipy_fixels = job_memory_bytes(kind, {"fod": large_fod}, PeaksParams(format=["fixel"], basis="dipy"))
    writers = (3 << 20) + (16 << 20) + 10 * n  # the compressors' and the QC picture's buffers
    # without fixels the computing phase dominates: N·(2·C·4 + 48·K + 64)
    assert plain == n * (2 * c * 4 + 48 * k + 64) < DEFAULT_LIMITS.max_job_memory_bytes
    # with them, writing: the images N·(C·4 + 76·K + 21) and FMLS's coefficient copy, room for 16
    # fixels a voxel of 64 bytes and each voxel's count and offset, N·(C·4 + 16·64 + 16)
    assert with_fixels == n * (c * 4 + 76 * k + 21) + writers + n * (c * 4 + 16 * 64 + 16)
    assert dipy_fixels == with_fixels + n * c * 4  # the SH re-expressed in MRtrix3's basis
    assert with_fixels > DEFAULT_LIMITS.max_job_memory_bytes


def test_door_refuses_a_fixel_job_over_the_limit(large_fod):
    kind = get_job_kind("peaks")
    with pytest.raises(InputTooLarge) as caught:
        check_job_inputs(kind, {"fod": large_fod}, PeaksParams(format=["fixel"]), DEFAULT_LIMITS)
    assert caught.value.title == "Job too large for memory"
    needed = job_memory_bytes(kind, {"fod": large_fod}, PeaksParams(format=["fixel"]))
    assert f"needs about {needed / 2**30:.1f} GiB of memory ({needed} bytes)" in caught.value.detail
    assert "FIBERTENSOR_MAX_JOB_MEMORY_BYTES" in caught.value.detail


def test_estimate_bounds_a_fixel_run(tmp_path):
    fod = tmp_path / "fod.nii.gz"
    nib.save(nib.Nifti1Image(fod_phantom((10, 8, 6), lmax=8, seed=3)["sh"].astype(np.float32), np.eye(4)), fod)
    params = PeaksParams(format=["nifti", "fixel"], backend="cpu")
    run_peaks(fod, PeaksOutputs.in_folder(tmp_path / "warm"), params)  # compile first
    tracemalloc.start()
    try:
        run_peaks(fod, PeaksOutputs.in_folder(tmp_path / "out"), params)
        measured = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert measured <= job_memory_bytes(get_job_kind("peaks"), {"fod": fod}, params)
