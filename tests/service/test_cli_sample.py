"""``fibertensor sample --dwi``: the DWI phantom and its truth, and ``fibertensor fod --peaks``
on it finding the fibres it was made of."""

from __future__ import annotations

import json

import nibabel as nib
import numpy as np
import pytest

from gpu.fod import dwi_phantom, shell_scheme, tissue_responses
from service.cli import main
from worker.io.gradients import read_fsl_gradients
from worker.io.response_files import read_response
from worker.sample import DWI_SAMPLE_SHELLS

SHAPE = (16, 16, 8)


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    folder = tmp_path_factory.mktemp("dwi_sample")
    assert main(["sample", "--dwi", str(folder), "--shape", *map(str, SHAPE)]) == 0
    return folder


def load(path):
    return np.asarray(nib.load(path).dataobj)


def test_the_dwi_and_its_gradients_are_the_phantom(sample):
    description = json.loads((sample / "sample.json").read_text())
    assert description["shape"] == list(SHAPE) and description["snr"] == 20.0
    assert sorted(description["files"].values()) == sorted(
        ["dwi.nii.gz", "dwi.bval", "dwi.bvec", "mask.nii.gz", "truth_peaks.nii.gz", "truth_count.nii.gz",
         "truth_fractions.nii.gz", "truth_wm.txt", "truth_gm.txt", "truth_csf.txt"])
    n_b0, shells = DWI_SAMPLE_SHELLS
    bvals, bvecs = shell_scheme(n_b0, shells, seed=0)
    image = nib.load(sample / "dwi.nii.gz")
    np.testing.assert_array_equal(np.asarray(image.dataobj), dwi_phantom(SHAPE, bvals, bvecs, snr=20.0, seed=0)["dwi"])
    scheme = read_fsl_gradients(sample / "dwi.bvec", sample / "dwi.bval", image.affine, len(bvals))
    np.testing.assert_allclose(scheme, np.column_stack([bvecs, bvals]), atol=1e-9)
    for tissue, exact in zip(("wm", "gm", "csf"), tissue_responses([0.0] + [b for b, _ in shells])):
        np.testing.assert_allclose(read_response(sample / f"truth_{tissue}.txt")[0], exact, rtol=1e-6)


def test_truth_peaks_are_the_fibres_largest_first(sample):
    peaks = load(sample / "truth_peaks.nii.gz").reshape(*SHAPE, 3, 3)
    count = load(sample / "truth_count.nii.gz")
    wm = load(sample / "truth_fractions.nii.gz")[..., 0]
    amplitudes = np.linalg.norm(peaks, axis=-1)
    assert np.all(np.diff(amplitudes, axis=-1) <= 0)
    np.testing.assert_array_equal((amplitudes > 0).sum(axis=-1), count)
    np.testing.assert_allclose(amplitudes.sum(axis=-1), wm, rtol=1e-6)  # the fibres' weights sum to 1
    np.testing.assert_array_equal(np.unique(count), [1, 2, 3])


def test_fod_with_its_responses_finds_its_fibres(sample, tmp_path):
    """Given the exact responses: each single-fibre WM voxel one peak, within a few degrees of
    its fibre; the CSF map its CSF fraction."""
    out = tmp_path / "out"
    assert main(["fod", str(sample / "dwi.nii.gz"), f"{out}/", "--bval", str(sample / "dwi.bval"),
                 "--bvec", str(sample / "dwi.bvec"), "--mask", str(sample / "mask.nii.gz"), "--response",
                 *(str(sample / f"truth_{t}.txt") for t in ("wm", "gm", "csf")), "--backend", "cpu", "--peaks",
                 "--quiet"]) == 0
    mask = load(sample / "mask.nii.gz") > 0
    fractions = load(sample / "truth_fractions.nii.gz")
    single = mask & (fractions[..., 0] > 0.6) & (load(sample / "truth_count.nii.gz") == 1)
    assert single.sum() > 50
    assert np.all(load(out / "count.nii.gz")[single] == 1)
    truth = load(sample / "truth_peaks.nii.gz").reshape(*SHAPE, 3, 3)[single, 0]
    found = load(out / "peaks.nii.gz").reshape(*SHAPE, 3, 3)[single, 0]
    cosine = np.abs((truth * found).sum(-1)) / np.linalg.norm(truth, axis=-1) / np.linalg.norm(found, axis=-1)
    angles = np.degrees(np.arccos(np.clip(cosine, 0, 1)))
    assert np.median(angles) < 2.5 and angles.max() < 8.0
    csf = load(out / "csf.nii.gz")[..., 0] * np.sqrt(4 * np.pi)
    assert np.median(np.abs(csf - fractions[..., 2])[mask]) < 0.03


@pytest.mark.parametrize("option, value, message", [("--snr", "0", "argument --snr: must be at least 1, not 0"),
                                                    ("--shape", "0", "argument --shape: must be at least 1, not 0"),
                                                    ("--noise", "x", "argument --noise: 'x' is not a number")])
def test_out_of_range_options_are_refused(tmp_path, capsys, option, value, message):
    values = [value] * (3 if option == "--shape" else 1)
    with pytest.raises(SystemExit) as exit_:
        main(["sample", "--dwi", str(tmp_path / "s"), option, *values])
    assert exit_.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


def test_a_file_as_outdir_is_refused(tmp_path, capsys):
    (tmp_path / "taken").write_text("")
    assert main(["sample", "--dwi", str(tmp_path / "taken")]) == 2
    assert "is a file; choose another OUTDIR" in capsys.readouterr().err
    assert (tmp_path / "taken").read_text() == ""


def test_the_dwi_sample_defaults_to_a_larger_grid(tmp_path):
    """40 × 40 × 20: dhollander's single-fibre WM (0.5 % of the WM) about ten voxels, not one."""
    assert main(["sample", "--dwi", str(tmp_path)]) == 0
    assert json.loads((tmp_path / "sample.json").read_text())["shape"] == [40, 40, 20]
