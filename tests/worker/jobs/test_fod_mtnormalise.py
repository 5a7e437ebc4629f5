"""``fod --mtnormalise``: the compartments a fod job writes, and the peaks it finds, are
MRtrix3's ``mtnormalise`` of the fit (within the mask given, or ``dwi2mask``'s mask of the DWI
without one), fitted whole or a slab at a time; a slab fit without a mask is refused."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest

import worker.jobs.fod.plan as fod_plan
from service.cli import main
from tests.worker.jobs.fod_phantom import write_head_in_noise
from worker.io.images import load_image_data, read_image_header
from worker.io.mif import read_mif_header

pytestmark = pytest.mark.requires_mrtrix

COMPARTMENTS = {"wm": "wmfod", "gm": "gm", "csf": "csf"}


def image(path):
    return load_image_data(read_image_header(path, "image"))


@pytest.fixture(scope="module")
def head(tmp_path_factory):
    """The DWI sample in noise (24×24×12), its mask, FSL files and exact responses."""
    folder = tmp_path_factory.mktemp("head")
    paths = write_head_in_noise(folder)
    sample = folder / "sample"
    return {**paths, "mask": sample / "mask.nii.gz",
            "responses": [str(sample / f"truth_{tissue}.txt") for tissue in COMPARTMENTS]}


def _fod(head, prefix, *options, responses=True, quiet=True):
    return main(["fod", str(head["dwi"]), str(prefix), "--bval", str(head["bval"]), "--bvec", str(head["bvec"]),
                 *(["--response", *head["responses"]] if responses else []), "--backend", "cpu",
                 *(["--quiet"] if quiet else []), *options])


def _theirs(folder, plain, tissues, mask):
    """mtnormalise of the unnormalised fit ``plain`` (a prefix), its outputs and balance factors."""
    pairs = [str(p) for t in tissues for p in (f"{plain}_{COMPARTMENTS[t]}.nii", folder / f"theirs_{t}.mif")]
    subprocess.run(["mtnormalise", "-quiet", "-nthreads", "1", *pairs, "-mask", str(mask), "-check_factors",
                    str(folder / "factors.txt")], check=True, capture_output=True)
    return np.atleast_1d(np.loadtxt(folder / "factors.txt"))


@pytest.mark.parametrize("masked", [True, False], ids=["mask given", "dwi2mask's mask"])
def test_fod_writes_mtnormalise_s_compartments(head, tmp_path, masked):
    mask = ["--mask", str(head["mask"])] if masked else []
    assert _fod(head, tmp_path / "plain", *mask) == 0
    assert _fod(head, tmp_path / "norm", *mask, "--mtnormalise") == 0
    if masked:
        their_mask = head["mask"]
    else:
        their_mask = tmp_path / "dwi2mask.nii"
        subprocess.run(["dwi2mask", "-quiet", "-fslgrad", str(head["bvec"]), str(head["bval"]), str(head["dwi"]),
                        str(their_mask)], check=True)
    factors = _theirs(tmp_path, tmp_path / "plain", COMPARTMENTS, their_mask)
    for tissue, name in COMPARTMENTS.items():
        ours, theirs = image(tmp_path / f"norm_{name}.nii"), image(tmp_path / f"theirs_{tissue}.mif")
        assert np.abs(ours - theirs).max() <= 1e-6 * np.abs(theirs).max()
    sidecar = json.loads((tmp_path / "norm_fod.json").read_text())["mtnormalise"]
    np.testing.assert_allclose(list(sidecar["balance_factors"].values()), factors, rtol=1e-5)
    assert sidecar["voxels"]["mask"] == int((image(their_mask) > 0).sum())
    assert sidecar["mask"] == ("the mask given" if masked else "the brain mask dwi2mask would make")
    their_scale = float(read_mif_header(tmp_path / "theirs_wm.mif").keyval["lognorm_scale"])
    assert sidecar["lognorm_scale"] == pytest.approx(their_scale, rel=1e-5)


def test_estimated_responses_and_peaks_come_from_one_brain_mask(head, tmp_path, capsys):
    """Estimating the responses and normalising without a mask: both within dwi2mask's mask,
    and the peaks are those of the normalised WM FOD as written."""
    assert _fod(head, tmp_path / "norm", "--mtnormalise", "--peaks", responses=False, quiet=False) == 0
    sidecar = json.loads((tmp_path / "norm_fod.json").read_text())
    brain = sidecar["estimated_responses"]["brain_mask_voxels"]
    normalised = sidecar["mtnormalise"]
    assert normalised["voxels"]["mask"] == brain
    assert (f"normalised as mtnormalise within the brain mask dwi2mask would make ({normalised['voxels']['kept']} of "
            f"{brain} voxels kept; balance factors WM ") in capsys.readouterr().out
    assert main(["peaks", str(tmp_path / "norm_wmfod.nii"), str(tmp_path / "again"), "--backend", "cpu",
                 "--quiet"]) == 0
    np.testing.assert_array_equal(image(tmp_path / "norm_peaks.nii.gz"), image(tmp_path / "again_peaks.nii.gz"))


def test_csd_normalises_its_one_compartment_with_a_warning(head, tmp_path):
    mask = ["--mask", str(head["mask"])]
    wm = ["--algorithm", "csd", "--response", head["responses"][0]]
    assert _fod(head, tmp_path / "plain", *mask, *wm, responses=False) == 0
    assert _fod(head, tmp_path / "norm", *mask, *wm, "--mtnormalise", responses=False) == 0
    factors = _theirs(tmp_path, tmp_path / "plain", ["wm"], head["mask"])
    ours, theirs = image(tmp_path / "norm_wmfod.nii"), image(tmp_path / "theirs_wm.mif")
    assert np.abs(ours - theirs).max() <= 1e-6 * np.abs(theirs).max()
    sidecar = json.loads((tmp_path / "norm_fod.json").read_text())
    np.testing.assert_allclose(list(sidecar["mtnormalise"]["balance_factors"].values()), factors, rtol=1e-5)
    assert any("one compartment alone" in warning for warning in sidecar["warnings"])


def test_a_mif_output_carries_the_field_s_scale(head, tmp_path):
    """As mtnormalise writes it: the ``lognorm_scale`` key of each .mif compartment."""
    dwi = tmp_path / "head.mif"
    subprocess.run(["mrconvert", "-quiet", str(head["dwi"]), str(dwi), "-fslgrad", str(head["bvec"]),
                    str(head["bval"])], check=True)
    assert main(["fod", str(dwi), str(tmp_path / "norm"), "--mask", str(head["mask"]), "--response",
                 *head["responses"], "--backend", "cpu", "--mtnormalise", "--quiet"]) == 0
    scale = json.loads((tmp_path / "norm_fod.json").read_text())["mtnormalise"]["lognorm_scale"]
    for name in COMPARTMENTS.values():
        assert float(read_mif_header(tmp_path / f"norm_{name}.mif").keyval["lognorm_scale"]) == pytest.approx(scale)


def test_slabs_normalise_as_the_whole_volume(head, tmp_path, monkeypatch, capsys):
    mask = ["--mask", str(head["mask"])]
    assert _fod(head, tmp_path / "whole", *mask, "--mtnormalise") == 0
    monkeypatch.setattr(fod_plan, "FIT_IN_MEMORY_BYTES", 0)
    monkeypatch.setattr(fod_plan, "SLAB_VOXELS", 3 * 24 * 24)
    assert _fod(head, tmp_path / "slabs", *mask, "--mtnormalise") == 0
    for name in COMPARTMENTS.values():
        np.testing.assert_array_equal(image(tmp_path / f"slabs_{name}.nii"), image(tmp_path / f"whole_{name}.nii"))
    capsys.readouterr()
    assert _fod(head, tmp_path / "nomask", "--mtnormalise") == 2
    err = capsys.readouterr().err
    assert "No mask to normalise within" in err and "give a brain mask" in err
    assert not list(tmp_path.glob("nomask*"))
