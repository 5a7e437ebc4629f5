"""The compress/decompress job kinds: round trip of DIPY's real DWI in every target mode,
version-1 archives, the DWI report, validation, cancellation."""

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

V1_ARCHIVE = Path(__file__).parents[1] / "io" / "data" / "tucker_v1.npz"
V1_SOURCE = Path(__file__).parents[1] / "io" / "data" / "tucker_v1_source.npy"
#: V1_SOURCE (affine diag(2, 2, 2.5)) compressed to --abs 10.005 by the version-2 writer, its
#: streams (a residual among them) range-coded
V2_ARCHIVE = Path(__file__).parents[1] / "io" / "data" / "tucker_v2.npz"

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
    assert [s.name for s in KINDS["compress"].inputs] == ["volume", "bval", "bvec"]
    assert KINDS["compress"].inputs[0].suffixes == (".nii", ".nii.gz")
    assert [s.name for s in KINDS["decompress"].inputs] == ["archive"]
    assert KINDS["decompress"].inputs[0].suffixes == (".npz",)
    assert CompressParams().target == ("tol", 1e-3) and CompressParams(abs=2.0).target == ("abs", 2.0)
    assert CompressParams(psnr=40, ranks=[2, 2, 2]).tol is None
    with pytest.raises(ValueError, match="one error target"):
        CompressParams(tol=1e-2, abs=1.0)


@pytest.mark.parametrize("params", [CompressParams(tol=2e-2, order="best"), CompressParams(abs=5.0),
                                    CompressParams(psnr=50.0)], ids=["tol", "abs", "psnr"])
def test_round_trip_keeps_shape_affine_header_and_meets_the_target(dwi, tmp_path, params):
    (archive, sidecar), progress = run_kind("compress", {"volume": dwi}, params, tmp_path / "c")
    assert archive.name == "compressed.npz" and progress[-1] == 1.0
    report = json.loads(sidecar.read_text())
    with np.load(archive, allow_pickle=False) as data:
        assert str(data["format"]) == FORMAT and int(data["version"]) == 3
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
    x, y = original.get_fdata(), restored.get_fdata()
    rel = np.linalg.norm(y - x) / np.linalg.norm(x)
    max_error = np.abs(y - x).max()
    psnr = 20 * np.log10(np.ptp(x) / np.sqrt(np.mean((y - x) ** 2)))
    assert report["relative_error"] == pytest.approx(rel, rel=1e-9)
    assert report["max_error"] == pytest.approx(max_error) and report["psnr"] == pytest.approx(psnr, rel=1e-9)
    if params.tol is not None:
        assert 1e-2 <= rel <= 2e-2
    elif params.abs is not None:
        assert max_error <= 5.0
    else:
        assert 50.0 <= psnr <= 56.0
    assert report["compression_ratio"] > 1 and report["bound"] > 0


def test_version_1_archives_still_decompress(tmp_path):
    """A version-1 archive (FP16 core, float64 factors) written before version 2 existed."""
    (volume, sidecar), _ = run_kind("decompress", {"archive": V1_ARCHIVE}, DecompressParams(), tmp_path / "d")
    assert json.loads(sidecar.read_text())["version"] == 1
    x = np.load(V1_SOURCE).astype(np.float64)
    y = nib.load(volume).get_fdata()
    assert y.shape == x.shape
    assert np.linalg.norm(y - x) / np.linalg.norm(x) <= 1e-2
    np.testing.assert_array_equal(nib.load(volume).affine, np.diag([2.0, 2.0, 2.5, 1.0]))


def test_version_2_archives_still_decompress(tmp_path):
    """A version-2 archive (range-coded streams) written before version 3 existed."""
    (volume, sidecar), _ = run_kind("decompress", {"archive": V2_ARCHIVE}, DecompressParams(), tmp_path / "d")
    assert json.loads(sidecar.read_text())["version"] == 2
    assert load_archive(V2_ARCHIVE).encoded.residual_stream  # the range decoder's residual is exercised
    x = np.load(V1_SOURCE).astype(np.float64)
    y = nib.load(volume).get_fdata()
    assert y.shape == x.shape
    # the archive's own report: the error the version-2 encoder measured on its decoded values
    assert np.abs(y - x).max() == pytest.approx(7.90240478515625, rel=1e-9)
    np.testing.assert_array_equal(nib.load(volume).affine, np.diag([2.0, 2.0, 2.5, 1.0]))


def test_damaged_archive_is_an_input_error_and_writes_nothing(tmp_path):
    """An archive whose residual stream lost bytes (a truncated copy) is refused as damaged,
    saying what to do, and no volume is left behind."""
    x = np.load(V1_SOURCE)
    image = tmp_path / "v.nii"
    nib.save(nib.Nifti1Image(x, np.eye(4)), image)
    archive = tmp_path / "a.npz"
    compress_job.compress_file(image, archive, CompressParams(abs=10.0))
    data = dict(np.load(archive, allow_pickle=False))
    assert data["residual_codes"].size > 24  # a stream's header and more
    data["residual_codes"] = data["residual_codes"][:-10]
    np.savez(tmp_path / "damaged.npz", **data)
    with pytest.raises(InputError, match="does not decode.*damaged integer stream.*compress the volume again"):
        compress_job.decompress_file(tmp_path / "damaged.npz", tmp_path / "out.nii.gz")
    assert not list(tmp_path.glob("out*"))


def test_fixed_ranks_archive_contents(dwi, tmp_path):
    params = CompressParams(ranks=[4, 5, 6, 12], precision="fp32", scaling="onesided", tol=0.05)
    (archive, _), _ = run_kind("compress", {"volume": dwi}, params, tmp_path / "c")
    loaded = load_archive(archive)
    assert loaded.encoded.ranks == (4, 5, 6, 12) and loaded.report["scaling"] == "onesided"
    assert loaded.report["ttmc"]["precision"] == "fp32"
    assert loaded.reconstruct().shape == (10, 10, 10, 65)


def test_dwi_report_matches_dipy_on_the_same_fits(dwi, tmp_path):
    """The report's FA difference is DIPY's own on the original and decompressed series."""
    from dipy.core.gradients import gradient_table
    from dipy.data import get_fnames
    from dipy.io.gradients import read_bvals_bvecs
    from dipy.reconst.dti import TensorModel

    _, bval, bvec = get_fnames(name="small_64D")
    report = compress_job.compress_file(dwi, tmp_path / "a.npz", CompressParams(tol=2e-2, report_dwi=True),
                                        bval=Path(bval), bvec=Path(bvec))
    compress_job.decompress_file(tmp_path / "a.npz", tmp_path / "b.nii")
    x, y = nib.load(dwi).get_fdata(), nib.load(tmp_path / "b.nii").get_fdata()
    bvals, bvecs = read_bvals_bvecs(bval, bvec)
    model = TensorModel(gradient_table(bvals, bvecs=bvecs))
    b0 = x[..., bvals < 50].mean(-1)
    mask = b0 > 0.2 * np.percentile(b0, 99)
    fa = [np.nan_to_num(model.fit(d, mask=mask).fa)[mask] for d in (x, y)]
    dwi_report = report["dwi"]
    assert dwi_report["voxels"] == int(mask.sum())
    assert dwi_report["fa_median_abs_diff"] == pytest.approx(np.median(np.abs(fa[0] - fa[1])), rel=1e-6)
    assert 0.5 <= dwi_report["fibre_count_agreement"] <= 1 and 0 <= dwi_report["peak_angle_p95"] < 90
    with pytest.raises(InputError, match="bval and bvec"):
        compress_job.compress_file(dwi, tmp_path / "c.npz", CompressParams(report_dwi=True))


def test_validation_errors(tmp_path, dwi):
    flat = tmp_path / "flat.nii.gz"
    nib.save(nib.Nifti1Image(np.zeros((4, 5), np.float32), np.eye(4)), str(flat))
    with pytest.raises(InputError, match="3D, 4D or 5D"):
        KINDS["compress"].validate({"volume": flat}, CompressParams())
    with pytest.raises(InputError, match="ranks"):
        KINDS["compress"].validate({"volume": dwi}, CompressParams(ranks=[2, 2, 2]))
    with pytest.raises(InputError, match="bval and bvec"):
        KINDS["compress"].validate({"volume": dwi}, CompressParams(report_dwi=True))
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
    params = CompressParams(ranks=[3, 3, 3], scaling="none", on_overflow="fail", tol=0.1)
    with pytest.raises(InputError, match="non-finite"):
        run_kind("compress", {"volume": path}, params, tmp_path / "c")
    assert not list((tmp_path / "c").glob("*.npz"))
    # The default falls back to FP32 and says so.
    (archive, sidecar), _ = run_kind("compress", {"volume": path},
                                      CompressParams(ranks=[3, 3, 3], scaling="none", tol=0.1), tmp_path / "d")
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
