"""NIfTI or MRtrix by file name: the service's header-only limits (gzip bombs refused from the
header), and outputs written on the input's grid in either format."""

from __future__ import annotations

import gzip
import hashlib
import zlib

import nibabel as nib
import numpy as np
import pytest

from tests.gpu.cuda.host_memory_blocks import pool as host_pool
from tests.worker.io.grids import oblique_affine, save_nifti
from worker.errors import InputError
from worker.io.images import (
    check_image_data, check_image_limits, image_format, load_image_data, load_image_data_with_sha256, read_image_header,
    save_image, write_image,
)
from worker.io.mif import read_mif_header, write_mif

LIMITS = {"max_input_bytes": 1 << 20, "max_voxels": 10_000}


def mif_header(dims: str, datatype: str = "Float32LE", offset: int = 128) -> bytes:
    text = f"mrtrix image\ndim: {dims}\nvox: 2,2,2\nlayout: +0,+1,+2\ndatatype: {datatype}\nfile: . {offset}\nEND\n"
    return text.encode().ljust(offset, b"\0")


def bomb(header: bytes) -> bytes:
    """``header`` then 16 MiB of zeros, gzip-compressed to a few kB, then bytes that are not
    gzip: whatever inflates past the zeros fails differently from a check of the header."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    body = compressor.compress(header) + compressor.compress(b"\0" * (16 << 20))
    return body + compressor.flush(zlib.Z_SYNC_FLUSH) + b"\xff" * 4096


def test_a_mif_gz_claiming_too_much_is_refused_from_its_header(tmp_path):
    path = tmp_path / "bomb.mif.gz"
    path.write_bytes(bomb(mif_header("2000,2000,2000", "Float64LE")))
    with pytest.raises(InputError, match="declares 64000000000 bytes of image data") as caught:
        check_image_limits(path, "fod", max_input_bytes=1 << 30, max_voxels=1 << 40)
    assert caught.value.title == "Input too large" and "FIBERTENSOR_MAX_INPUT_BYTES" in caught.value.detail


def test_a_nii_gz_claiming_too_much_is_refused_the_same_way(tmp_path):
    header = nib.Nifti1Header()
    header.set_data_shape((2000, 2000, 2000))
    header.set_data_dtype(np.float64)
    path = tmp_path / "bomb.nii.gz"
    path.write_bytes(bomb(header.binaryblock + b"\0" * 4))
    with pytest.raises(InputError, match="declares 64000000000 bytes"):
        check_image_limits(path, "fod", max_input_bytes=1 << 30, max_voxels=1 << 40)


def test_a_damaged_stream_within_the_limits_is_refused_when_read_through(tmp_path):
    path = tmp_path / "damaged.mif.gz"
    path.write_bytes(bomb(mif_header("2000,2000,2000", "Float64LE")))
    with pytest.raises(InputError, match="the gzip stream is incomplete or corrupt"):
        check_image_data(check_image_limits(path, "fod", max_input_bytes=1 << 40, max_voxels=1 << 40), "fod")


def test_too_many_voxels_is_refused(tmp_path):
    path = tmp_path / "big.mif"
    path.write_bytes(mif_header("100,100,2", "UInt8"))
    with pytest.raises(InputError, match="grid 100×100×2 has 20000 voxels") as caught:
        check_image_limits(path, "mask", **LIMITS)
    assert "FIBERTENSOR_MAX_VOXELS" in caught.value.detail


def test_a_stream_inflating_past_its_header_is_refused(tmp_path):
    path = tmp_path / "padded.mif.gz"
    path.write_bytes(gzip.compress(mif_header("2,2,2") + b"\0" * (3 << 20)))
    with pytest.raises(InputError, match="inflates to more than its header declares"):
        check_image_data(check_image_limits(path, "fod", **LIMITS), "fod")


@pytest.mark.parametrize("suffix", [".mif", ".mif.gz", ".nii.gz"])
def test_short_data_is_refused(tmp_path, suffix):
    path = tmp_path / f"short{suffix}"
    if suffix == ".nii.gz":
        save_nifti(np.ones((4, 4, 4), np.float32), np.eye(4), path)
        path.write_bytes(gzip.compress(gzip.decompress(path.read_bytes())[:-100]))
    else:
        data = mif_header("4,4,4") + b"\0" * 156
        path.write_bytes(gzip.compress(data) if suffix.endswith(".gz") else data)
    with pytest.raises(InputError, match="declares 256 bytes of image data but the file holds only 156"):
        check_image_data(check_image_limits(path, "fod", **LIMITS), "fod")


def test_a_whole_file_passes_and_its_header_comes_back(tmp_path):
    path = write_mif(tmp_path / "fod.mif.gz", np.zeros((4, 5, 6, 15), np.float32), oblique_affine())
    info = check_image_limits(path, "fod", **LIMITS)
    assert info.shape == (4, 5, 6, 15) and info.data_bytes == 4 * 5 * 6 * 15 * 4


def test_not_gzip_and_unknown_suffix_say_how_to_fix(tmp_path):
    path = tmp_path / "plain.mif.gz"
    path.write_bytes(mif_header("2,2,2") + b"\0" * 32)
    with pytest.raises(InputError, match="rename it without .gz"):
        check_image_limits(path, "fod", **LIMITS)
    with pytest.raises(InputError, match="convert it with mrconvert"):
        image_format(tmp_path / "fod.nrrd")


@pytest.mark.parametrize(("source", "output"), [(".nii.gz", ".mif.gz"), (".mif", ".nii.gz"), (".mif", ".mif")])
def test_save_image_puts_data_on_the_reference_grid(tmp_path, mrtrix, source, output):
    affine = oblique_affine()
    fod = np.random.default_rng(0).normal(size=(4, 5, 6, 6)).astype(np.float32)
    if source == ".mif":
        reference = write_mif(tmp_path / f"fod{source}", fod, affine, keyval={"comments": "subject 01"})
    else:
        reference = tmp_path / f"fod{source}"
        save_nifti(fod, affine, reference)
    info = read_image_header(reference, "FOD")
    peaks = fod[..., :3] * 2
    written = save_image(info, peaks, tmp_path / f"peaks{output}")

    back = read_image_header(written, "peaks")
    np.testing.assert_array_equal(load_image_data(back), peaks)
    np.testing.assert_allclose(back.affine, affine, atol=1e-5)
    assert back.zooms[:3] == pytest.approx((2.0, 2.5, 3.0))
    # MRtrix3 sees both on one grid (to the float32 precision of a NIfTI affine).
    np.testing.assert_allclose(np.loadtxt(mrtrix("mrinfo", written, "-transform").splitlines()),
                               np.loadtxt(mrtrix("mrinfo", reference, "-transform").splitlines()), atol=1e-5)
    if source == output == ".mif":
        assert read_mif_header(written).keyval == {"comments": "subject 01"}


@pytest.mark.parametrize("name", ["fod.nii.gz", "fod.nii", "fod.mif", "fod.mif.gz", "fod.mih"])
def test_the_read_gives_the_sha256_of_each_file_holding_the_image(tmp_path, name):
    """The array load_image_data gives, and hashlib's sha256 of each file as stored (an
    .mih header and its .dat file: two), from the same read."""
    data = np.random.default_rng(6).standard_normal((5, 4, 3, 6)).astype(np.float32)
    path = tmp_path / name
    write_image(path, data, oblique_affine())
    info = read_image_header(path, "FOD")
    values, sha256 = load_image_data_with_sha256(info)
    np.testing.assert_array_equal(values, load_image_data(info))
    files = [path, path.with_suffix(".dat")] if name.endswith(".mih") else [path]
    assert all(file.stat().st_size > 0 for file in files)
    assert sha256 == {file.name: hashlib.sha256(file.read_bytes()).hexdigest() for file in files}


@pytest.mark.parametrize("name, layout", [("fod.nii.gz", None), ("fod.nii", None), ("fod.mif", None),
                                          ("fod.mif", (2, 3, 4, 1)), ("fod.mif.gz", (2, 3, 4, 1)), ("fod.mih", None)])
def test_the_read_goes_straight_into_the_array_the_allocator_gives(tmp_path, name, layout):
    """An allocator such as gpu.cuda.host_memory.pinned_empty (here a pool of ordinary memory):
    the values are read into its array, the same as into np.empty's, and its block goes back
    when they are dropped."""
    data = np.random.default_rng(7).standard_normal((5, 4, 3, 6)).astype(np.float32)
    path = tmp_path / name
    if layout:
        write_mif(path, data, oblique_affine(), layout=layout)
    else:
        write_image(path, data, oblique_affine())
    info = read_image_header(path, "FOD")
    blocks, memory = host_pool()
    plain = load_image_data(info)
    for read in (lambda: load_image_data(info, empty=blocks.empty),
                 lambda: load_image_data_with_sha256(info, empty=blocks.empty)[0]):
        values = read()
        assert values.strides == plain.strides
        np.testing.assert_array_equal(values, plain)
        (block,) = (block for block in memory.live.values() if np.shares_memory(block, values))
        del values
        assert blocks.free_blocks == [(block.nbytes, block.ctypes.data)]
    assert (blocks.allocated, blocks.reused) == (1, 1)


def test_values_that_need_converting_are_the_same_with_an_allocator(tmp_path):
    """Scaled or other-typed data is converted into a new array: the allocator's buffer only
    held the stored values."""
    data = np.arange(5 * 4 * 3 * 6, dtype=np.int16).reshape(5, 4, 3, 6)
    path = tmp_path / "fod.nii"
    save_nifti(data, oblique_affine(), path)
    image = nib.load(path)
    image.header.set_slope_inter(0.5, 3.0)
    nib.save(image, path)
    info = read_image_header(path, "FOD")
    blocks, memory = host_pool()
    values = load_image_data(info, empty=blocks.empty)
    np.testing.assert_array_equal(values, nib.load(path).get_fdata(dtype=np.float32))
    assert blocks.allocated == 1 and not any(np.shares_memory(block, values) for block in memory.live.values())
