"""The image writers' files byte for byte: the sha256 of what ``write_mif`` and ``save_image``
(``save_nifti_atomic`` for NIfTI) write for arrays in every memory order (C, Fortran,
strided, reversed) is pinned to what they wrote at commit 0312260, so a faster writer that
changes one byte fails here; MRtrix3 and nibabel read those files in
tests/worker/io/test_mif.py and test_nifti_read_path.py."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from tests.worker.io.grids import oblique_affine, save_nifti
from worker.io.images import read_image_header, save_image
from worker.io.mif import write_mif

SHAPE = (6, 5, 4, 3)


def volume(dtype: str, order: str) -> np.ndarray:
    """A (6, 5, 4, 3) volume of ``dtype`` laid out in memory as ``order`` says: C, F, a strided
    view (every other voxel of a larger array), or reversed (negative strides)."""
    rng = np.random.default_rng(11)
    values = rng.normal(scale=50.0, size=(12, 10, 8, 6))
    values = values > 0 if dtype == "bool" else values.astype(dtype)
    if order == "strided":
        return values[::2, ::2, ::2, ::2]
    values = values[:6, :5, :4, :3]
    if order == "reversed":
        return np.ascontiguousarray(values[::-1, :, ::-1])[::-1, :, ::-1]
    return np.asarray(values, order=order)


def digest(*paths) -> str:
    sha = hashlib.sha256()
    for path in paths:
        sha.update(path.read_bytes())
    return sha.hexdigest()


MIF_CASES = {
    # name: (dtype, memory order, suffix, write_mif keywords)
    "float32 F": ("float32", "F", ".mif", {}),
    "float32 C": ("float32", "C", ".mif", {}),
    "float32 strided": ("float32", "strided", ".mif", {}),
    "float32 reversed": ("float32", "reversed", ".mif", {}),
    "float32 C volume-contiguous": ("float32", "C", ".mif", {"layout": (2, 3, 4, 1)}),
    "float32 F flipped strides": ("float32", "F", ".mif", {"layout": (-3, 1, 2, -4)}),
    "float32 F big-endian": ("float32", "F", ".mif", {"datatype": "Float32BE"}),
    "float64 C as int16 scaled": ("float64", "C", ".mif", {"datatype": "Int16LE", "scaling": (1.0, 0.5),
                                                           "keyval": {"comments": "a\nb"}}),
    "uint8 F": ("uint8", "F", ".mif", {}),
    "bool C": ("bool", "C", ".mif", {}),
    "float32 F gz": ("float32", "F", ".mif.gz", {}),
    "float32 C gz": ("float32", "C", ".mif.gz", {}),
    "float32 F mih": ("float32", "F", ".mih", {}),
}
MIF_DIGESTS = {
    "float32 F": "8fc5af5855d24ec887e904a2862c22a06e47fb40dc246ab3187380ecc2ab0f85",
    "float32 C": "8fc5af5855d24ec887e904a2862c22a06e47fb40dc246ab3187380ecc2ab0f85",
    "float32 strided": "e00afde5c874350e4100e1b3a540991591922d7c317149c93c97c53a59062569",
    "float32 reversed": "8fc5af5855d24ec887e904a2862c22a06e47fb40dc246ab3187380ecc2ab0f85",
    "float32 C volume-contiguous": "afab6d9d6adeebb0857e04d6c9345097b401ba5092e77293a529b71c3f03df2a",
    "float32 F flipped strides": "8f0afd2e81d4e9b0215b5f43480e642e9a0c9e3234dfbbc2ddbfb1c289477a01",
    "float32 F big-endian": "b490fabef666efc1464096642fc2badebd7a3f72c5d84753e4bd5f013f92b1aa",
    "float64 C as int16 scaled": "9f133ffef7beb4ca2e8444ed060aa51a77ce11029e34179faed55d025e7d99ef",
    "uint8 F": "b8042bdf191cfae984b6e9b32236dfb431053b2bf5dbb5affbbca13eca5173db",
    "bool C": "5b245e504afb55c3523af376d59df390d7a9da54b47f45b78f2942c64bfb4cd5",
    "float32 F gz": "769352eeafc843035190888fd178f490d230c451687fedcb7a006d4d6ccb0fd4",
    "float32 C gz": "769352eeafc843035190888fd178f490d230c451687fedcb7a006d4d6ccb0fd4",
    "float32 F mih": "382ac6e4dba485fccfc353b683d20da191b3264ffce5e6b0742df4588c2b8761",
}


@pytest.mark.parametrize("case", MIF_CASES)
def test_write_mif_bytes_are_unchanged(tmp_path, case):
    dtype, order, suffix, keywords = MIF_CASES[case]
    path = write_mif(tmp_path / f"image{suffix}", volume(dtype, order), oblique_affine(), **keywords)
    files = [path, path.with_suffix(".dat")] if suffix == ".mih" else [path]
    assert digest(*files) == MIF_DIGESTS[case]


NIFTI_CASES = {
    # name: (dtype, memory order, suffix, reference)
    "float32 F nii": ("float32", "F", ".nii", ".nii"),
    "float32 C nii": ("float32", "C", ".nii", ".nii"),
    "float32 strided nii": ("float32", "strided", ".nii", ".nii"),
    "float32 reversed nii": ("float32", "reversed", ".nii", ".nii"),
    "uint8 C nii": ("uint8", "C", ".nii", ".nii"),
    "float32 C nii.gz": ("float32", "C", ".nii.gz", ".nii"),
    "float32 F nii from mif": ("float32", "F", ".nii", ".mif"),
    "float32 C mif from nii": ("float32", "C", ".mif", ".nii"),
    "uint8 F mif from mif": ("uint8", "F", ".mif", ".mif"),
}
NIFTI_DIGESTS = {
    "float32 F nii": "30c954cb647abf6c42b2435929da09db1c37f274a96a8554c7a44ceb373dd0b7",
    "float32 C nii": "30c954cb647abf6c42b2435929da09db1c37f274a96a8554c7a44ceb373dd0b7",
    "float32 strided nii": "a2048c5d2b36f6a3a3a393bad6c63a04c404a15541cc9643c4b36b8371a84049",
    "float32 reversed nii": "30c954cb647abf6c42b2435929da09db1c37f274a96a8554c7a44ceb373dd0b7",
    "uint8 C nii": "aa05a74202c86ba8530230d9fa4640c021ac3ac4fbea3898b22dcbabb9c0a8b4",
    "float32 C nii.gz": "eacb1685b27e025d610064c41543a1451ab0cf8774bba8879313351951749e78",
    "float32 F nii from mif": "73f791e5be61722eb8ad82fe8737ac89d154dbf800db48c04ed4abab0eac9bc4",
    "float32 C mif from nii": "ca00d5584c0c1cd1e9e87c274cd04ce1bc50adbde3be10fbbeac3cf8cd50d3f7",
    "uint8 F mif from mif": "0d77ebe5250269271a73a53b83a3804ff407e999896fb0d331b027b683d67924",
}


@pytest.mark.parametrize("case", NIFTI_CASES)
def test_save_image_bytes_are_unchanged(tmp_path, case):
    """``save_image`` on a NIfTI or MRtrix reference grid (the job's writer)."""
    dtype, order, suffix, reference = NIFTI_CASES[case]
    template = np.zeros(SHAPE, np.float32)
    if reference == ".mif":
        source = write_mif(tmp_path / "fod.mif", template, oblique_affine(), keyval={"comments": "subject 01"})
    else:
        source = tmp_path / "fod.nii"
        save_nifti(template, oblique_affine(), source)
    info = read_image_header(source, "FOD")
    path = save_image(info, volume(dtype, order), tmp_path / f"out{suffix}", threads=1)
    assert digest(path) == NIFTI_DIGESTS[case]
