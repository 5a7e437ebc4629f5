"""Property-based tests of the NIfTI input validators: random headers, dims,
dtypes, scalings, offsets, byte flips, truncations, trailing bytes and gzip streams.

For every file the checks an upload passes (:func:`check_image_limits`, its header parsed
once, then :func:`check_image_data`) and :func:`load_nifti_data`
either raise :class:`InputError` with one of the documented titles, or the file loads to
exactly what nibabel reads; the checks never hold more than a few read chunks whatever the
header claims, and loading stays within :func:`load_memory_bytes`.
"""

from __future__ import annotations

import gzip
import tempfile
import time
import tracemalloc
from pathlib import Path

import nibabel as nib
import numpy as np
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from worker.errors import InputError
from worker.io.images import check_image_data, check_image_limits
from worker.io.nifti import load_memory_bytes, load_nifti_data

MAX_INPUT_BYTES = 1 << 20
MAX_VOXELS = 50_000
# What the checks may hold, whatever the file claims: a few 1 MiB read chunks and gzip's buffers.
CHECK_MEMORY = 8 << 20

DOCUMENTED_TITLES = {
    "Not gzip-compressed", "Not a NIfTI file", "Invalid dimensions", "Too many voxels", "Input too large",
    "Input larger than its header", "Truncated or damaged file", "Truncated file",
    "Unreadable NIfTI file", "Unsupported data type", "Invalid affine",
}
DTYPES = ["uint8", "int8", "int16", "uint16", "int32", "uint32", "int64", "float32", "float64", "complex64"]
SCALES = [float("nan"), 0.0, 1.0, 2.5, -0.5, 1e30, float("inf")]


@st.composite
def nifti_files(draw) -> tuple[str, bytes]:
    """A file name and its bytes: a NIfTI-1/2 header with drawn dims, dtype, scaling and
    offset, data that is complete, cut short or followed by junk, maybe byte-flipped, maybe
    gzipped (and then maybe cut or flipped again)."""
    klass = draw(st.sampled_from([nib.Nifti1Header, nib.Nifti2Header]))
    header = klass()
    ndim = draw(st.integers(1, 5))
    big = draw(st.booleans())
    dims = tuple(draw(st.integers(0 if not big else 1, 4000 if big else 6)) for _ in range(ndim))
    header.set_data_shape(dims)
    header.set_data_dtype(np.dtype(draw(st.sampled_from(DTYPES))))
    header["scl_slope"] = draw(st.sampled_from(SCALES))
    header["scl_inter"] = draw(st.sampled_from([0.0, 1.5, -3.0, float("nan")]))
    base = header.sizeof_hdr + 4
    header["vox_offset"] = draw(st.sampled_from([base, base, base + 16, base + 48, 0, 100]))
    raw = bytearray(header.binaryblock)
    raw += b"\x00" * max(0, int(header["vox_offset"]) - len(raw))
    values = int(np.prod(dims)) if dims else 0
    want = values * header.get_data_dtype().itemsize
    have = min(want, 200_000)
    seed = draw(st.integers(0, 2**32 - 1))
    raw += np.random.default_rng(seed).integers(0, 256, have, np.uint8).tobytes()
    ending = draw(st.sampled_from(["whole", "cut", "junk"]))
    if ending == "cut" and len(raw) > 1:
        raw = raw[: draw(st.integers(0, len(raw) - 1))]
    elif ending == "junk":
        raw += bytes(draw(st.integers(1, 3 << 20)))
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2]))):
        if raw:
            raw[draw(st.integers(0, len(raw) - 1))] = draw(st.integers(0, 255))
    if not draw(st.booleans()):
        return "v.nii", bytes(raw)
    packed = bytearray(gzip.compress(bytes(raw), 1))
    damage = draw(st.sampled_from(["none", "none", "cut", "flip"]))
    if damage == "cut":
        packed = packed[: draw(st.integers(0, len(packed) - 1))]
    elif damage == "flip":
        packed[draw(st.integers(0, len(packed) - 1))] ^= draw(st.integers(1, 255))
    return "v.nii.gz", bytes(packed)


def _peak(function, *args, bound: int | None = None):
    """``function(*args)`` and the most bytes held at once while it ran. tracemalloc counts
    every thread's allocations, and other threads of a test process (xdist's messaging, a
    thread an earlier test left) may allocate meanwhile: a figure over ``bound`` is measured
    again, up to five times a moment apart, and the lowest counts."""
    held = []
    for attempt in range(5):
        time.sleep(0.01 * attempt)
        tracemalloc.start()
        try:
            result = function(*args)
            held.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
        if bound is None or min(held) <= bound:
            break
    return result, min(held)


def _validate(path: Path):
    info = check_image_limits(path, "volume", max_input_bytes=MAX_INPUT_BYTES, max_voxels=MAX_VOXELS)
    check_image_data(info, "volume")
    return info


@settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(nifti_files())
def test_validators_refuse_with_a_documented_problem_or_load_exactly(file):
    name, content = file
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / name
        path.write_bytes(content)
        try:
            info, held = _peak(_validate, path, bound=CHECK_MEMORY - 1)
        except InputError as exc:
            assert exc.title in DOCUMENTED_TITLES, (exc.title, exc.detail)
            event(exc.title)
            return
        event("loaded")
        assert held < CHECK_MEMORY
        assert info.data_bytes <= MAX_INPUT_BYTES and info.n_voxels <= MAX_VOXELS
        data, held = _peak(load_nifti_data, info, bound=load_memory_bytes(info))
        assert held <= load_memory_bytes(info)
        reference = nib.load(path).get_fdata(dtype=np.float32)
        assert data.dtype == np.float32 and data.shape == reference.shape
        np.testing.assert_array_equal(data, reference)


@settings(max_examples=25, deadline=None, database=None)
@given(st.tuples(st.integers(1, 10**5), st.integers(1, 10**5), st.integers(1, 10**5), st.integers(1, 200)),
       st.sampled_from(["float32", "float64", "int16"]))
def test_huge_claims_are_refused_from_the_header_alone(dims, dtype):
    """A header-only gzip stream claiming any size is refused (or found truncated) holding
    no more than a chunk (NIfTI-2: 64-bit dims)."""
    header = nib.Nifti2Header()
    header.set_data_shape(dims)
    header.set_data_dtype(np.dtype(dtype))
    header["vox_offset"] = header.sizeof_hdr + 4
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "claim.nii.gz"
        path.write_bytes(gzip.compress(header.binaryblock + b"\x00" * 4))
        tracemalloc.start()
        try:
            _validate(path)
        except InputError as exc:
            title = exc.title
        finally:
            held = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
    voxels, data = int(np.prod(dims[:3])), int(np.prod(dims)) * np.dtype(dtype).itemsize
    if voxels > MAX_VOXELS:
        assert title == "Too many voxels"
    elif data > MAX_INPUT_BYTES:
        assert title == "Input too large"
    else:
        assert title == "Truncated file"
    assert held < CHECK_MEMORY
