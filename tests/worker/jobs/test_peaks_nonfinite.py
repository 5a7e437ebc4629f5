"""Issue 14, item 3: voxels with NaN/Inf coefficients give the job a ``warnings`` list (sidecar,
job.json, job API); a volume with no finite voxel fails before computing."""

from __future__ import annotations

import json

import httpx
import nibabel as nib
import numpy as np
import pytest

from gpu.peaks.phantom import fod_phantom
from gpu.peaks.search import sshopm_peaks
from service.settings import Settings
from tests.service.conftest import run_queued
from worker.errors import InputError
from worker.job_store import JobStatus, JobStore
from worker.jobs.peaks import PeaksOutputs, PeaksParams, run_peaks

SHAPE = (4, 3, 3)


def _save(data: np.ndarray, path):
    nib.save(nib.Nifti1Image(data, np.eye(4)), path)
    return path


@pytest.fixture
def partly_nan(tmp_path):
    sh = fod_phantom(SHAPE, 4, seed=5)["sh"].copy()
    sh[0, 0, 0, 2] = np.nan
    sh[1, 2, 0, :] = np.inf
    sh[3, 1, 2, 0] = -np.inf
    return sh, _save(sh, tmp_path / "fod.nii.gz")


def test_nonfinite_voxels_are_warned_about_and_the_rest_computed(partly_nan, tmp_path):
    sh, path = partly_nan
    outputs = PeaksOutputs.in_folder(tmp_path / "out")
    sidecar = run_peaks(path, outputs, PeaksParams(backend="cpu"))
    assert sidecar["warnings"] == [
        "3 of 36 voxels of 'fod.nii.gz' have NaN or infinite SH coefficients; their peaks are NaN and their count 0"
    ]
    assert json.loads(outputs.sidecar.read_text())["warnings"] == sidecar["warnings"]
    count = np.asarray(nib.load(outputs.path("count", ".nii.gz")).dataobj)
    expected = sshopm_peaks(sh, backend="cpu")
    np.testing.assert_array_equal(count, expected.count)
    assert count[0, 0, 0] == count[1, 2, 0] == count[3, 1, 2] == 0
    assert (count > 0).sum() == 33


def test_the_warning_and_the_engine_share_one_pass_over_the_volume(partly_nan, tmp_path, monkeypatch):
    """The job finds the non-finite voxels once: the flags behind its warning are what the
    engine leaves out; the stats, warning and images are those of the engine's own pass
    (``sshopm_peaks`` alone) and of a float64 count of the bad voxels."""
    import gpu.peaks.search

    sh, path = partly_nan
    passes = []

    def counted(volume, _finite_voxels=gpu.peaks.search.finite_voxels):
        passes.append(volume.shape)
        return _finite_voxels(volume)

    monkeypatch.setattr(gpu.peaks.search, "finite_voxels", counted)
    outputs = PeaksOutputs.in_folder(tmp_path / "out")
    sidecar = run_peaks(path, outputs, PeaksParams(backend="cpu"))
    assert passes == [sh.shape]
    bad = int((~np.isfinite(sh.astype(np.float64)).all(axis=-1)).sum())
    assert sidecar["nonfinite_voxels"] == bad == 3 and sidecar["voxels_processed"] == 36 - bad
    monkeypatch.undo()
    alone = sshopm_peaks(sh, backend="cpu")
    assert sidecar["nonfinite_voxels"] == alone.stats["nonfinite_voxels"]
    peaks = np.asarray(nib.load(outputs.path("peaks", ".nii.gz")).dataobj)
    expected = (alone.directions * alone.amplitudes[..., None]).reshape(*SHAPE, -1)
    np.testing.assert_array_equal(peaks, expected)
    np.testing.assert_array_equal(np.asarray(nib.load(outputs.path("amplitudes", ".nii.gz")).dataobj),
                                  alone.amplitudes)


def test_a_mask_counts_only_its_voxels(partly_nan, tmp_path):
    sh, path = partly_nan
    mask = np.ones(SHAPE, np.uint8)
    mask[0] = 0  # drops the NaN voxel at (0, 0, 0)
    sidecar = run_peaks(path, PeaksOutputs.in_folder(tmp_path / "out"), PeaksParams(backend="cpu"),
                        mask=_save(mask, tmp_path / "mask.nii.gz"))
    assert sidecar["warnings"] == [
        "2 of 27 voxels inside the mask of 'fod.nii.gz' have NaN or infinite SH coefficients; "
        "their peaks are NaN and their count 0"
    ]
    clean = sh.copy()
    clean[~np.isfinite(clean)] = 0.0
    sidecar = run_peaks(_save(clean, tmp_path / "clean.nii.gz"), PeaksOutputs.in_folder(tmp_path / "c"),
                        PeaksParams(backend="cpu"))
    assert sidecar["warnings"] == []


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_no_finite_voxel_fails_before_computing(tmp_path, bad):
    path = _save(np.full((*SHAPE, 15), bad, np.float32), tmp_path / "fod.nii.gz")
    out = tmp_path / "out"
    with pytest.raises(InputError) as caught:
        run_peaks(path, PeaksOutputs.in_folder(out), PeaksParams(backend="cpu"))
    assert caught.value.title == "No finite voxels"
    assert "every voxel of 'fod.nii.gz' has NaN or infinite SH coefficients" in caught.value.detail
    assert not out.exists() or list(out.iterdir()) == []


def test_an_empty_mask_fails_before_computing(partly_nan, tmp_path):
    _, path = partly_nan
    mask = _save(np.zeros(SHAPE, np.uint8), tmp_path / "mask.nii.gz")
    with pytest.raises(InputError, match="the mask selects no voxel"):
        run_peaks(path, PeaksOutputs.in_folder(tmp_path / "out"), PeaksParams(backend="cpu"), mask=mask)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_warnings_and_failure_through_the_job_api(partly_nan, tmp_path):
    from service.app import create_app

    _, path = partly_nan
    nan_path = _save(np.full((*SHAPE, 15), np.nan, np.float32), tmp_path / "nan.nii.gz")
    settings = Settings(data_dir=tmp_path / "data")
    store = JobStore(settings.data_dir)
    app = create_app(settings)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        some = await client.post("/v1/jobs/peaks", files={"fod": ("s.nii.gz", path.read_bytes())},
                                 data={"backend": "cpu"})
        every = await client.post("/v1/jobs/peaks", files={"fod": ("n.nii.gz", nan_path.read_bytes())},
                                  data={"backend": "cpu"})
        assert some.status_code == every.status_code == 202
        assert some.json()["warnings"] == []
        run_queued(store)
        done = (await client.get(f"/v1/jobs/{some.json()['id']}")).json()
        failed = (await client.get(f"/v1/jobs/{every.json()['id']}")).json()
    assert done["status"] == "succeeded"
    # named as uploaded, not as stored
    assert done["warnings"] == [
        "3 of 36 voxels of 's.nii.gz' have NaN or infinite SH coefficients; their peaks are NaN and their count 0"
    ]
    assert store.read(done["id"]).warnings == done["warnings"]
    assert failed["status"] == JobStatus.failed.value and failed["error"]["title"] == "No finite voxels"
    assert failed["results"] == []
