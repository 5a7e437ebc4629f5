"""The NIfTI read path against nibabel, the reader that owns the format in Python: every
NIfTI data type, both byte orders, scaled and unscaled, NIfTI-1 and -2, .nii and .nii.gz,
bit for bit; and the writer against nibabel's own bytes."""

from __future__ import annotations

import gzip
import hashlib
import tracemalloc

import nibabel as nib
import numpy as np
import pytest

from worker.errors import InputError
from worker.io import nifti
from worker.io.nifti import check_stored_size, load_nifti_data, read_nifti_header, save_nifti_atomic

# Every real data type nibabel reads and writes in NIfTI (it refuses FLOAT128 headers).
DTYPES = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float32", "float64"]


def stored_values(dtype: np.dtype, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Values over the whole range of ``dtype``: extremes, and for floats NaN, ±inf and -0."""
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        values = rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
        values.flat[:2] = info.min, info.max
        return values
    values = (rng.standard_normal(shape) * 1e3).astype(dtype)
    values.flat[:4] = np.nan, np.inf, -np.inf, -0.0
    return values


def write_nifti(path, stored: np.ndarray, *, version: int, byteorder: str, slope: float, inter: float,
                extension: bytes = b"") -> None:
    """A NIfTI file written field by field (header, optional extension, data in Fortran
    order and the header's byte order), independently of the reader under test."""
    klass = nib.Nifti2Header if version == 2 else nib.Nifti1Header
    header = klass(endianness=byteorder)
    header.set_data_shape(stored.shape)
    header.set_data_dtype(stored.dtype)
    header["scl_slope"], header["scl_inter"] = slope, inter
    size = klass.template_dtype.itemsize
    if extension:
        padded = extension + b"\0" * (-(len(extension) + 8) % 16)
        record = np.array([len(padded) + 8, 6], np.int32).astype(header.endianness + "i4").tobytes() + padded
        flag = b"\x01\0\0\0"
    else:
        record, flag = b"", b"\0\0\0\0"
    header["vox_offset"] = size + 4 + len(record)
    data = np.asarray(stored, stored.dtype.newbyteorder(byteorder)).tobytes(order="F")
    raw = header.binaryblock + flag + record + data
    path.write_bytes(gzip.compress(raw, compresslevel=1) if path.name.endswith(".gz") else raw)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal shape, dtype and bytes (NaN payloads and -0 included)."""
    return a.shape == b.shape and a.dtype == b.dtype and np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()


@pytest.mark.parametrize("suffix", [".nii", ".nii.gz"])
@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("byteorder", ["<", ">"])
@pytest.mark.parametrize("scaling", [(1.0, 0.0), (0.0, 0.0), (2.5, -3.0)], ids=["identity", "unset", "scaled"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_reads_what_nibabel_reads(tmp_path, dtype, scaling, byteorder, version, suffix):
    rng = np.random.default_rng(len(DTYPES) * version + DTYPES.index(dtype))
    stored = stored_values(np.dtype(dtype), (5, 4, 3, 6), rng)
    path = tmp_path / f"image{suffix}"
    write_nifti(path, stored, version=version, byteorder=byteorder, slope=scaling[0], inter=scaling[1])
    image = nib.load(path)
    assert isinstance(image, nib.Nifti2Image if version == 2 else nib.Nifti1Image)
    assert image.header.endianness == byteorder

    info = read_nifti_header(path, "FOD")
    values = load_nifti_data(info)
    assert same_bits(values, image.get_fdata(dtype=np.float32))
    assert values.flags.f_contiguous and values.flags.writeable
    raw = load_nifti_data(info, dtype=None)
    reference = image.dataobj.get_unscaled()
    assert raw.dtype == reference.dtype.newbyteorder("=") and raw.dtype.isnative
    assert np.array_equal(raw, reference, equal_nan=raw.dtype.kind == "f")
    assert same_bits(load_nifti_data(info, dtype=np.float64), values.astype(np.float64))


@pytest.mark.parametrize("suffix", [".nii", ".nii.gz"])
def test_header_extension_is_skipped(tmp_path, suffix):
    stored = np.arange(2 * 3 * 4 * 5, dtype=np.int16).reshape(2, 3, 4, 5)
    path = tmp_path / f"image{suffix}"
    write_nifti(path, stored, version=1, byteorder="<", slope=0.5, inter=1.0, extension=b"a comment " * 40)
    image = nib.load(path)
    assert len(image.header.extensions) == 1
    assert same_bits(load_nifti_data(read_nifti_header(path, "FOD")), image.get_fdata(dtype=np.float32))


@pytest.fixture(params=[1, 3], ids=["1 thread", "3 threads"])
def threads(request, monkeypatch):
    """Inflate on one thread (ISA-L) or on several (rapidgzip), the latter for files of any
    size here (small test files would otherwise stay on one)."""
    monkeypatch.setattr(nifti, "_PARALLEL_INFLATE_BYTES", 0)
    return request.param


def test_volume_larger_than_the_inflate_pieces(tmp_path, threads):
    """Several MiB: the data crosses many 256 KiB input reads and 1 MiB inflated pieces."""
    stored = np.random.default_rng(1).standard_normal((40, 36, 30, 28)).astype(np.float32)
    path = tmp_path / "big.nii.gz"
    write_nifti(path, stored, version=1, byteorder="<", slope=1.0, inter=0.0)
    assert same_bits(load_nifti_data(read_nifti_header(path, "FOD"), threads=threads), stored)
    save_nifti_atomic(nib.Nifti1Image(stored, np.eye(4)), tmp_path / "ours.nii.gz")  # 1 MiB blocks, primed
    ours = read_nifti_header(tmp_path / "ours.nii.gz", "FOD")
    assert same_bits(load_nifti_data(ours, threads=threads), stored)
    assert same_bits(nifti._read_gzip_parallel(ours, 3)[1].view(np.float32).reshape(stored.shape, order="F"), stored)


@pytest.mark.parametrize("suffix", [".nii", ".nii.gz"])
def test_the_read_stays_within_its_memory_bound(tmp_path, suffix):
    """A volume larger than the inflater's input chunks and pieces (22 MB) holds no more than
    load_memory_bytes says (tracemalloc): the service admits jobs by that bound."""
    stored = np.random.default_rng(8).standard_normal((64, 48, 40, 45)).astype(np.float32)
    path = save_nifti_atomic(nib.Nifti1Image(stored, np.eye(4)), tmp_path / f"big{suffix}")
    info = read_nifti_header(path, "FOD")
    tracemalloc.start()
    try:
        values = load_nifti_data(info)
        held = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert same_bits(values, stored)
    assert info.data_bytes < held <= nifti.load_memory_bytes(info)


def test_multi_member_gzip_and_zero_padding(tmp_path, threads):
    """pigz/bgzip-style files with several gzip members, and zero padding after the last
    (both read by Python's gzip module and hence by nibabel)."""
    stored = np.random.default_rng(2).standard_normal((6, 5, 4, 15)).astype(np.float32)
    plain = tmp_path / "image.nii"
    write_nifti(plain, stored, version=1, byteorder="<", slope=1.0, inter=0.0)
    raw = plain.read_bytes()
    path = tmp_path / "image.nii.gz"
    cuts = [0, 100, 352, 3001, len(raw)]
    path.write_bytes(b"".join(gzip.compress(raw[a:b]) for a, b in zip(cuts, cuts[1:])) + b"\0" * 700)
    assert same_bits(load_nifti_data(read_nifti_header(path, "FOD"), threads=threads),
                     nib.load(path).get_fdata(dtype=np.float32))


@pytest.mark.parametrize("layout", ["one member", "members and zero padding", "uncompressed, bytes past the data"])
def test_the_read_hashes_every_byte_of_the_file(tmp_path, layout, threads):
    """``digest`` ends as hashlib's sha256 of the whole file as stored, whichever way it was
    read: one member, several with zero padding (which rapidgzip turns down: the read on
    one thread that follows must not hash again), or a .nii with bytes after its data."""
    stored = np.random.default_rng(5).standard_normal((9, 8, 7, 15)).astype(np.float32)
    plain = tmp_path / "image.nii"
    write_nifti(plain, stored, version=1, byteorder="<", slope=1.0, inter=0.0)
    raw = plain.read_bytes()
    path = tmp_path / "image.nii.gz"
    if layout == "one member":
        path.write_bytes(gzip.compress(raw))
    elif layout == "members and zero padding":
        cuts = [0, 352, 20_000, len(raw)]
        path.write_bytes(b"\0".join(gzip.compress(raw[a:b]) for a, b in zip(cuts, cuts[1:])) + b"\0" * 700)
    else:
        path = plain
        path.write_bytes(raw + b"not image data" * 100)
    digest = hashlib.sha256()
    values = load_nifti_data(read_nifti_header(path, "FOD"), threads=threads, digest=digest)
    assert same_bits(values, stored)
    assert digest.hexdigest() == hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("damage", ["truncated data", "truncated stream", "no trailer", "corrupt stream", "bad crc",
                                    "inflates too far"])
def test_damaged_files_are_refused(tmp_path, damage, threads):
    """The reader refuses damaged data with the title and words of the check an upload
    passes (check_stored_size, naming the file), so a caller that reads next may skip it;
    on several threads as on one."""
    stored = np.random.default_rng(3).standard_normal((8, 8, 6, 15)).astype(np.float32)
    plain = tmp_path / "image.nii"
    write_nifti(plain, stored, version=1, byteorder="<", slope=1.0, inter=0.0)
    raw = plain.read_bytes()
    path = tmp_path / "image.nii.gz"
    info = None
    if damage == "truncated data":
        path.write_bytes(gzip.compress(raw[:-10]))
        info = read_nifti_header(path, "FOD")
    else:
        path.write_bytes(gzip.compress(raw, compresslevel=0))
        info = read_nifti_header(path, "FOD")
        packed = bytearray(path.read_bytes())
        if damage == "truncated stream":
            packed = packed[: len(packed) // 2]
        elif damage == "no trailer":  # every data byte there, the CRC and size fields cut off
            packed = packed[:-8]
        elif damage == "corrupt stream":
            packed[12] ^= 0xFF  # the first deflate block's header
        elif damage == "bad crc":
            packed[-6] ^= 0xFF
        else:
            packed += gzip.compress(b"\0" * (3 << 20))
        path.write_bytes(bytes(packed))
    with pytest.raises(InputError) as caught:
        load_nifti_data(info, threads=threads)
    with pytest.raises(InputError) as checked:
        check_stored_size(path, info.offset, info.data_bytes, path.name)
    expected = {"truncated data": "Truncated file", "inflates too far": "Input larger than its header"}
    assert caught.value.title == expected.get(damage, "Truncated or damaged file")
    assert (caught.value.title, caught.value.detail) == (checked.value.title, checked.value.detail)
    assert caught.value.detail.startswith("image.nii.gz: ")


@pytest.mark.parametrize("shape, dtype", [((30, 30, 20, 9), np.float32), ((30, 30, 20), np.uint8), ((3, 4, 5, 2), np.float64)])
def test_writer_gives_nibabels_bytes_whatever_the_threads(tmp_path, shape, dtype):
    """The .nii.gz holds exactly the bytes nibabel makes of the image, and the file is the
    same byte for byte on 1 or 4 threads (gzip mtime 0): a batch and a single job agree."""
    data = np.random.default_rng(4).standard_normal(shape).astype(dtype)
    data.flat[::7] = np.nan if np.dtype(dtype).kind == "f" else 0
    image = nib.Nifti1Image(data, np.diag([2.0, 2.0, 2.0, 1.0]))
    one = save_nifti_atomic(image, tmp_path / "one.nii.gz", threads=1)
    four = save_nifti_atomic(image, tmp_path / "four.nii.gz", threads=4)
    assert one.read_bytes() == four.read_bytes()
    assert gzip.decompress(one.read_bytes()) == image.to_bytes()
    assert same_bits(np.asanyarray(nib.load(one).dataobj), data)
    assert [p.name for p in tmp_path.iterdir() if "partial" in p.name] == []
