"""MRtrix image format against MRtrix3 itself: what ``mrconvert`` writes we read as the
same arrays on the same scanner grid as the NIfTI it came from, and ``mrinfo``/``mrconvert``
read what we write with the right datatype, strides, transform and values."""

from __future__ import annotations

import gzip
import re
import tracemalloc

import nibabel as nib
import numpy as np
import pytest

from tests.worker.io.grids import in_world_order, oblique_affine, save_nifti
from worker.errors import InputError
from worker.io.images import load_image_data, read_image_header
from worker.io.mif import load_mif_data, read_mif_header, write_mif
from worker.io.nifti import INFLATER_BYTES

SHAPE = (5, 4, 3, 2)
DATATYPES = [
    "Bit", "Int8", "UInt8",
    *(f"{kind}{bits}{order}" for kind in ("Int", "UInt") for bits in (16, 32, 64) for order in ("LE", "BE")),
    *(f"Float{bits}{order}" for bits in (32, 64) for order in ("LE", "BE")),
    "CFloat32LE", "CFloat64BE",
]
# mrinfo -strides convention: 1-based rank of each axis, sign = direction of storage.
LAYOUTS = [(1, 2, 3, 4), (-1, -2, 3, 4), (2, 3, 4, 1), (-3, 1, 2, -4), (3, -2, 1, 4)]


def sample(datatype: str, rng: np.random.Generator) -> np.ndarray:
    """Values of ``datatype`` including its extremes (integers) or signed zeros, infinities
    and subnormals (floats)."""
    if datatype == "Bit":
        return rng.random(SHAPE) < 0.5
    kind = datatype.rstrip("LEB").lower()
    dtype = np.dtype({"int8": "i1", "uint8": "u1", "int16": "i2", "uint16": "u2", "int32": "i4", "uint32": "u4",
                      "int64": "i8", "uint64": "u8", "float32": "f4", "float64": "f8",
                      "cfloat32": "c8", "cfloat64": "c16"}[kind])
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        data = rng.integers(info.min, info.max, SHAPE, dtype=dtype, endpoint=True)
        data.flat[:2] = info.min, info.max
        return data
    data = rng.normal(scale=100.0, size=SHAPE).astype(dtype)
    if dtype.kind == "c":
        data += 1j * rng.normal(size=SHAPE)
    data.flat[:4] = -0.0, np.inf, -np.inf, np.finfo(dtype).tiny / 4
    return data


def mrinfo_header(mrtrix, path) -> tuple[str, tuple[int, ...], np.ndarray]:
    """Datatype, strides and 4×4 transform as MRtrix3 reads them."""
    lines = mrtrix("mrinfo", path, "-datatype", "-strides", "-transform").splitlines()
    return lines[0].strip(), tuple(int(s) for s in lines[1].split()), np.loadtxt(lines[2:6])


@pytest.mark.parametrize("datatype", DATATYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_round_trip_keeps_values_and_scanner_positions(tmp_path, datatype, layout):
    data = sample(datatype, np.random.default_rng(len(datatype)))
    affine = oblique_affine()
    path = write_mif(tmp_path / "image.mif", data, affine, layout=layout, datatype=datatype)
    info = read_mif_header(path)
    assert (info.datatype, info.layout) == (datatype, layout)
    back = load_mif_data(info, dtype=None)
    assert back.dtype == data.dtype.newbyteorder("=")
    got, got_affine = in_world_order(back, info.affine)
    want, want_affine = in_world_order(data, affine)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got_affine, want_affine, atol=1e-12)


@pytest.mark.parametrize("suffix", [".mif", ".mif.gz", ".mih"])
def test_round_trip_in_data_order_for_each_file_kind(tmp_path, suffix):
    data = sample("Float32LE", np.random.default_rng(1))
    affine = oblique_affine()
    path = write_mif(tmp_path / f"image{suffix}", data, affine)
    info = read_mif_header(path)
    # The default layout keeps the data's order: the same array and affine come back.
    np.testing.assert_array_equal(load_mif_data(info, dtype=None), data)
    np.testing.assert_allclose(info.affine, affine, atol=1e-12)
    assert info.shape == data.shape
    np.testing.assert_allclose(info.zooms, [2.0, 2.5, 3.0, 1.0])
    if suffix == ".mih":
        assert info.data_path == tmp_path / "image.dat"
    if suffix == ".mif.gz":
        assert gzip.decompress(path.read_bytes()).startswith(b"mrtrix image\n")


@pytest.mark.parametrize(
    ("datatype", "layout"),
    [(datatype, (-3, 1, 2, -4)) for datatype in DATATYPES] + [("Float32BE", layout) for layout in LAYOUTS],
)
def test_mrtrix_reads_what_we_write(tmp_path, mrtrix, datatype, layout):
    """mrinfo sees our datatype and strides and the transform it sees for the same data as a
    NIfTI; mrconvert turns it into a NIfTI holding our values on our grid."""
    data = sample(datatype, np.random.default_rng(7))
    if data.dtype.kind in "iu" and data.itemsize == 8:
        data //= 2**11  # mrconvert converts through double: 64-bit integers are exact below 2**53
    affine = oblique_affine()
    ours = write_mif(tmp_path / "ours.mif", data, affine, layout=layout, datatype=datatype)
    reference = tmp_path / "reference.nii"
    save_nifti(data.astype(np.uint8) if datatype == "Bit" else data.astype(data.dtype.newbyteorder("=")),
               affine, reference)

    got_type, got_strides, got_transform = mrinfo_header(mrtrix, ours)
    assert (got_type, got_strides) == (datatype, layout)
    np.testing.assert_allclose(got_transform, mrinfo_header(mrtrix, reference)[2], atol=1e-5)

    # Plain strides on the way out: MRtrix3 writes NIfTI volumes reversed for a negative
    # volume stride, which NIfTI cannot express.
    mrtrix("mrconvert", ours, tmp_path / "back.nii", "-strides", "1,2,3,4")
    back = nib.load(tmp_path / "back.nii")
    got, got_affine = in_world_order(np.asanyarray(back.dataobj), back.affine)
    want, want_affine = in_world_order(data, affine)
    np.testing.assert_array_equal(got.astype(want.dtype), want)
    np.testing.assert_allclose(got_affine, want_affine, atol=1e-4)


@pytest.mark.parametrize("permuted", [True, False], ids=["axes-permuted", "oblique"])
@pytest.mark.parametrize("strides", [None, "1,2,3,4", "-1,-2,3,4", "2,3,4,1", "-3,2,-1,4", "3,-2,1,-4"])
@pytest.mark.parametrize("suffix", [".mif", ".mif.gz", ".mih"])
def test_mrconvert_output_reads_as_its_nifti(tmp_path, mrtrix, permuted, strides, suffix):
    """A NIfTI and the MRtrix image mrconvert makes of it read as the same volume on the same
    scanner grid; converted back to NIfTI by MRtrix3, as the very same array and affine."""
    rng = np.random.default_rng(3)
    data = rng.normal(size=(6, 5, 4, 3)).astype(np.float32)
    affine = oblique_affine(permuted)
    source = tmp_path / "source.nii"
    save_nifti(data, affine, source)
    converted = tmp_path / f"converted{suffix}"
    mrtrix("mrconvert", source, converted, *(["-strides", strides] if strides else []))

    info = read_image_header(converted, "FOD")
    values = load_image_data(info)
    got, got_affine = in_world_order(values, info.affine)
    want, want_affine = in_world_order(data, affine)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got_affine, want_affine, atol=1e-5)
    if strides is None:  # mrconvert keeps the NIfTI's layout: our arrays are identical
        nifti = read_image_header(source, "FOD")
        assert info.shape == nifti.shape
        np.testing.assert_array_equal(values, load_image_data(nifti))
        np.testing.assert_allclose(info.affine, nifti.affine, atol=1e-5)
    if strides is None or not strides.endswith("-4"):
        mrtrix("mrconvert", converted, tmp_path / "back.nii")
        back = nib.load(tmp_path / "back.nii")
        np.testing.assert_array_equal(values, back.get_fdata(dtype=np.float32))
        np.testing.assert_allclose(info.affine, back.affine, atol=1e-5)


def test_scaling_and_key_values_kept_both_ways(tmp_path, mrtrix):
    stored = np.arange(2 * 3 * 4, dtype=np.int16).reshape(2, 3, 4) - 7
    keyval = {"comments": "first line\nsecond: line", "fibertensor_check": "kept"}
    path = write_mif(tmp_path / "scaled.mif", stored, oblique_affine(), scaling=(2.0, 0.5), keyval=keyval)
    info = read_mif_header(path)
    assert info.scaling == (2.0, 0.5) and info.keyval == keyval
    np.testing.assert_array_equal(load_mif_data(info), 2.0 + 0.5 * stored)
    np.testing.assert_array_equal(load_mif_data(info, dtype=None), stored)

    assert mrtrix("mrinfo", path, "-property", "comments").strip() == keyval["comments"]
    mrtrix("mrconvert", path, tmp_path / "values.nii", "-datatype", "float32")
    np.testing.assert_array_equal(nib.load(tmp_path / "values.nii").get_fdata(), 2.0 + 0.5 * stored)

    # Scaling and key-values written by MRtrix3: the same values, stored under a new scaling.
    mrtrix("mrconvert", path, tmp_path / "rescaled.mif", "-scaling", "-1.5,0.25")
    info = read_mif_header(tmp_path / "rescaled.mif")
    assert info.scaling == (-1.5, 0.25)
    assert info.keyval["comments"] == keyval["comments"] and "mrconvert" in info.keyval["command_history"]
    np.testing.assert_array_equal(load_mif_data(info), 2.0 + 0.5 * stored)
    np.testing.assert_array_equal(load_mif_data(info, dtype=None), (2.0 + 0.5 * stored + 1.5) / 0.25)


def test_written_images_add_the_command_to_the_inputs_command_history(tmp_path, mrtrix):
    """As each MRtrix3 command does: one line per command, the newest last, in the form
    mrconvert writes its own (``program args  (version=...)``)."""
    from worker.io.mif import command_history_entry, recording_command

    source = write_mif(tmp_path / "source.mif", np.zeros((2, 3, 4), np.float32), oblique_affine())
    assert "command_history" not in read_mif_header(source).keyval  # none outside a command
    mrtrix("mrconvert", source, tmp_path / "converted.mif")
    history = read_mif_header(tmp_path / "converted.mif").keyval["command_history"]
    [mrconvert_entry] = history.splitlines()
    entry_form = re.compile(r"^\S*(mrconvert|fibertensor)( \S+)+  \(version=[^)]+\)$")
    assert entry_form.match(mrconvert_entry), mrconvert_entry

    entry = command_history_entry("fibertensor", ["peaks", "fod #2.mif", "out/s1", "--npeaks", "3"], "1.2.3")
    assert entry == "fibertensor peaks fod %232.mif out/s1 --npeaks 3  (version=1.2.3)"
    with recording_command(entry):
        ours = write_mif(tmp_path / "ours.mif.gz", np.ones((2, 3, 4), np.float32), oblique_affine(),
                         keyval={"command_history": history})
    assert mrtrix("mrinfo", ours, "-property", "command_history").splitlines() == [mrconvert_entry, entry]
    assert entry_form.match(entry)  # the form of mrconvert's entry
    after = write_mif(tmp_path / "after.mif", np.ones((2, 3, 4), np.float32), oblique_affine())
    assert "command_history" not in read_mif_header(after).keyval


def mif_without_our_command(content: bytes) -> bytes:
    """An MRtrix image's bytes (``.mif``, or ``.mif.gz`` inflated) without the
    ``command_history`` line of the fibertensor command that wrote it and without the data
    offset that line moves: what two runs by different commands have in common."""
    raw = gzip.decompress(content) if content[:2] == b"\x1f\x8b" else content
    lines = raw.partition(b"\nEND\n")[0].split(b"\n")
    offset = int(next(line for line in lines if line.startswith(b"file: ")).split()[-1])
    kept = [line for line in lines if not line.startswith((b"command_history: fibertensor ", b"file: "))]
    return b"\n".join(kept) + b"\nEND\n" + raw[offset:]


def handwritten(path, lines: list[str], data: bytes) -> None:
    header = ("mrtrix image\n" + "\n".join(lines) + "\nfile: . 256\nEND\n").encode()
    path.write_bytes(header.ljust(256, b"\0") + data)


def test_header_forms_read_as_mrtrix_reads_them(tmp_path, mrtrix):
    """No transform (MRtrix3's default, centred on the grid), non-unit transform columns
    (normalised into the voxel sizes) and a fourth row, comments, any case of the keys,
    unknown lines and empty values (ignored), two axes (a third of size 1 added)."""
    data = np.arange(24, dtype="<f4").tobytes()
    handwritten(tmp_path / "default.mif", ["DIM: 2,3,4", "Vox: 1.5,2,2.5", "layout: +0,+1,+2",
                                           "datatype: Float32LE  # a comment", "not a key value line"], data)
    handwritten(tmp_path / "scaled.mif", ["dim: 2,3,4", "vox: 1,1,1", "layout: +2,-1,+0", "datatype: float32le",
                                          "transform: 0,2,0,1", "transform: -3,0,0,2", "transform: 0,0,1.5,3",
                                          "transform: 0,0,0,1", "empty:"], data)
    handwritten(tmp_path / "plane.mif", ["dim: 4,6", "vox: 1.5,2", "layout: -1,+0", "datatype: Float32LE"], data)
    for name in ("default.mif", "scaled.mif", "plane.mif"):
        info = read_mif_header(tmp_path / name)
        assert info.keyval == {}
        spacing = [float(v) for v in mrtrix("mrinfo", tmp_path / name, "-spacing").split()]
        assert sorted(info.zooms) == pytest.approx(sorted(spacing))
        mrtrix("mrconvert", tmp_path / name, tmp_path / f"{name}.nii")
        nifti = nib.load(tmp_path / f"{name}.nii")
        np.testing.assert_allclose(info.affine, nifti.affine, atol=1e-5)
        np.testing.assert_array_equal(load_mif_data(info), nifti.get_fdata())


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"not an image\n", "does not start with 'mrtrix image'"),
        (b"mrtrix image\ndim: 2,2,2\n", "ends before the END line"),
        (b"mrtrix image\ndim: 2,2,2\nvox: 1,1,1\nlayout: +0,+1,+2\nfile: . 128\nEND\n", "has no 'datatype' entry"),
        (b"mrtrix image\ndim: 2,2,2\nvox: 1,1,1\nlayout: +0,+1,+2\ndatatype: Float16\nfile: . 128\nEND\n",
         "unknown datatype 'Float16'"),
        (b"mrtrix image\ndim: 2,2,2\nvox: 1,1,1\nlayout: +0,+1\ndatatype: UInt8\nfile: . 128\nEND\n",
         "not one stride per axis"),
        (b"mrtrix image\ndim: 2,2,2\nvox: 1,1,1\nlayout: +0,+1,+2\ndatatype: UInt8\nfile: a.dat\nfile: b.dat\nEND\n",
         "mrconvert in.mih out.mif"),
        # An offset far past the header would make a tiny .mif.gz inflate without bound.
        (b"mrtrix image\ndim: 1,1,1\nvox: 1,1,1\nlayout: +0,+1,+2\ndatatype: UInt8\nfile: . 99999999999\nEND\n",
         "puts its data at byte 99999999999, not just after its 92-byte header"),
        (b"mrtrix image\ndim: 1,1,1\nvox: 1,1,1\nlayout: +0,+1,+2\ndatatype: UInt8\nfile: . 16\nEND\n",
         "puts its data at byte 16"),
        (b"mrtrix image\ndim: 2,2,2\nvox: 1,1,1\nlayout: +0,+1,+2\ndatatype: UInt8\nfile: ../secret.dat\nEND\n",
         "keeps its data in '../secret.dat', not in a file beside it"),
        (b"mrtrix image\ndim: 2,2,2\nvox: 1,1,1\nlayout: +0,+1,+2\ndatatype: UInt8\nfile: /etc/passwd\nEND\n",
         "not in a file beside it"),
        (b"mrtrix image\ndim: 2,2,2\nvox: 1,1,1\nlayout: +0,+1,+2\ndatatype: UInt8\nfile: bad.dat\nEND\n",
         "keeps its data in 'bad.dat', which is not beside it"),
    ],
)
def test_bad_headers_say_what_is_wrong(tmp_path, content, message):
    path = tmp_path / "bad.mif"
    path.write_bytes(content)
    with pytest.raises(InputError, match=message) as caught:
        read_mif_header(path, "FOD")
    assert "mrconvert" in caught.value.detail


def test_truncated_data_is_refused_on_reading(tmp_path):
    path = write_mif(tmp_path / "cut.mif.gz", np.ones((4, 4, 4), np.float32), np.eye(4))
    whole = gzip.decompress(path.read_bytes())
    path.write_bytes(gzip.compress(whole[:-10]))
    with pytest.raises(InputError, match="declares 256 bytes of image data but holds 246"):
        load_mif_data(read_mif_header(path))


@pytest.mark.parametrize("suffix", [".mif", ".mif.gz"])
@pytest.mark.parametrize("strides", [None, "2,3,4,1", "-1,3,-2,4"])
def test_float32_sh_is_read_into_the_array_it_returns(tmp_path, mrtrix, suffix, strides):
    """A float32 SH image as mrconvert writes it (its default layout, or volume-contiguous,
    or spatial axes reversed) is read straight into the array returned: the read holds the
    data once (plus, for .mif.gz, the inflater's buffers), and gives what nibabel reads of
    the NIfTI it came from."""
    data = np.random.default_rng(5).normal(size=(64, 48, 40, 45)).astype(np.float32)  # 22 MB: a copy shows
    source = tmp_path / "fod.nii"
    save_nifti(data, oblique_affine(), source)
    path = tmp_path / f"fod{suffix}"
    mrtrix("mrconvert", source, path, *(["-strides", strides] if strides else []))
    info = read_mif_header(path)
    tracemalloc.start()
    try:
        values = load_mif_data(info)
        held = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert held <= info.data_bytes + (INFLATER_BYTES if suffix == ".mif.gz" else 0) + (1 << 20)
    got, got_affine = in_world_order(values, info.affine)
    want, want_affine = in_world_order(nib.load(source).get_fdata(dtype=np.float32), nib.load(source).affine)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got_affine, want_affine, atol=1e-5)
