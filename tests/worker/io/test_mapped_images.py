"""Slabs of a mapped image hold the bits the whole-image read gives, with the same checksums,
for every stored form a DWI comes in; no scratch file is left behind."""

from __future__ import annotations

import subprocess

import nibabel as nib
import numpy as np
import pytest

from worker.errors import InputError
from worker.io.images import load_image_data_with_sha256, read_image_header
from worker.io.mapped_images import map_image

STORED = (np.random.default_rng(0).random((7, 5, 9, 4)) * 1000).astype(np.int16)


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mapped")
    scaled = nib.Nifti1Image(STORED, np.diag([-2.0, 2.0, 2.0, 1.0]))
    scaled.header.set_slope_inter(0.37, 1.5)
    nib.save(scaled, folder / "scaled.nii")
    nib.save(scaled, folder / "scaled.nii.gz")
    nib.save(nib.Nifti1Image(STORED.astype(">f4"), np.eye(4)), folder / "big_endian.nii")
    nib.save(nib.Nifti1Image(STORED.astype(">f4"), np.eye(4)), folder / "big_endian.nii.gz")
    nib.save(nib.Nifti2Image(STORED.astype(np.float32), np.eye(4)), folder / "nifti2.nii.gz")
    # MRtrix layouts: volume-fastest, reversed axes, compressed, header apart from data
    for name, strides in (("volume_fastest.mif", "4,1,2,3"), ("reversed.mif.gz", "-4,-1,2,3"),
                          ("apart.mih", "1,2,3,4")):
        subprocess.run(["mrconvert", "-quiet", str(folder / "scaled.nii"), str(folder / name), "-strides", strides],
                       check=True)
    return folder


@pytest.mark.parametrize("name", ["scaled.nii", "scaled.nii.gz", "big_endian.nii", "big_endian.nii.gz", "nifti2.nii.gz",
                                  "volume_fastest.mif", "reversed.mif.gz", "apart.mih"])
def test_slabs_are_the_whole_read(images, name, tmp_path):
    info = read_image_header(images / name, "dwi")
    whole, sha256 = load_image_data_with_sha256(info)
    mapped = map_image(info, tmp_path, "dwi")
    slabs = np.concatenate([mapped.slab(0, 4), mapped.slab(4, 9)], axis=2)
    assert slabs.dtype == np.float32 and slabs.flags.f_contiguous
    assert np.array_equal(slabs.view(np.uint32), whole.view(np.uint32))
    assert mapped.sha256 == sha256
    assert list(tmp_path.iterdir()) == []
    assert map_image(info, tmp_path, "dwi", hashed=False).sha256 == {}


def test_a_truncated_file_is_refused_as_the_whole_read_refuses_it(images, tmp_path):
    cut = tmp_path / "cut.nii"
    cut.write_bytes((images / "scaled.nii").read_bytes()[:-100])
    info = read_image_header(cut, "dwi")
    with pytest.raises(InputError) as whole:
        load_image_data_with_sha256(info)
    with pytest.raises(InputError) as mapped:
        map_image(info, tmp_path, "dwi")
    assert (mapped.value.title, mapped.value.detail) == (whole.value.title, whole.value.detail)
