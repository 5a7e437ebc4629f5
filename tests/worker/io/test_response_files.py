"""Response files against MRtrix3's: ours read theirs, and MRtrix3's dwi2fod reads ours."""

from __future__ import annotations

import nibabel as nib
import numpy as np
import pytest

from worker.errors import InputError
from worker.io.response_files import read_response, write_response

# amp2response's output on DIPY's small_64D (300 highest-FA voxels)
_MRTRIX_FILE = """# Shells: 0,994
# command_history: amp2response -force dwi.mif sf.mif vec.mif rf.txt  (version=3.0.3)
706.748248510071 0 0 0 0 0
364.475616808482 -91.4183107885546 17.4055848767022 -2.2865358073155 0.434435009646733 0.796403022759721
"""


def test_reads_mrtrix_file(tmp_path):
    path = tmp_path / "rf.txt"
    path.write_text(_MRTRIX_FILE)
    response, bvalues = read_response(path)
    np.testing.assert_array_equal(bvalues, [0, 994])
    assert response.shape == (2, 6)
    assert response[1, 1] == -91.4183107885546 and response[0, 0] == 706.748248510071


def test_round_trip_and_short_rows(tmp_path):
    path = tmp_path / "out.txt"
    response = np.array([[3000.0, 0, 0], [1500.5, -600.25, 120.125]])
    write_response(path, response, [0.0, 1000.4])
    assert path.read_text().splitlines()[0] == "# Shells: 0,1000"
    read, bvalues = read_response(path)
    np.testing.assert_array_equal(read, response)
    np.testing.assert_array_equal(bvalues, [0, 1000])
    path.write_text("100\n50 -10 2\n")  # MRtrix3 writes isotropic responses one number a row
    np.testing.assert_array_equal(read_response(path)[0], [[100, 0, 0], [50, -10, 2]])
    assert read_response(path)[1] is None


def test_mrtrix_reads_ours(mrtrix, tmp_path):
    """dwi2fod gives the same FODs with MRtrix3's file and with ours written from it."""
    rng = np.random.default_rng(1)
    theirs, ours = tmp_path / "theirs.txt", tmp_path / "ours.txt"
    theirs.write_text(_MRTRIX_FILE)
    write_response(ours, *read_response(theirs))
    grad = tmp_path / "grad.b"
    dirs = rng.normal(size=(30, 3))
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    np.savetxt(grad, np.vstack([[0, 0, 0, 0], np.hstack([dirs, np.full((30, 1), 994.0)])]))
    dwi = tmp_path / "dwi.nii"
    nib.save(nib.Nifti1Image(rng.uniform(100, 700, size=(2, 2, 1, 31)).astype(np.float32), np.eye(4)), dwi)
    fods = []
    for rf in (theirs, ours):
        out = tmp_path / f"fod_{rf.stem}.nii"
        mrtrix("dwi2fod", "msmt_csd", dwi, rf, out, "-grad", grad, "-lmax", "4")
        fods.append(np.asarray(nib.load(out).dataobj))
    assert np.abs(fods[0]).max() > 0.1
    np.testing.assert_array_equal(fods[0], fods[1])


def test_bad_files_name_the_problem(tmp_path):
    path = tmp_path / "rf.txt"
    with pytest.raises(InputError, match="does not exist"):
        read_response(path)
    path.write_text("# Shells: 0,1000\n1 2 3\n")
    with pytest.raises(InputError, match="lists 2 shells but has 1 rows"):
        read_response(path)
    path.write_text("1 two 3\n")
    with pytest.raises(InputError, match="not numbers"):
        read_response(path)
