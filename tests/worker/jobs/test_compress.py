"""The compress/decompress job kinds: round trip of DIPY's real DWI, validation, cancellation."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from worker.jobs import compress as compress_job
from worker.jobs.compress import JOB_KINDS
from worker.params import CompressParams, DecompressParams
from worker.errors import InputError, JobCancelled
from worker.job_kinds import JobContext
from worker.io.tucker_npz import FORMAT, load_archive

KINDS = {kind.name: kind for kind in JOB_KINDS}


@pytest.fixture
def dwi(tmp_path) -> Path:
    from dipy.data import get_fnames

    path = tmp_path / "dwi.nii"
    shutil.copy(get_fnames(name="small_64D")[0], path)
    return path


def run_kind(name, inputs, params, out_dir, should_stop=lambda: False):
    out_dir.mkdir(exist_ok=True)
    progress = []
    ctx = JobContext(inputs=inputs, out_dir=out_dir, params=params, progress=progress.append,
                     should_stop=should_stop)
    KINDS[name].validate(inputs, params)
    return KINDS[name].run(ctx), progress


def test_job_kinds_declared():
    assert set(KINDS) == {"compress", "decompress"}
    assert [s.name for s in KINDS["compress"].inputs] == ["volume"]
    assert KINDS["compress"].inputs[0].suffixes == (".nii", ".nii.gz")
    assert [s.name for s in KINDS["decompress"].inputs] == ["archive"]
    assert KINDS["decompress"].inputs[0].suffixes == (".npz",)
    assert CompressParams().tol == 1e-3 and CompressParams(ranks=[2, 2, 2]).tol is None
    with pytest.raises(ValueError):
        CompressParams(tol=1e-2, ranks=[2, 2, 2])


def test_round_trip_keeps_shape_affine_and_header(dwi, tmp_path):
    params = CompressParams(tol=2e-2, precision="fp16", order="best")
    (archive, sidecar), progress = run_kind("compress", {"volume": dwi}, params, tmp_path / "c")
    assert archive.name == "compressed.npz" and progress[-1] == 1.0
    report = json.loads(sidecar.read_text())
    assert report["relative_error"] <= 2e-2 and report["compression_ratio"] > 0
    with np.load(archive, allow_pickle=False) as data:
        assert str(data["format"]) == FORMAT and int(data["version"]) == 1
        assert data["core"].dtype in (np.float16, np.float32)
    (volume, _), _ = run_kind("decompress", {"archive": archive}, DecompressParams(), tmp_path / "d")
    original, restored = nib.load(dwi), nib.load(volume)
    assert restored.shape == original.shape
    np.testing.assert_array_equal(restored.affine, original.affine)
    assert restored.get_data_dtype() == original.get_data_dtype()
    for key in original.header.keys():
        a, b = original.header[key], restored.header[key]
        if key == "vox_offset":  # .nii → .nii.gz relayout
            continue
        assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), key
    x = original.get_fdata()
    err = np.linalg.norm(restored.get_fdata() - x) / np.linalg.norm(x)
    # int16 rounding adds at most 0.5 per voxel on top of the Tucker error.
    assert err <= report["relative_error"] + 0.5 * np.sqrt(x.size) / np.linalg.norm(x)


def test_fixed_ranks_archive_contents(dwi, tmp_path):
    params = CompressParams(ranks=[4, 5, 6, 12], precision="fp32", scaling="onesided")
    (archive, _), _ = run_kind("compress", {"volume": dwi}, params, tmp_path / "c")
    loaded = load_archive(archive)
    assert loaded.core.shape == (4, 5, 6, 12) and loaded.core.dtype == np.float32
    assert [f.shape for f in loaded.factors] == [(10, 4), (10, 5), (10, 6), (65, 12)]
    assert loaded.report["scaling"] == "onesided"
    assert np.isnan(float(np.load(archive)["tolerance"]))


def test_validation_errors(tmp_path, dwi):
    flat = tmp_path / "flat.nii.gz"
    nib.save(nib.Nifti1Image(np.zeros((4, 5), np.float32), np.eye(4)), str(flat))
    with pytest.raises(InputError, match="3D, 4D or 5D"):
        KINDS["compress"].validate({"volume": flat}, CompressParams())
    with pytest.raises(InputError, match="ranks"):
        KINDS["compress"].validate({"volume": dwi}, CompressParams(ranks=[2, 2, 2]))
    with pytest.raises(InputError, match="ranks"):
        KINDS["compress"].validate({"volume": dwi}, CompressParams(ranks=[2, 2, 2, 99]))
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a zip")
    with pytest.raises(InputError, match="not a readable"):
        KINDS["decompress"].validate({"archive": junk}, DecompressParams())
    other = tmp_path / "other.npz"
    np.savez(other, a=np.zeros(3))
    with pytest.raises(InputError, match="fibertensor compress"):
        KINDS["decompress"].validate({"archive": other}, DecompressParams())


def test_non_finite_volume_is_refused(tmp_path):
    data = np.ones((6, 5, 4), np.float32)
    data[1, 1, 1] = np.nan
    path = tmp_path / "nan.nii.gz"
    nib.save(nib.Nifti1Image(data, np.eye(4)), str(path))
    with pytest.raises(InputError, match="NaN"):
        run_kind("compress", {"volume": path}, CompressParams(), tmp_path / "c")


def test_overflow_fail_mode_is_an_input_error(tmp_path):
    """Unscaled FP16 on intensities beyond 65504 with on_overflow=fail stops with a clear error."""
    rng = np.random.default_rng(0)
    data = (rng.random((8, 7, 6)) * 1e6).astype(np.float32)
    path = tmp_path / "big.nii.gz"
    nib.save(nib.Nifti1Image(data, np.eye(4)), str(path))
    params = CompressParams(ranks=[3, 3, 3], scaling="none", on_overflow="fail")
    with pytest.raises(InputError, match="non-finite"):
        run_kind("compress", {"volume": path}, params, tmp_path / "c")
    assert not list((tmp_path / "c").glob("*.npz"))
    # The default falls back to FP32 and says so.
    (archive, sidecar), _ = run_kind("compress", {"volume": path},
                                      CompressParams(ranks=[3, 3, 3], scaling="none"), tmp_path / "d")
    assert json.loads(sidecar.read_text())["ttmc"]["fallback_from"] == "fp16"


def test_cancellation_leaves_no_archive(dwi, tmp_path):
    with pytest.raises(JobCancelled):
        run_kind("compress", {"volume": dwi}, CompressParams(), tmp_path / "c", should_stop=lambda: True)
    assert list((tmp_path / "c").iterdir()) == []


def test_cli_functions_share_the_job_code(dwi, tmp_path):
    report = compress_job.compress_file(dwi, tmp_path / "a.npz", CompressParams(tol=5e-2))
    out = compress_job.decompress_file(tmp_path / "a.npz", tmp_path / "b.nii.gz")
    assert out["shape"] == list(nib.load(dwi).shape) and report["archive_bytes"] > 0
    assert not list(tmp_path.glob(".*tmp*"))
