"""Gradient tables against MRtrix3's own reading of the same files (``mrinfo -export_grad_mrtrix``)."""

from __future__ import annotations

import logging

import nibabel as nib
import numpy as np
import pytest
from dipy.data import get_fnames

from gpu.fod.gradient_scheme import normalise_scheme
from worker.errors import InputError
from worker.io.gradients import (read_fsl_gradients, read_gradients, read_mrtrix_gradients, scheme_from_header,
                                 write_fsl_gradients)
from worker.io.images import read_image_header
from worker.io.mif import write_mif


def _dipy(name: str):
    image, bvals, bvecs = get_fnames(name=name)
    return image, bvecs, bvals


def _mrtrix_scheme(mrtrix, tmp_path, image, *options) -> np.ndarray:
    out = tmp_path / "scheme.b"
    mrtrix("mrinfo", image, *options, "-export_grad_mrtrix", out, "-force")
    # MRtrix3 keeps the NaN directions some bvecs give b=0 volumes; ours are [0 0 0].
    return np.nan_to_num(np.loadtxt(out))


def _flipped_copy(image, tmp_path):
    """The same DWI stored with its first axis reversed: the affine's determinant changes sign."""
    img = nib.load(image)
    affine = img.affine.copy()
    affine[:3, 3] += affine[:3, 0] * (img.shape[0] - 1)
    affine[:3, 0] *= -1
    out = tmp_path / "flipped.nii"
    nib.save(nib.Nifti1Image(np.asarray(img.dataobj)[::-1], affine), out)
    return out


@pytest.mark.parametrize("name", ["small_64D", "small_101D"])
@pytest.mark.parametrize("flip", [False, True])
def test_fsl_gradients_match_mrtrix_fslgrad(mrtrix, tmp_path, name, flip):
    image, bvecs, bvals = _dipy(name)
    if flip:
        image = _flipped_copy(image, tmp_path)
    info = read_image_header(image, "DWI")
    sign = np.sign(np.linalg.det(info.affine[:3, :3]))
    assert sign == (1 if flip else -1)
    ours = read_gradients(info, bvecs=bvecs, bvals=bvals)
    reference = _mrtrix_scheme(mrtrix, tmp_path, image, "-fslgrad", bvecs, bvals)
    assert ours.shape == (info.shape[3], 4) and ours.dtype == np.float64
    np.testing.assert_allclose(ours, reference, rtol=0, atol=1e-6)


def test_mif_dw_scheme_and_grad_file_match_mrtrix(mrtrix, tmp_path):
    image, bvecs, bvals = _dipy("small_64D")
    flipped = _flipped_copy(image, tmp_path)
    mif = tmp_path / "dwi.mif"
    mrtrix("mrconvert", flipped, mif, "-fslgrad", bvecs, bvals, "-strides", "-1,2,3,4")
    reference = _mrtrix_scheme(mrtrix, tmp_path, mif)
    np.testing.assert_allclose(read_gradients(read_image_header(mif, "DWI")), reference, rtol=0, atol=1e-6)
    # the exported file read as -grad gives the same again
    grad = tmp_path / "grad.b"
    mrtrix("mrinfo", mif, "-export_grad_mrtrix", grad)
    np.testing.assert_allclose(read_mrtrix_gradients(grad, 65), reference, rtol=0, atol=1e-6)
    # and FSL files of the .mif itself, in its stored (flipped) axis order
    fsl = tmp_path / "bvecs", tmp_path / "bvals"
    mrtrix("mrinfo", mif, "-export_grad_fsl", *fsl)
    ours = read_gradients(read_image_header(mif, "DWI"), bvecs=fsl[0], bvals=fsl[1])
    np.testing.assert_allclose(ours, reference, rtol=0, atol=1e-6)


def test_non_unit_directions_are_normalised_with_a_warning(tmp_path, caplog):
    grad = tmp_path / "grad.b"
    np.savetxt(grad, [[0, 0, 0, 0], [2, 0, 0, 1000], [0, 0.9, 0, 1000], [0, 0, 1, 1000]])
    with caplog.at_level(logging.WARNING):
        scheme = read_mrtrix_gradients(grad)
    assert "not unit vectors" in caplog.text
    np.testing.assert_allclose(scheme[:, :3], [[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]])
    # as MRtrix3: b scales with the squared norm once norms are far from one
    np.testing.assert_allclose(scheme[:, 3], [0, 4000, 810, 1000])


def test_every_reader_gives_the_normalised_scheme_of_mrtrix(mrtrix, tmp_path, caplog):
    """A b=0 volume without a direction (NaN, as FSL bvecs have it) and a direction whose norm
    is off by less than MRtrix3's b-value scaling tolerance: -grad, -fslgrad and a .mif's
    dw_scheme give what MRtrix3 gives (NaN directions as [0 0 0]) and what the solvers'
    normalisation gives; no b-value scales, the b=0 volume keeps its b."""
    rows = np.array([[0.6, 0.8, 0, 1000], [np.nan, np.nan, np.nan, 5], [1.001, 0, 0, 1000], [0, 0, 1, 1000]])
    bvals, unit = normalise_scheme(rows[:, 3], rows[:, :3])
    expected = np.column_stack([unit, bvals])
    np.testing.assert_allclose(expected, [[0.6, 0.8, 0, 1000], [0, 0, 0, 5], [1, 0, 0, 1000], [0, 0, 1, 1000]],
                               rtol=0, atol=1e-15)
    image = tmp_path / "dwi.nii"
    nib.save(nib.Nifti1Image(np.ones((2, 2, 2, 4), np.float32), np.eye(4)), image)
    grad, bvecs, bvals_file = tmp_path / "grad.b", tmp_path / "bvecs", tmp_path / "bvals"
    np.savetxt(grad, rows)
    # FSL's frame: x flipped against scanner space for this right-handed affine
    np.savetxt(bvecs, (rows[:, :3] * [-1, 1, 1]).T)
    np.savetxt(bvals_file, rows[:, 3][None])
    mif = write_mif(tmp_path / "dwi.mif", np.ones((2, 2, 2, 4), np.float32), np.eye(4),
                    keyval={"dw_scheme": "\n".join(",".join(f"{v:.17g}" for v in row) for row in rows)})
    with caplog.at_level(logging.WARNING):
        ours = {"-grad": read_mrtrix_gradients(grad, 4),
                "-fslgrad": read_fsl_gradients(bvecs, bvals_file, np.eye(4), 4),
                "dw_scheme": scheme_from_header(read_image_header(mif, "DWI").keyval, 4)}
    assert caplog.text.count("not unit vectors (norm off by up to 0.001)") == 3
    theirs = {"-grad": _mrtrix_scheme(mrtrix, tmp_path, image, "-grad", grad),
              "-fslgrad": _mrtrix_scheme(mrtrix, tmp_path, image, "-fslgrad", bvecs, bvals_file),
              "dw_scheme": _mrtrix_scheme(mrtrix, tmp_path, mif)}
    for source, scheme in ours.items():
        np.testing.assert_allclose(scheme, expected, rtol=0, atol=1e-15, err_msg=source)
        np.testing.assert_allclose(scheme, theirs[source], rtol=0, atol=1e-6, err_msg=source)


def test_zero_directions_scale_b_as_mrtrix(mrtrix, tmp_path):
    """A [0 0 0] direction (unlike a NaN one) makes MRtrix3 scale every b by its squared norm:
    its own b becomes 0, and the non-unit directions' b change with them."""
    rows = np.array([[0, 0, 0, 5], [2, 0, 0, 1000], [0, 0.9, 0, 1000], [np.nan, np.nan, np.nan, 0]])
    image = tmp_path / "dwi.nii"
    nib.save(nib.Nifti1Image(np.ones((2, 2, 2, 4), np.float32), np.eye(4)), image)
    grad = tmp_path / "grad.b"
    np.savetxt(grad, rows)
    scheme = read_mrtrix_gradients(grad)
    np.testing.assert_allclose(scheme, [[0, 0, 0, 0], [1, 0, 0, 4000], [0, 1, 0, 810], [0, 0, 0, 0]], atol=1e-12)
    np.testing.assert_allclose(scheme, _mrtrix_scheme(mrtrix, tmp_path, image, "-grad", grad), rtol=0, atol=1e-6)


def test_errors_name_the_fix(tmp_path):
    image, bvecs, bvals = _dipy("small_64D")
    info = read_image_header(image, "DWI")
    short = tmp_path / "short.bval"
    short.write_text(" ".join(["1000"] * 64))
    with pytest.raises(InputError, match="bvals file 'short.bval' has 64"):
        read_fsl_gradients(bvecs, short, info.affine)
    grad = tmp_path / "grad.b"
    np.savetxt(grad, np.tile([1, 0, 0, 1000], (64, 1)))
    with pytest.raises(InputError, match="64 gradient rows but the image has 65 volumes"):
        read_gradients(info, grad=grad)
    with pytest.raises(InputError, match="'nope.bvec' does not exist"):
        read_gradients(info, bvecs=tmp_path / "nope.bvec", bvals=bvals)
    with pytest.raises(InputError, match="give both bvecs and bvals"):
        read_gradients(info, bvecs=bvecs)
    with pytest.raises(InputError, match="needs its gradients"):
        read_gradients(info)
    nan_dwi = tmp_path / "nan.bvec"
    vecs = np.loadtxt(bvecs)
    vecs[3] = np.nan
    np.savetxt(nan_dwi, vecs)
    with pytest.raises(InputError, match=r"non-finite directions for diffusion-weighted volumes \[3\]"):
        read_gradients(info, bvecs=nan_dwi, bvals=bvals)


@pytest.mark.parametrize("handedness", ["right", "left", "oblique"])
def test_written_fsl_pairs_read_back_as_the_scheme(mrtrix, tmp_path, handedness):
    """write_fsl_gradients, read by MRtrix3 (-fslgrad) and by us: the scheme given, for a
    right-handed (x flipped in the file), a left-handed and a rotated affine."""
    rng = np.random.default_rng(3)
    directions = rng.standard_normal((12, 3))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    scheme = np.column_stack([directions, rng.choice([1000.0, 2000.0], 12)])
    scheme[:2] = 0.0
    affine = np.diag([2.0, 2.5, 3.0, 1.0])
    if handedness == "left":
        affine[0, 0] = -2.0
    elif handedness == "oblique":
        turn = np.linalg.qr(rng.standard_normal((3, 3)))[0]
        affine[:3, :3] = turn @ affine[:3, :3]
    image = tmp_path / "dwi.nii"
    nib.save(nib.Nifti1Image(np.zeros((2, 2, 2, 12), np.float32), affine), image)
    bvecs, bvals = write_fsl_gradients(tmp_path / "dwi.bvec", tmp_path / "dwi.bval", scheme, affine)
    np.testing.assert_allclose(read_fsl_gradients(bvecs, bvals, affine, 12), scheme, atol=1e-9)
    theirs = _mrtrix_scheme(mrtrix, tmp_path, image, "-fslgrad", bvecs, bvals)
    np.testing.assert_allclose(theirs, scheme, atol=1e-6)
