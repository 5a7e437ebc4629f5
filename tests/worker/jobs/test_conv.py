"""The cp-conv and tucker-conv job kinds on real files: outputs equal a float64 direct
convolution, header-only validation refuses bad inputs with clear errors."""

import json

import nibabel as nib
import numpy as np
import pytest

from gpu.conv.direct import cp_kernel, direct_conv2d, tucker_kernel
from worker.errors import InputError, JobCancelled
from worker.job_kinds import JobContext, UploadedInput, get_job_kind

TOL = 1e-5


def rel_err(a, b):
    return np.abs(np.asarray(a, np.float64) - b).max() / np.abs(b).max()


@pytest.fixture
def rng():
    return np.random.default_rng(2026)


def cp_files(tmp_path, rng, c=4, t=6, kh=3, kw=3, rank=3, bias=True):
    f = {name: rng.standard_normal((d, rank)).astype(np.float32) for name, d in (("S", c), ("H", kh), ("W", kw), ("T", t))}
    if bias:
        f["bias"] = rng.standard_normal(t).astype(np.float32)
    np.savez(tmp_path / "cp.npz", **f)
    return tmp_path / "cp.npz", f


def test_cp_conv_job_on_npy(tmp_path, rng):
    u = rng.standard_normal((3, 4, 11, 9)).astype(np.float32)
    np.save(tmp_path / "u.npy", u)
    factors, f = cp_files(tmp_path, rng)
    kind = get_job_kind("cp-conv")
    params = kind.params_model(stride=2, padding=1, dilation=2)
    inputs = {"input": tmp_path / "u.npy", "factors": factors}
    kind.validate(inputs, params)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    seen = []
    paths = kind.run(JobContext(inputs=inputs, out_dir=out_dir, params=params, progress=seen.append))
    assert [p.name for p in paths] == ["output.npy", "conv.json"]
    out = np.load(paths[0])
    ref = direct_conv2d(u, cp_kernel(f["S"], f["H"], f["W"], f["T"]), f["bias"], 2, 1, 2)
    assert out.shape == ref.shape and rel_err(out, ref) < TOL
    side = json.loads(paths[1].read_text())
    assert side["job"] == "cp-conv" and side["layer"]["rank"] == 3 and side["output"]["shape_nchw"] == list(ref.shape)
    assert seen[-1] == 1.0
    assert sorted(p.name for p in out_dir.iterdir()) == ["conv.json", "output.npy"]


def test_tucker_conv_job_on_nifti_with_a_dense_kernel(tmp_path, rng):
    vol = rng.standard_normal((9, 8, 4, 5)).astype(np.float32)
    affine = np.diag([2.0, 2.0, 2.5, 1.0])
    nib.save(nib.Nifti1Image(vol, affine), tmp_path / "vol.nii.gz")
    kernel = rng.standard_normal((3, 5, 3, 3)).astype(np.float32)
    np.save(tmp_path / "k.npy", kernel)
    kind = get_job_kind("tucker-conv")
    params = kind.params_model(rank_in=5, rank_out=3)
    inputs = {"input": tmp_path / "vol.nii.gz", "kernel": tmp_path / "k.npy"}
    kind.validate(inputs, params)
    paths = kind.run(JobContext(inputs=inputs, out_dir=tmp_path, params=params))
    img = nib.load(paths[0])
    assert paths[0].name == "output.nii.gz" and img.shape == (9, 8, 4, 3)
    assert np.allclose(img.affine, affine)
    ref = direct_conv2d(np.transpose(vol, (2, 3, 0, 1)), kernel, None, 1, "same", 1)
    assert rel_err(np.transpose(img.get_fdata(), (2, 3, 0, 1)), ref) < TOL
    side = json.loads(paths[1].read_text())
    assert side["layer"]["decomposed_here"] and side["layer"]["decomposition_relative_error"] < 1e-6


def test_tucker_conv_job_with_factors_on_the_cuda_simulator(tmp_path, rng, monkeypatch):
    from gpu.conv.kernel_cache import CACHE_ENV

    # the generated kernel goes into a cache of the test's own, not the user's
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "kernels"))
    u = rng.standard_normal((1, 3, 5, 6)).astype(np.float32)
    np.save(tmp_path / "u.npy", u)
    f = dict(U_in=rng.standard_normal((3, 2)), core=rng.standard_normal((2, 2, 3, 3)), U_out=rng.standard_normal((4, 2)))
    np.savez(tmp_path / "t.npz", **f)
    kind = get_job_kind("tucker-conv")
    params = kind.params_model(backend="cuda")
    paths = kind.run(JobContext(inputs={"input": tmp_path / "u.npy", "factors": tmp_path / "t.npz"},
                                out_dir=tmp_path, params=params))
    ref = direct_conv2d(u, tucker_kernel(f["U_in"], f["core"], f["U_out"]), None, 1, "same", 1)
    assert rel_err(np.load(paths[0]), ref) < TOL


def test_cancellation_stops_before_any_output(tmp_path, rng):
    np.save(tmp_path / "u.npy", rng.standard_normal((2, 4, 6, 6)).astype(np.float32))
    factors, _ = cp_files(tmp_path, rng)
    kind = get_job_kind("cp-conv")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    ctx = JobContext(inputs={"input": tmp_path / "u.npy", "factors": factors}, out_dir=out_dir,
                     params=kind.params_model(), should_stop=lambda: True)
    with pytest.raises(JobCancelled):
        kind.run(ctx)
    assert list(out_dir.iterdir()) == []


@pytest.mark.parametrize(
    "change, message",
    [
        ("wrong_channels", "expect 4 input channels but the input has 5"),
        ("rank_mismatch", "share one rank"),
        ("missing_array", "lacks T"),
        ("bad_input_ndim", "must be 4-D"),
        ("nifti_stride", "use stride 1 and padding 'same'"),
        ("both_sources", "exactly one of factors"),
        ("kernel_without_rank", "give rank"),
        ("bias_shape", "one entry per output"),
    ],
)
def test_validation_refuses_bad_inputs(tmp_path, rng, change, message):
    u = rng.standard_normal((1, 4, 6, 6)).astype(np.float32)
    np.save(tmp_path / "u.npy", u)
    factors, f = cp_files(tmp_path, rng, bias=False)
    inputs = {"input": tmp_path / "u.npy", "factors": factors}
    params = get_job_kind("cp-conv").params_model()
    if change == "wrong_channels":
        np.save(tmp_path / "u.npy", rng.standard_normal((1, 5, 6, 6)).astype(np.float32))
    elif change == "rank_mismatch":
        np.savez(factors, **{**f, "W": f["W"][:, :2]})
    elif change == "missing_array":
        np.savez(factors, S=f["S"], H=f["H"], W=f["W"])
    elif change == "bad_input_ndim":
        np.save(tmp_path / "u.npy", u[0])
    elif change == "nifti_stride":
        nib.save(nib.Nifti1Image(np.zeros((6, 6, 2, 4), np.float32), np.eye(4)), tmp_path / "v.nii")
        inputs["input"] = tmp_path / "v.nii"
        params = get_job_kind("cp-conv").params_model(stride=2, padding=1)
    elif change == "both_sources":
        np.save(tmp_path / "k.npy", np.zeros((6, 4, 3, 3), np.float32))
        inputs["kernel"] = tmp_path / "k.npy"
    elif change == "kernel_without_rank":
        np.save(tmp_path / "k.npy", np.zeros((6, 4, 3, 3), np.float32))
        inputs = {"input": tmp_path / "u.npy", "kernel": tmp_path / "k.npy"}
    elif change == "bias_shape":
        np.savez(factors, **f, bias=np.zeros(5, np.float32))
    with pytest.raises(InputError, match=message):
        get_job_kind("cp-conv").validate(inputs, params)


def test_nan_weights_fail_the_run_with_a_clear_error(tmp_path, rng):
    np.save(tmp_path / "u.npy", rng.standard_normal((1, 4, 6, 6)).astype(np.float32))
    factors, f = cp_files(tmp_path, rng)
    f["H"][1, 1] = np.nan
    np.savez(factors, **f)
    kind = get_job_kind("cp-conv")
    inputs = {"input": tmp_path / "u.npy", "factors": factors}
    kind.validate(inputs, kind.params_model())  # headers are fine
    with pytest.raises(InputError, match="factor H contains NaN"):
        kind.run(JobContext(inputs=inputs, out_dir=tmp_path, params=kind.params_model()))
    assert not (tmp_path / "output.npy").exists()


def test_sidecar_names_the_input_as_uploaded(tmp_path, rng):
    """The service stores a .nii.gz upload inflated (input.nii); the sidecar names what was sent."""
    nib.save(nib.Nifti1Image(rng.standard_normal((6, 6, 1, 4)).astype(np.float32), np.eye(4)), tmp_path / "input.nii")
    factors, _ = cp_files(tmp_path, rng)
    kind = get_job_kind("cp-conv")
    inputs = {"input": tmp_path / "input.nii", "factors": factors}
    out = tmp_path / "out"
    out.mkdir()
    results = kind.run(JobContext(inputs=inputs, out_dir=out, params=kind.params_model(),
                                  uploaded={"input": UploadedInput(name="input.nii.gz", sha256="0" * 64)}))
    assert [p.name for p in results] == ["output.nii.gz", "conv.json"]
    assert json.loads((out / "conv.json").read_text())["input"]["file"] == "input.nii.gz"
