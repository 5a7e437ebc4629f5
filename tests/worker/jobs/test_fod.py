"""The ``response`` and ``fod`` jobs and commands against MRtrix3 (``dwi2fod``,
``dwi2response dhollander`` and ``tournier``) on a small DWI phantom, the DWI's gradients in
every form MRtrix3 reads giving the same FODs, and what the jobs do with data they cannot use
as given."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from gpu.sh_basis import convert_sh_basis
from service.cli import main
from tests.worker.jobs.fod_phantom import AFFINE, SHAPE, write_fsl, write_phantom
from worker.io.images import load_image_data, read_image_header, write_image
from worker.io.response_files import read_response
from worker.jobs.fod import run_fod, run_response
from worker.params.fod import FodParams, ResponseParams

pytestmark = pytest.mark.requires_mrtrix

TOURNIER_DATA = Path(__file__).parents[2] / "gpu" / "fod" / "data"

# dhollander's percentages are of a whole brain's voxels; the phantom has a few hundred
SMALL = ["--erode", "0", "--sfwm", "20", "--gm", "20", "--csf", "20"]


def image(path):
    return load_image_data(read_image_header(path, "image"))


def relative_l2(ours, theirs):
    ours, theirs = ours.reshape(-1, ours.shape[-1]), theirs.reshape(-1, theirs.shape[-1])
    return np.linalg.norm(ours - theirs, axis=1) / np.linalg.norm(theirs, axis=1)


@pytest.fixture(scope="module")
def phantom(tmp_path_factory):
    return write_phantom(tmp_path_factory.mktemp("dwi"))


@pytest.fixture(scope="module")
def fsl_fod(phantom, tmp_path_factory):
    """``fibertensor fod`` on the NIfTI + FSL phantom with its exact responses."""
    p, out = phantom["paths"], tmp_path_factory.mktemp("ours") / "sub"
    assert main(["fod", str(p["dwi"]), str(out), "--bval", str(p["bval"]), "--bvec", str(p["bvec"]),
                 "--mask", str(p["mask"]), "--response", str(p["wm"]), str(p["gm"]), str(p["csf"]),
                 "--backend", "cpu", "--quiet"]) == 0
    return out


@pytest.fixture(scope="module")
def mrtrix_responses(phantom, tmp_path_factory):
    """``dwi2response dhollander`` of the phantom, with its selected voxels."""
    p, out = phantom["paths"], tmp_path_factory.mktemp("theirs")
    subprocess.run(["dwi2response", "dhollander", "-quiet", "-nthreads", "1", "-fslgrad", str(p["bvec"]),
                    str(p["bval"]), "-mask", str(p["mask"]), "-erode", "0", "-sfwm", "20", "-gm", "20", "-csf", "20",
                    str(p["dwi"]), str(out / "wm.txt"), str(out / "gm.txt"), str(out / "csf.txt"),
                    "-voxels", str(out / "voxels.nii")], check=True)
    return out


def test_msmt_fod_matches_dwi2fod(phantom, fsl_fod, tmp_path):
    p = phantom["paths"]
    theirs = {t: tmp_path / f"{t}.nii" for t in ("wm", "gm", "csf")}
    subprocess.run(["dwi2fod", "msmt_csd", "-quiet", "-nthreads", "1", "-fslgrad", str(p["bvec"]), str(p["bval"]),
                    "-mask", str(p["mask"]), str(p["dwi"]), str(p["wm"]), str(theirs["wm"]), str(p["gm"]),
                    str(theirs["gm"]), str(p["csf"]), str(theirs["csf"])], check=True)
    for ours, reference in (("wmfod", "wm"), ("gm", "gm"), ("csf", "csf")):
        ours_data, their_data = image(fsl_fod.with_name(f"sub_{ours}.nii")), image(theirs[reference])
        assert ours_data.shape == their_data.shape == (*SHAPE, 45 if ours == "wmfod" else 1)
        if ours == "wmfod":
            assert np.mean(relative_l2(ours_data, their_data) <= 1e-3) >= 0.999
        else:  # a scalar that is 0 (to rounding) where the tissue is absent: relative to its largest
            np.testing.assert_allclose(ours_data, their_data, atol=1e-3 * np.abs(their_data).max(), err_msg=ours)
    sidecar = json.loads(fsl_fod.with_name("sub_fod.json").read_text())
    assert sidecar["lmax"] == {"wmfod": 8, "gm": 0, "csf": 0} and sidecar["voxels_fitted"] == np.prod(SHAPE)
    assert sidecar["warnings"] == [] and sidecar["shells"] == [0.0, 1000.0, 2000.0, 3000.0]


def test_csd_matches_dwi2fod(phantom, tmp_path):
    p = phantom["paths"]
    wm, _ = read_response(p["wm"])
    np.savetxt(tmp_path / "single.txt", wm[-1:])
    assert main(["fod", str(p["dwi"]), str(tmp_path / "ours"), "--grad", str(_grad_file(phantom, tmp_path)),
                 "--algorithm", "csd", "--response", str(tmp_path / "single.txt"), "--backend", "cpu",
                 "--quiet"]) == 0
    subprocess.run(["dwi2fod", "csd", "-quiet", "-nthreads", "1", "-fslgrad", str(p["bvec"]), str(p["bval"]),
                    str(p["dwi"]), str(tmp_path / "single.txt"), str(tmp_path / "theirs.nii")], check=True)
    ours = image(tmp_path / "ours_wmfod.nii")
    assert not (tmp_path / "ours_gm.nii").exists()
    assert np.mean(relative_l2(ours, image(tmp_path / "theirs.nii")) <= 1e-3) >= 0.999


def _grad_file(phantom, folder):
    path = folder / "dwi.b"
    np.savetxt(path, np.column_stack([phantom["dirs"], phantom["bvals"]]), fmt="%.10f")
    return path


def _fod(phantom, folder, dwi, *gradients, basis="mrtrix"):
    p = phantom["paths"]
    assert main(["fod", str(dwi), str(folder / "out"), *map(str, gradients), "--response", str(p["wm"]),
                 str(p["gm"]), str(p["csf"]), "--basis", basis, "--backend", "cpu", "--quiet"]) == 0
    return next(folder.glob("out_wmfod.*"))


def test_every_gradient_form_gives_the_same_fod(phantom, fsl_fod, tmp_path):
    p = phantom["paths"]
    expected = image(fsl_fod.with_name("sub_wmfod.nii"))
    (tmp_path / "grad").mkdir()
    grad = _grad_file(phantom, tmp_path)
    from_grad = image(_fod(phantom, tmp_path / "grad", p["dwi"], "--grad", grad))
    np.testing.assert_allclose(from_grad, expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())

    # a .mif whose header carries the gradients (mrconvert -fslgrad writes them as dw_scheme)
    (tmp_path / "mif").mkdir()
    mif = tmp_path / "dwi.mif"
    subprocess.run(["mrconvert", "-quiet", "-fslgrad", str(p["bvec"]), str(p["bval"]), str(p["dwi"]), str(mif)],
                   check=True)
    fod_mif = _fod(phantom, tmp_path / "mif", mif)
    assert fod_mif.name == "out_wmfod.mif"
    np.testing.assert_allclose(image(fod_mif), expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())

    # the same voxels stored right to left: a negative determinant; FSL's bvecs are the same
    (tmp_path / "flipped").mkdir()
    flipped = AFFINE @ np.array([[-1.0, 0, 0, SHAPE[0] - 1], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]])
    assert np.linalg.det(flipped[:3, :3]) < 0
    dwi = write_image(tmp_path / "flipped.nii", np.ascontiguousarray(phantom["dwi"][::-1]), flipped)
    bval, bvec = write_fsl(tmp_path, phantom["bvals"], phantom["dirs"], "flipped")
    from_flipped = image(_fod(phantom, tmp_path / "flipped", dwi, "--bval", bval, "--bvec", bvec))
    np.testing.assert_allclose(from_flipped[::-1], expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())


def test_dipy_basis_is_the_mrtrix_fod_reordered(phantom, fsl_fod, tmp_path):
    p = phantom["paths"]
    dipy = image(_fod(phantom, tmp_path, p["dwi"], "--bval", p["bval"], "--bvec", p["bvec"], basis="dipy"))
    expected = image(fsl_fod.with_name("sub_wmfod.nii"))
    np.testing.assert_allclose(convert_sh_basis(dipy, "dipy", "mrtrix"), expected, rtol=1e-5,
                               atol=1e-5 * np.abs(expected).max())
    assert not np.allclose(dipy, expected)


def test_response_matches_dwi2response_dhollander(phantom, mrtrix_responses, tmp_path):
    p = phantom["paths"]
    assert main(["response", str(p["dwi"]), f"{tmp_path}/out/", "--bval", str(p["bval"]), "--bvec", str(p["bvec"]),
                 "--mask", str(p["mask"]), *SMALL, "--quiet"]) == 0
    out = tmp_path / "out"
    for tissue in ("wm", "gm", "csf"):
        ours, shells = read_response(out / f"{tissue}.txt")
        theirs, _ = read_response(mrtrix_responses / f"{tissue}.txt")
        assert ours.shape == theirs.shape == ((4, 6) if tissue == "wm" else (4, 1))
        np.testing.assert_allclose(ours[:, 0], theirs[:, 0], rtol=0.05, err_msg=tissue)
        np.testing.assert_allclose(shells, [0, 1000, 2000, 3000])
    voxels = image(out / "voxels.nii")
    assert voxels.shape == (*SHAPE, 3)
    # CSF and GM voxels are those dwi2response picks; single-fibre WM nearly so
    their_voxels = image(mrtrix_responses / "voxels.nii")
    np.testing.assert_array_equal(voxels[..., :2], their_voxels[..., :2])
    sidecar = json.loads((out / "response.json").read_text())
    assert sidecar["voxels"] == {t: int(voxels[..., i].sum()) for i, t in ((2, "wm"), (1, "gm"), (0, "csf"))}
    assert abs(sidecar["voxels"]["wm"] - int(their_voxels[..., 2].sum())) <= 2


def test_response_lmax_refits_the_wm_response(phantom, tmp_path):
    p = phantom["paths"]
    assert main(["response", str(p["dwi"]), str(tmp_path / "l6"), "--bval", str(p["bval"]), "--bvec",
                 str(p["bvec"]), "--mask", str(p["mask"]), *SMALL, "--lmax", "6", "--quiet"]) == 0
    wm, _ = read_response(tmp_path / "l6_wm.txt")
    voxels = image(tmp_path / "l6_voxels.nii")[..., 2] > 0
    mif = tmp_path / "dwi.mif"
    subprocess.run(["mrconvert", "-quiet", "-fslgrad", str(p["bvec"]), str(p["bval"]), str(p["dwi"]), str(mif)],
                   check=True)
    subprocess.run(["dwi2tensor", "-quiet", str(mif), str(tmp_path / "dt.mif")], check=True)
    write_image(tmp_path / "sf.nii", voxels.astype(np.uint8), AFFINE)
    subprocess.run(["tensor2metric", "-quiet", str(tmp_path / "dt.mif"), "-vector", str(tmp_path / "v.mif"),
                    "-modulate", "none"], check=True)
    subprocess.run(["amp2response", "-quiet", "-lmax", "0,6,6,6", str(mif), str(tmp_path / "sf.nii"), str(tmp_path / "v.mif"), str(tmp_path / "theirs.txt")],
                   check=True)
    theirs, _ = read_response(tmp_path / "theirs.txt")
    assert wm.shape == theirs.shape == (4, 4)
    np.testing.assert_allclose(wm, theirs, rtol=1e-3, atol=1e-3 * np.abs(theirs).max())


def test_fod_estimates_missing_responses(phantom, mrtrix_responses, tmp_path):
    """Without responses the job writes dhollander's, as ``fibertensor response`` does, and
    fits with them."""
    p = phantom["paths"]
    small = ResponseParams(erode=0, sfwm=20, gm=20, csf=20)
    sidecar = run_fod(p["dwi"], tmp_path / "est", FodParams(backend="cpu"), bval=p["bval"], bvec=p["bvec"],
                      mask=p["mask"], response_params=small)
    assert sorted(sidecar["outputs"]) == ["csf", "csf_response", "gm", "gm_response", "wm_response", "wmfod"]
    assert main(["response", str(p["dwi"]), str(tmp_path / "alone"), "--bval", str(p["bval"]), "--bvec",
                 str(p["bvec"]), "--mask", str(p["mask"]), *SMALL, "--quiet"]) == 0
    for tissue in ("wm", "gm", "csf"):
        assert (tmp_path / f"est_{tissue}.txt").read_text() == (tmp_path / f"alone_{tissue}.txt").read_text()
    assert main(["fod", str(p["dwi"]), str(tmp_path / "given"), "--bval", str(p["bval"]), "--bvec", str(p["bvec"]),
                 "--mask", str(p["mask"]), "--response", *(str(tmp_path / f"alone_{t}.txt") for t in
                                                            ("wm", "gm", "csf")), "--backend", "cpu", "--quiet"]) == 0
    np.testing.assert_array_equal(image(tmp_path / "est_wmfod.nii"), image(tmp_path / "given_wmfod.nii"))
    # the sidecar times the estimation apart from the fit; a job given its responses has none
    seconds = sidecar["seconds"]
    assert list(seconds) == ["read", "responses", "fit", "write", "total"]
    assert seconds["responses"] > 0 and seconds["fit"] > 0
    assert seconds["total"] >= seconds["read"] + seconds["responses"] + seconds["fit"] + seconds["write"]
    given = json.loads((tmp_path / "given_fod.json").read_text())
    assert list(given["seconds"]) == ["read", "fit", "write", "total"]
    # the voxels the responses came from, as the response job's sidecar counts them; none given
    alone = json.loads((tmp_path / "alone_response.json").read_text())
    assert sidecar["estimated_responses"] == {"voxels": alone["voxels"]} and "estimated_responses" not in given


def test_response_tournier_matches_dwi2response(tmp_path):
    """``fibertensor response --algorithm tournier`` against ``dwi2response tournier``'s output
    kept in tests/gpu/fod/data (its first line is the command): the highest shell's response
    alone, from the same single-fibre voxels."""
    from tests.gpu.fod.response_phantom import three_tissue_phantom

    signal, scheme = three_tissue_phantom(n=10)
    dwi = write_image(tmp_path / "dwi.nii.gz", signal, np.diag([2.0, 2.0, 2.0, 1.0]))
    np.savetxt(tmp_path / "dwi.b", scheme)
    assert main(["response", str(dwi), str(tmp_path / "sub"), "--grad", str(tmp_path / "dwi.b"), "--algorithm",
                 "tournier", "--number", "20", "--iter-voxels", "100", "--quiet"]) == 0
    ours, shells = read_response(tmp_path / "sub_wm.txt")
    theirs, their_shells = read_response(TOURNIER_DATA / "tournier_phantom_wm.txt")
    np.testing.assert_array_equal(shells, their_shells)
    np.testing.assert_allclose(ours[:, 0], theirs[:, 0], rtol=0.05)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-6 * theirs[0, 0])
    voxels = image(tmp_path / "sub_voxels.nii.gz") > 0
    their_voxels = np.zeros(voxels.shape, bool)
    their_voxels[tuple(np.loadtxt(TOURNIER_DATA / "tournier_phantom_voxels.txt", dtype=int).T)] = True
    np.testing.assert_array_equal(voxels, their_voxels)
    assert not (tmp_path / "sub_gm.txt").exists()
    sidecar = json.loads((tmp_path / "sub_response.json").read_text())
    assert sidecar["voxels"] == {"wm": 20} and sidecar["converged"] and sidecar["shells"] == [3000.0]
    assert sorted(sidecar["outputs"]) == ["voxels", "wm"]


def test_csd_estimates_its_response_by_tournier(phantom, tmp_path):
    """csd without a response writes the one ``fibertensor response --algorithm tournier``
    writes and fits with it, as ``dwi2fod csd`` does with that file."""
    p = phantom["paths"]
    sidecar = run_fod(p["dwi"], tmp_path / "est", FodParams(algorithm="csd", backend="cpu"), bval=p["bval"],
                      bvec=p["bvec"], mask=p["mask"])
    assert sorted(sidecar["outputs"]) == ["wm_response", "wmfod"]
    assert "dwi2response tournier" in sidecar["method"]
    assert main(["response", str(p["dwi"]), str(tmp_path / "alone"), "--bval", str(p["bval"]), "--bvec",
                 str(p["bvec"]), "--mask", str(p["mask"]), "--algorithm", "tournier", "--quiet"]) == 0
    assert (tmp_path / "est_wm.txt").read_text() == (tmp_path / "alone_wm.txt").read_text()
    assert read_response(tmp_path / "est_wm.txt")[0].shape == (1, 6)
    alone = json.loads((tmp_path / "alone_response.json").read_text())
    assert sidecar["estimated_responses"] == {key: alone[key] for key in ("voxels", "iterations", "converged")}
    subprocess.run(["dwi2fod", "csd", "-quiet", "-nthreads", "1", "-fslgrad", str(p["bvec"]), str(p["bval"]),
                    str(p["dwi"]), str(tmp_path / "est_wm.txt"), str(tmp_path / "theirs.nii"), "-mask",
                    str(p["mask"])], check=True)
    assert np.mean(relative_l2(image(tmp_path / "est_wmfod.nii"), image(tmp_path / "theirs.nii")) <= 1e-3) >= 0.999


def test_unusable_voxels_are_left_out_and_counted(phantom, fsl_fod, tmp_path):
    p = phantom["paths"]
    dwi = phantom["dwi"].copy()
    dwi[0, 0, 0, 7] = np.nan
    dwi[5, 2, 1, 30] = -4.0
    write_image(tmp_path / "bad.nii", dwi, AFFINE)
    sidecar = run_fod(tmp_path / "bad.nii", tmp_path / "out", FodParams(backend="cpu"), bval=p["bval"],
                      bvec=p["bvec"], responses={t: p[t] for t in ("wm", "gm", "csf")})
    assert sidecar["voxels_fitted"] == np.prod(SHAPE) - 2
    assert sidecar["warnings"] == ["2 voxels have NaN, infinite or negative signal in some volume; they are left "
                                   "out (0 in the outputs)"]
    ours, clean = image(tmp_path / "out_wmfod.nii"), image(fsl_fod.with_name("sub_wmfod.nii"))
    assert not ours[0, 0, 0].any() and not ours[5, 2, 1].any()
    keep = np.ones(SHAPE, bool)
    keep[0, 0, 0] = keep[5, 2, 1] = False
    np.testing.assert_allclose(ours[keep], clean[keep], rtol=1e-5, atol=1e-5 * np.abs(clean).max())


def test_too_few_directions_lower_lmax_with_a_warning(tmp_path, capsys):
    data = write_phantom(tmp_path, shells=((1000, 12), (2000, 12)), n_b0=2)
    p = data["paths"]
    assert main(["fod", str(p["dwi"]), str(tmp_path / "out"), "--bval", str(p["bval"]), "--bvec", str(p["bvec"]),
                 "--response", str(p["wm"]), str(p["gm"]), str(p["csf"]), "--backend", "cpu", "--quiet"]) == 0
    assert "lmax 8 lowered to 4: 24 diffusion-weighted volumes determine at most 15 SH coefficients" in \
        capsys.readouterr().err
    fod = image(tmp_path / "out_wmfod.nii")
    assert fod.shape == (*SHAPE, 15)
    # the same fit as MRtrix3's at that lmax
    subprocess.run(["dwi2fod", "msmt_csd", "-quiet", "-nthreads", "1", "-lmax", "4,0,0", "-fslgrad", str(p["bvec"]),
                    str(p["bval"]), str(p["dwi"]), str(p["wm"]), str(tmp_path / "wm.nii"), str(p["gm"]),
                    str(tmp_path / "gm.nii"), str(p["csf"]), str(tmp_path / "csf.nii")], check=True)
    assert np.mean(relative_l2(fod, image(tmp_path / "wm.nii")) <= 1e-3) >= 0.999


def test_memory_estimates_cover_the_runs_and_no_more_than_three_times(tmp_path):
    """The memory the jobs declare from headers is at least what they allocate (numpy's
    allocations, as tracemalloc counts them) and at most three times it, on a DWI of 19,200
    voxels, all of them brain (a mask's worst case): an estimate far above the use refuses
    whole-brain jobs a worker can run."""
    import tracemalloc

    from gpu.fod import dwi_phantom, shell_scheme
    from worker.jobs.fod import fod_memory_bytes, plan_fod
    from worker.jobs.fod.inputs import check_dwi_inputs
    from worker.jobs.fod.response import response_memory_bytes, run_response

    bvals, dirs = shell_scheme()
    dwi = write_image(tmp_path / "dwi.nii", dwi_phantom((40, 40, 12), bvals, dirs, snr=50.0)["dwi"], np.eye(4))
    bval, bvec = write_fsl(tmp_path, bvals, dirs)
    run_response(dwi, tmp_path / "warm", ResponseParams(erode=0, sfwm=20, gm=20, csf=20), bval=bval, bvec=bvec)
    peaks, estimates = {}, {}
    for algorithm in ("dhollander", "tournier", "msmt_csd", "msmt_csd normalised"):
        responses = {t: tmp_path / f"dhollander_{t}.txt" for t in ("wm", "gm", "csf")}
        params = FodParams(backend="cpu", mtnormalise=algorithm.endswith("normalised"))
        tracemalloc.start()
        try:
            if algorithm.startswith("msmt_csd"):
                run_fod(dwi, tmp_path / "f", params, bval=bval, bvec=bvec, responses=responses)
            else:
                run_response(dwi, tmp_path / algorithm, ResponseParams(algorithm=algorithm), bval=bval, bvec=bvec)
            peaks[algorithm] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        estimates[algorithm] = (
            fod_memory_bytes(plan_fod(dwi, params, bval=bval, bvec=bvec, responses=responses))
            if algorithm.startswith("msmt_csd") else
            response_memory_bytes(check_dwi_inputs(dwi, bval=bval, bvec=bvec), algorithm))
    for algorithm, peak in peaks.items():
        assert peak <= estimates[algorithm] <= 3 * peak, algorithm


def test_fod_warns_as_the_response_job_about_its_estimate(phantom, tmp_path):
    """An estimate without a mask, or whose single-fibre voxels still changed at max_iters,
    qualifies the fod job's results as it does the response job's."""
    p = phantom["paths"]
    params = ResponseParams(max_iters=2, number=20, iter_voxels=40)
    sidecar = run_fod(p["dwi"], tmp_path / "est", FodParams(algorithm="csd", backend="cpu"), bval=p["bval"],
                      bvec=p["bvec"], response_params=params)
    alone = run_response(p["dwi"], tmp_path / "alone", params.model_copy(update={"algorithm": "tournier"}),
                         bval=p["bval"], bvec=p["bvec"])
    assert alone["converged"] is False and sidecar["estimated_responses"]["converged"] is False
    estimate_warnings = [w for w in alone["warnings"] if w.startswith(("no mask given", "the single-fibre voxels"))]
    assert len(estimate_warnings) == 2 and all(w in sidecar["warnings"] for w in estimate_warnings)
