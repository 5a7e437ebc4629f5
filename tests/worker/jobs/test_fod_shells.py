"""``--shells`` (``dwi2fod``/``dwi2response -shells``): the FODs and responses of the shells
chosen equal MRtrix3's with the same choice, in memory and fitted in slabs, and a choice the
data cannot honour is refused saying what to list."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest

import worker.jobs.fod.plan as fod_plan
from gpu.fod.shells import dw_shells, select_shells
from service.cli import main
from tests.worker.jobs.fod_phantom import SHAPE, write_exact_responses, write_phantom
from worker.io.images import load_image_data, read_image_header
from worker.io.response_files import read_response
from worker.jobs.fod import run_fod
from worker.params.fod import FodParams

pytestmark = pytest.mark.requires_mrtrix


def image(path):
    return load_image_data(read_image_header(path, "image"))


def relative_l2(ours, theirs):
    ours, theirs = ours.reshape(-1, ours.shape[-1]), theirs.reshape(-1, theirs.shape[-1])
    return np.linalg.norm(ours - theirs, axis=1) / np.linalg.norm(theirs, axis=1)


@pytest.fixture(scope="module")
def phantom(tmp_path_factory):
    """b = 0 ×4, 1000 ×30, 2000 ×45, 3000 ×60, and exact responses of b = 0, 1000 and 3000."""
    folder = tmp_path_factory.mktemp("dwi")
    found = write_phantom(folder)
    found["chosen"] = write_exact_responses(folder, [0.0, 1000.0, 3000.0], stem="chosen_")
    return found


def _gradients(p):
    return ["-fslgrad", str(p["bvec"]), str(p["bval"])]


def test_msmt_fod_of_chosen_shells_matches_dwi2fod(phantom, tmp_path):
    p, chosen = phantom["paths"], phantom["chosen"]
    responses = [str(chosen[t]) for t in ("wm", "gm", "csf")]
    assert main(["fod", str(p["dwi"]), str(tmp_path / "ours"), "--bval", str(p["bval"]), "--bvec", str(p["bvec"]),
                 "--shells", "0,1000,3000", "--response", *responses, "--backend", "cpu", "--quiet"]) == 0
    theirs = {t: tmp_path / f"theirs_{t}.nii" for t in ("wm", "gm", "csf")}
    subprocess.run(["dwi2fod", "msmt_csd", "-quiet", "-nthreads", "1", *_gradients(p), "-shells", "0,1000,3000",
                    str(p["dwi"]), responses[0], str(theirs["wm"]), responses[1], str(theirs["gm"]), responses[2],
                    str(theirs["csf"])], check=True)
    wm = image(tmp_path / "ours_wmfod.nii")
    assert wm.shape == (*SHAPE, 45)
    assert np.mean(relative_l2(wm, image(theirs["wm"])) <= 1e-3) >= 0.999
    for tissue in ("gm", "csf"):
        their_map = image(theirs[tissue])
        np.testing.assert_allclose(image(tmp_path / f"ours_{tissue}.nii"), their_map,
                                   atol=1e-3 * np.abs(their_map).max())
    sidecar = json.loads((tmp_path / "ours_fod.json").read_text())
    assert sidecar["shells"] == [0.0, 1000.0, 3000.0] and sidecar["parameters"]["shells"] == [0.0, 1000.0, 3000.0]
    # every shell's responses no longer fit the data as chosen
    full = [str(p[t]) for t in ("wm", "gm", "csf")]
    assert main(["fod", str(p["dwi"]), str(tmp_path / "bad"), "--bval", str(p["bval"]), "--bvec", str(p["bvec"]),
                 "--shells", "0,1000,3000", "--response", *full, "--backend", "cpu", "--quiet"]) == 2


def test_csd_of_a_chosen_shell_matches_dwi2fod(phantom, tmp_path):
    p = phantom["paths"]
    wm, _ = read_response(p["wm"])
    np.savetxt(tmp_path / "b2000.txt", wm[2:3])
    assert main(["fod", str(p["dwi"]), str(tmp_path / "ours"), "--bval", str(p["bval"]), "--bvec", str(p["bvec"]),
                 "--algorithm", "csd", "--shells", "2000", "--response", str(tmp_path / "b2000.txt"),
                 "--backend", "cpu", "--quiet"]) == 0
    subprocess.run(["dwi2fod", "csd", "-quiet", "-nthreads", "1", *_gradients(p), "-shells", "2000", str(p["dwi"]),
                    str(tmp_path / "b2000.txt"), str(tmp_path / "theirs.nii")], check=True)
    assert np.mean(relative_l2(image(tmp_path / "ours_wmfod.nii"), image(tmp_path / "theirs.nii")) <= 1e-3) >= 0.999


def test_responses_of_chosen_shells_match_dwi2response(phantom, tmp_path):
    p = phantom["paths"]
    small = ["--erode", "0", "--sfwm", "20", "--gm", "20", "--csf", "20"]
    assert main(["response", str(p["dwi"]), str(tmp_path / "ours"), "--bval", str(p["bval"]), "--bvec",
                 str(p["bvec"]), "--mask", str(p["mask"]), "--shells", "0,2000,3000", *small, "--backend", "cpu",
                 "--quiet"]) == 0
    subprocess.run(["dwi2response", "dhollander", "-quiet", "-nthreads", "1", *_gradients(p), "-mask", str(p["mask"]),
                    "-shells", "0,2000,3000", "-erode", "0", "-sfwm", "20", "-gm", "20", "-csf", "20", str(p["dwi"]),
                    *(str(tmp_path / f"theirs_{t}.txt") for t in ("wm", "gm", "csf"))], check=True)
    for tissue in ("wm", "gm", "csf"):
        ours, bvalues = read_response(tmp_path / f"ours_{tissue}.txt")
        theirs, _ = read_response(tmp_path / f"theirs_{tissue}.txt")
        assert ours.shape[0] == theirs.shape[0] == 3
        np.testing.assert_allclose(bvalues, [0, 2000, 3000], atol=1)
        np.testing.assert_allclose(ours[:, 0], theirs[:, 0], rtol=0.05, err_msg=tissue)


def test_a_slab_fit_of_chosen_shells_gives_the_whole_volume_bytes(phantom, tmp_path, monkeypatch):
    p, chosen = phantom["paths"], phantom["chosen"]
    params = FodParams(shells=[0, 1000, 3000], backend="cpu", lmax=6)
    fits = {}
    for how in ("whole", "slabs"):
        if how == "slabs":
            monkeypatch.setattr(fod_plan, "FIT_IN_MEMORY_BYTES", 0)
            monkeypatch.setattr(fod_plan, "SLAB_VOXELS", 2 * SHAPE[0] * SHAPE[1])
        (tmp_path / how).mkdir()
        fits[how] = run_fod(p["dwi"], tmp_path / how / "sub", params, responses=chosen, bval=p["bval"],
                            bvec=p["bvec"])
    assert fits["slabs"]["outputs"] == fits["whole"]["outputs"]
    for output in fits["whole"]["outputs"].values():
        if output.endswith(".nii"):
            assert np.array_equal(image(tmp_path / "slabs" / output), image(tmp_path / "whole" / output)), output


@pytest.mark.parametrize("shells, algorithm, says", [
    ("0,1500", "msmt_csd", "lies between shells"),
    ("1000,2000,3000", "msmt_csd", "leave out the b=0 volumes"),
    ("0", "msmt_csd", "add a b > 0 shell"),
    ("0,1000,1000", "msmt_csd", "a second time"),
    ("1000,2000", "csd", "takes one b > 0 shell, listed alone"),
    ("0,2000", "csd", "takes one b > 0 shell, listed alone"),
])
def test_choices_the_data_cannot_honour_are_refused(phantom, tmp_path, capsys, shells, algorithm, says):
    p = phantom["paths"]
    assert main(["fod", str(p["dwi"]), str(tmp_path / "out"), "--bval", str(p["bval"]), "--bvec", str(p["bvec"]),
                 "--algorithm", algorithm, "--shells", shells, "--backend", "cpu", "--quiet"]) == 2
    assert says in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_shells_are_chosen_as_mrtrix_chooses_them():
    """A b-value inside a shell's range, within 1 of its mean, or clearly nearest in the
    shells' spreads (with a warning); b=0 only when listed."""
    bvals = np.array([0.0] * 3 + [995, 1000, 1005] * 4 + [2990, 3000, 3010] * 4)
    shells = dw_shells(bvals)
    taken = lambda wanted: [round(s.mean_b) for s in select_shells(shells, bvals, wanted)[0]]  # noqa: E731
    assert taken([0, 1003]) == [0, 1000] and taken([3000]) == [3000] and taken([5, 2999.5]) == [0, 3000]
    assert select_shells(shells, bvals, [0, 1003])[1] == []
    chosen, notes = select_shells(shells, bvals, [0, 2960])
    assert [round(s.mean_b) for s in chosen] == [0, 3000] and "nearby shell b = 3000" in notes[0]
    with pytest.raises(ValueError, match="between shells"):
        select_shells(shells, bvals, [2000])
    with pytest.raises(ValueError, match="has none"):
        select_shells(dw_shells(bvals[3:]), bvals[3:], [0])


def test_tournier_of_a_chosen_shell_is_that_of_the_series_cut_to_it(tmp_path):
    """``--shells 2000`` for tournier: the response and voxels of the DWI cut to its b = 0 and
    2000 volumes (as ``dwiextract -shells`` leaves them), not of the highest shell."""
    from tests.gpu.fod.response_phantom import three_tissue_phantom
    from worker.io.images import write_image

    signal, scheme = three_tissue_phantom(n=10)
    kept = np.flatnonzero((scheme[:, 3] < 10) | (np.abs(scheme[:, 3] - 2000) < 50))
    assert 0 < kept.size < len(scheme)
    affine = np.diag([2.0, 2.0, 2.0, 1.0])
    write_image(tmp_path / "dwi.nii.gz", signal, affine)
    write_image(tmp_path / "cut.nii.gz", signal[..., kept], affine)
    np.savetxt(tmp_path / "dwi.b", scheme)
    np.savetxt(tmp_path / "cut.b", scheme[kept])
    options = ["--algorithm", "tournier", "--number", "20", "--iter-voxels", "100", "--backend", "cpu", "--quiet"]
    assert main(["response", str(tmp_path / "dwi.nii.gz"), str(tmp_path / "chosen"), "--grad", str(tmp_path / "dwi.b"),
                 "--shells", "2000", *options]) == 0
    assert main(["response", str(tmp_path / "cut.nii.gz"), str(tmp_path / "cut"), "--grad", str(tmp_path / "cut.b"),
                 *options]) == 0
    chosen, shells = read_response(tmp_path / "chosen_wm.txt")
    cut, _ = read_response(tmp_path / "cut_wm.txt")
    np.testing.assert_allclose(shells, [2000], atol=50)
    np.testing.assert_array_equal(chosen, cut)
    np.testing.assert_array_equal(image(tmp_path / "chosen_voxels.nii.gz"), image(tmp_path / "cut_voxels.nii.gz"))
