"""Reading a DWI for the fod and response jobs: a ``.nii.gz`` inflated on several threads (one
job alone on a machine, as ``fibertensor fod`` runs) gives the one-thread read's arrays and
checksums."""

from __future__ import annotations

import numpy as np

from tests.worker.jobs.fod_phantom import AFFINE, write_phantom
from worker.io import nifti
from worker.io.images import write_image
from worker.jobs.fod.inputs import check_dwi_inputs, read_dwi


def test_a_dwi_inflated_on_several_threads_reads_as_on_one(tmp_path, monkeypatch):
    phantom = write_phantom(tmp_path, shells=((1000, 20),), n_b0=2)
    paths = phantom["paths"]
    dwi = write_image(tmp_path / "dwi.nii.gz", phantom["dwi"], AFFINE)
    plan = check_dwi_inputs(dwi, bval=paths["bval"], bvec=paths["bvec"], mask=paths["mask"])
    one = read_dwi(plan)
    monkeypatch.setattr(nifti, "_PARALLEL_INFLATE_BYTES", 0)  # the small test file goes to rapidgzip too
    several = read_dwi(plan, inflate_threads=3)
    np.testing.assert_array_equal(several.dwi, phantom["dwi"].astype(np.float32))
    np.testing.assert_array_equal(several.dwi, one.dwi)
    np.testing.assert_array_equal(several.mask, one.mask)
    assert several.sha256 == one.sha256 and set(several.sha256) == {"dwi.nii.gz", "mask.nii"}
