"""Headers whose grid cannot place the image (NaN voxel sizes, an all-zero sform, a
transform of 1e300) are refused from the header, saying what to fix, or read through the
qform where that places the image; sizes are exact integers however large the dims."""

from __future__ import annotations

from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from worker.errors import InputError
from worker.io.images import check_image_limits, read_image_header
from worker.io.mif import read_mif_header
from worker.io.nifti import read_nifti_header
from worker.io.voxel_grid import grid_problem

DATA = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


def raw_nifti(path: Path, header: nib.Nifti1Header, data: np.ndarray = DATA, *, extra: bytes = b"") -> Path:
    """``header`` and ``data`` as a ``.nii`` byte for byte (nibabel's writer would mend the header)."""
    header = header.copy()
    header.set_data_shape(data.shape)
    header.set_data_dtype(data.dtype)
    offset = header.sizeof_hdr + 4
    header["vox_offset"] = offset
    path.write_bytes(header.binaryblock + b"\0" * 4 + data.tobytes(order="F") + extra)
    return path


def huge_nifti2(path: Path) -> Path:
    """A NIfTI-2 header (no data) of 2**40 × 2**40 × 2**40 float32 voxels."""
    header = nib.Nifti2Header()
    header.set_data_shape((2**40, 2**40, 2**40))
    header.set_data_dtype(np.float32)
    header["vox_offset"] = 544
    path.write_bytes(header.binaryblock + b"\0" * 4)
    return path


def mif_text(transform_rows: list[str], dims: str = "2,3,4") -> bytes:
    lines = ["mrtrix image", f"dim: {dims}", "vox: 2,2,2", "layout: +0,+1,+2", "datatype: Float32LE",
             *(f"transform: {row}" for row in transform_rows)]
    body = "\n".join(lines) + "\n"
    offset = len(body) + len("file: . 0000\nEND\n")
    offset += -offset % 4
    text = (body + f"file: . {offset:04d}\nEND\n").encode()
    return text + b"\0" * (offset - len(text)) + DATA.tobytes(order="F")


def test_grid_problem_names_each_fault_and_accepts_a_scanner_grid():
    oblique = np.eye(4)
    oblique[:3, :3] = [[1.8, 0.3, 0], [-0.3, 1.8, 0], [0, 0, 2.5]]
    oblique[:3, 3] = [-90.0, 126.0, -72.0]
    assert grid_problem(oblique, (1.82, 1.82, 2.5)) is None
    assert grid_problem(np.eye(4), (float("nan"), 1, 1)) == "voxel sizes [nan, 1.0, 1.0] that are not all numbers"
    assert grid_problem(np.diag([0.0, 0.0, 0.0, 1.0]), (1, 1, 1)) == (
        "a voxel-to-scanner transform that collapses an axis (a zero or degenerate matrix)"
    )
    huge = np.eye(4)
    huge[0, 0] = 1e300
    assert grid_problem(huge, (1, 1, 1)) == "a voxel-to-scanner transform or voxel sizes beyond 1e+06 mm"
    far = np.eye(4)
    far[0, 3] = 1e300
    assert grid_problem(far, (1, 1, 1)) == "an origin beyond 1e+30 mm"
    flat = np.diag([1.0, 1.0, 1e-9, 1.0])  # one axis a billionth of the others
    assert grid_problem(flat, (1, 1, 1e-9)) is not None


def test_nifti_with_nan_pixdim_is_refused_saying_what_to_fix(tmp_path):
    header = nib.Nifti1Header()
    header.set_sform(np.diag([2.0, 2.0, 2.0, 1.0]), code=1)
    header["pixdim"][1] = np.nan
    with pytest.raises(InputError) as caught:
        read_nifti_header(raw_nifti(tmp_path / "nan.nii", header), "FOD")
    assert caught.value.title == "Invalid affine"
    assert caught.value.detail == (
        "the FOD file 'nan.nii' has voxel sizes [nan, 1.0, 1.0] that are not all numbers; fix its header "
        "(pixdim, sform and qform, e.g. with nibabel or mrconvert from the scanner's data) and send it again"
    )


def test_all_zero_sform_falls_back_to_a_valid_qform_with_a_warning(tmp_path):
    qform = np.array([[0, 0, 2.5, -60], [-2, 0, 0, 80], [0, 3, 0, -40], [0, 0, 0, 1]], float)
    header = nib.Nifti1Header()
    header.set_qform(qform, code=1)
    header["sform_code"] = 1  # srow_* left all zero
    path = raw_nifti(tmp_path / "zero_sform.nii", header)
    assert not nib.load(path).affine[:3, :3].any()  # nibabel takes the zero sform
    info = read_nifti_header(path, "FOD")
    np.testing.assert_allclose(info.affine, qform, atol=1e-6)
    # the grid outputs are written on carries the qform as its sform too
    np.testing.assert_allclose(info.header.get_sform(), qform, atol=1e-6)
    assert info.header["sform_code"] == 1
    assert info.warnings == (
        "the FOD file 'zero_sform.nii' has a voxel-to-scanner transform that collapses an axis (a zero or "
        "degenerate matrix) in its sform; its qform was used instead. Check the result's orientation, and "
        "fix the input's sform",
    )


def test_all_zero_sform_without_a_qform_is_refused(tmp_path):
    header = nib.Nifti1Header()
    header["sform_code"] = 1
    with pytest.raises(InputError) as caught:
        read_nifti_header(raw_nifti(tmp_path / "zero.nii", header), "mask")
    assert caught.value.detail.startswith(
        "the mask file 'zero.nii' has a voxel-to-scanner transform that collapses an axis"
    )


@pytest.mark.parametrize("rows, what", [
    (["1e300,0,0,0", "0,1,0,0", "0,0,1,0"], "a voxel-to-scanner transform or voxel sizes beyond 1e+06 mm"),
    (["1,0,0,1e300", "0,1,0,0", "0,0,1,0"], "an origin beyond 1e+30 mm"),
])
def test_mif_with_an_absurd_transform_is_refused(tmp_path, rows, what):
    path = tmp_path / "fod.mif"
    path.write_bytes(mif_text(rows))
    with pytest.raises(InputError) as caught:
        read_mif_header(path, "FOD")
    assert caught.value.title == "Invalid MRtrix image header"
    assert caught.value.detail.startswith(f"the FOD file 'fod.mif' has {what}; write it again with MRtrix3")


def test_mif_with_a_scanner_transform_is_read(tmp_path):
    path = tmp_path / "fod.mif"
    path.write_bytes(mif_text(["1,0,0,-10", "0,1,0,20", "0,0,1,-30"]))
    info = read_image_header(path, "FOD")
    np.testing.assert_array_equal(info.affine, [[2, 0, 0, -10], [0, 2, 0, 20], [0, 0, 2, -30], [0, 0, 0, 1]])


def test_nifti2_dims_of_2_to_the_40_meet_the_voxel_limit_first(tmp_path):
    """np.prod of (2**40,)*3 wraps to 0: the limits saw an empty image and only the memory
    estimate stopped it; the exact product is 2**120 voxels."""
    path = huge_nifti2(tmp_path / "huge.nii")
    info = read_nifti_header(path, "FOD")
    assert info.n_voxels == 2**120 and info.data_bytes == 4 * 2**120
    with pytest.raises(InputError) as caught:
        check_image_limits(path, "fod", max_input_bytes=8 << 30, max_voxels=1 << 26)
    assert caught.value.title == "Too many voxels"
    assert caught.value.detail == (
        f"fod: the image grid 1099511627776×1099511627776×1099511627776 has {2**120} voxels, more than "
        "this server's limit of 67108864 (FIBERTENSOR_MAX_VOXELS); crop it"
    )


def test_mif_dims_are_exact_integers(tmp_path):
    path = tmp_path / "huge.mif"
    path.write_bytes(mif_text(["1,0,0,0", "0,1,0,0", "0,0,1,0"], dims=f"{2**40},{2**40},{2**40}"))
    info = read_mif_header(path, "FOD")
    assert info.n_voxels == 2**120 and info.data_bytes == 4 * 2**120
