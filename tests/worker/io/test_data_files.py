"""Where an image's data may be: up to 1 MiB past it, compressed or not (one rule for .nii,
.nii.gz and .mif), and a .mih's data file beside it, not a link to a file elsewhere."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from tests.worker.io.test_voxel_grid import DATA, mif_text, raw_nifti
from worker.errors import InputError
from worker.io.images import check_image_data, check_image_limits, read_image_header

_MIB = 1 << 20


def _checked(path):
    info = check_image_limits(path, "fod", max_input_bytes=1 << 30, max_voxels=1 << 20)
    return check_image_data(info, "fod")


def test_trailing_bytes_follow_one_rule_with_or_without_compression(tmp_path):
    header = nib.Nifti1Header()
    padded = raw_nifti(tmp_path / "padded.nii", header, extra=bytes(_MIB))
    assert _checked(padded) is None  # 1 MiB of padding passes
    longer = raw_nifti(tmp_path / "longer.nii", header, extra=bytes(3 * _MIB))
    with pytest.raises(InputError) as plain:
        _checked(longer)
    assert plain.value.title == "Input larger than its header"
    assert plain.value.detail == (
        f"fod: the file holds {3 * _MIB} bytes past the image data its header declares, more than the "
        f"{_MIB} bytes of padding allowed; the file is damaged, write it again"
    )
    compressed = tmp_path / "longer.nii.gz"
    compressed.write_bytes(gzip.compress(longer.read_bytes(), compresslevel=1))
    with pytest.raises(InputError) as packed:
        _checked(compressed)
    assert packed.value.title == plain.value.title
    mif = tmp_path / "longer.mif"
    mif.write_bytes(mif_text(["1,0,0,0", "0,1,0,0", "0,0,1,0"]) + bytes(3 * _MIB))
    with pytest.raises(InputError) as mrtrix:
        _checked(mif)
    assert mrtrix.value.detail == plain.value.detail


def linked_mih(folder: Path, data: np.ndarray) -> Path:
    """``folder/subject/fod.mih`` of float32 ``data`` whose ``fod.dat`` is a link to
    ``folder/elsewhere/secret.txt``."""
    secret = folder / "elsewhere" / "secret.txt"
    subject = folder / "subject"
    for made in (secret.parent, subject):
        made.mkdir()
    secret.write_bytes(data.astype("<f4").tobytes(order="F"))
    os.symlink(secret, subject / "fod.dat")
    ndim = data.ndim
    header = subject / "fod.mih"
    header.write_text(f"mrtrix image\ndim: {','.join(map(str, data.shape))}\nvox: {','.join(['2'] * ndim)}\n"
                      f"layout: {','.join(f'+{a}' for a in range(ndim))}\ndatatype: Float32LE\nfile: fod.dat 0\nEND\n")
    return header


def test_mih_data_file_linked_from_another_folder_is_refused(tmp_path):
    header = linked_mih(tmp_path, DATA)
    folder = header.parent
    with pytest.raises(InputError) as caught:
        read_image_header(header, "FOD")
    assert caught.value.title == "Data file outside the header's folder"
    assert caught.value.detail == (
        "the FOD file 'fod.mih' keeps its data in 'fod.dat', a link to a file in another folder; put the "
        "data file itself beside the header, or make one file of both with mrconvert fod.mih fod.mif"
    )
    # a link within the folder is the folder's own file
    (folder / "fod.dat").unlink()
    (folder / "data.bin").write_bytes(DATA.tobytes(order="F"))
    os.symlink("data.bin", folder / "fod.dat")
    assert read_image_header(header, "FOD").data_path == folder / "fod.dat"
