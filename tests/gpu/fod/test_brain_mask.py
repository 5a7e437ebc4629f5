"""A brain mask from the DWI alone against MRtrix3's ``dwi2mask`` (the same voxels) on DIPY's
real small_64D and on a phantom head in noise with a dark core; and what the response job does
without a mask: its voxels chosen within that mask, as ``dwi2response`` chooses them."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from gpu.fod.brain_mask import dwi_brain_mask
from worker.io.gradients import read_gradients
from worker.io.images import load_image_data, read_image_header, write_image

pytestmark = pytest.mark.requires_mrtrix


def _image(path):
    return load_image_data(read_image_header(path, "image"))


def _dwi2mask(dwi, bval, bvec, out):
    subprocess.run(["dwi2mask", "-quiet", "-nthreads", "1", "-fslgrad", str(bvec), str(bval), str(dwi), str(out)],
                   check=True)
    return _image(out) > 0


@pytest.fixture(scope="module")
def head_in_noise(tmp_path_factory):
    from tests.worker.jobs.fod_phantom import write_head_in_noise

    head = write_head_in_noise(tmp_path_factory.mktemp("head"))
    return head["dwi"], head["bval"], head["bvec"], head["inside"]


def test_mask_of_a_head_in_noise_is_dwi2mask_s(head_in_noise, tmp_path):
    dwi, bval, bvec, inside = head_in_noise
    info = read_image_header(dwi, "dwi")
    ours = dwi_brain_mask(load_image_data(info), read_gradients(info, bvecs=bvec, bvals=bval)[:, 3])
    theirs = _dwi2mask(dwi, bval, bvec, tmp_path / "mask.nii")
    np.testing.assert_array_equal(ours, theirs)
    # it is the head, its dark block filled in, and not the noise
    assert ours[inside].mean() > 0.95 and ours[10:14, 10:14, 5:7].all() and ours.sum() < 1.1 * inside.sum()


def test_mask_of_small_64d_is_dwi2mask_s(tmp_path):
    from dipy.data import get_fnames

    image, bval, bvec = get_fnames(name="small_64D")
    info = read_image_header(image, "dwi")
    ours = dwi_brain_mask(load_image_data(info), read_gradients(info, bvecs=bvec, bvals=bval)[:, 3])
    theirs = _dwi2mask(image, bval, bvec, tmp_path / "mask.nii")
    np.testing.assert_array_equal(ours, theirs)
    assert 0 < ours.sum() < ours.size


def test_responses_without_a_mask_are_those_within_dwi2mask_s(head_in_noise, tmp_path):
    from service.cli import main

    dwi, bval, bvec, _ = head_in_noise
    mask = tmp_path / "dwi2mask.nii"
    _dwi2mask(dwi, bval, bvec, mask)
    common = ["--bval", str(bval), "--bvec", str(bvec), "--backend", "cpu", "--quiet"]
    assert main(["response", str(dwi), str(tmp_path / "made"), *common]) == 0
    assert main(["response", str(dwi), str(tmp_path / "given"), "--mask", str(mask), *common]) == 0
    for tissue in ("wm", "gm", "csf"):
        assert (tmp_path / f"made_{tissue}.txt").read_text() == (tmp_path / f"given_{tissue}.txt").read_text()
    import json

    sidecar = json.loads((tmp_path / "made_response.json").read_text())
    made = int((_image(mask) > 0).sum())
    assert sidecar["brain_mask_voxels"] == made
    assert any(w.startswith(f"no mask given: voxels were chosen within a brain mask made from the DWI as dwi2mask "
                            f"makes it ({made} voxels)") for w in sidecar["warnings"])
