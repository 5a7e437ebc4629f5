"""Bounded memory per job: the estimate from the headers against the memory a run really
holds (tracemalloc), and a small upload of a huge job, a 367 KB .nii.gz that promises 377 MB
of uint8 whose peaks job needs more than the default 4 GiB, refused before anything is
inflated."""

from __future__ import annotations

import gzip
import tracemalloc
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from gpu.peaks.phantom import fod_phantom
from worker.errors import InputError
from worker.input_limits import InputLimits, InputTooLarge, check_job_inputs, job_memory_bytes
from worker.io.nifti import load_memory_bytes, load_nifti_data, read_nifti_header
from worker.job_kinds import get_job_kind
from worker.jobs.peaks import PeaksOutputs, PeaksParams, run_peaks

DEFAULT_LIMITS = InputLimits(max_input_bytes=8 << 30, max_voxels=64 << 20, max_job_memory_bytes=4 << 30)
BOMB_SHAPE = (256, 256, 128, 45)


def write_header_and_zeros(path: Path, shape, dtype=np.uint8) -> Path:
    """A .nii.gz of ``shape`` zeros, streamed through gzip so the volume is never in memory."""
    header = nib.Nifti1Header()
    header.set_data_shape(shape)
    header.set_data_dtype(dtype)
    header["vox_offset"] = 352
    zeros = bytes(8 << 20)
    left = int(np.prod(shape)) * np.dtype(dtype).itemsize
    with gzip.open(path, "wb", compresslevel=6) as stream:
        stream.write(header.binaryblock + b"\x00" * 4)
        while left:
            stream.write(zeros[: min(left, len(zeros))])
            left -= min(left, len(zeros))
    return path


@pytest.fixture(scope="module")
def bomb(tmp_path_factory) -> Path:
    return write_header_and_zeros(tmp_path_factory.mktemp("bomb") / "fod.nii.gz", BOMB_SHAPE)


def _traced_peak(function, *args, **kwargs) -> int:
    tracemalloc.start()
    try:
        function(*args, **kwargs)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_issue_case_is_refused_from_its_header(bomb):
    assert 300_000 < bomb.stat().st_size < 400_000
    kind = get_job_kind("peaks")
    params = PeaksParams()
    needed = job_memory_bytes(kind, {"fod": bomb}, params)
    # the computing phase dominates: N·(2·45·4 + 48·3 + 64) bytes for N = 256·256·128 voxels
    assert needed == 256 * 256 * 128 * (2 * 45 * 4 + 48 * 3 + 64) > DEFAULT_LIMITS.max_job_memory_bytes
    with pytest.raises(InputTooLarge) as caught:
        check_job_inputs(kind, {"fod": bomb}, params, DEFAULT_LIMITS)
    assert caught.value.title == "Job too large for memory"
    assert "needs about 4.4 GiB" in caught.value.detail
    assert "FIBERTENSOR_MAX_JOB_MEMORY_BYTES" in caught.value.detail and "crop" in caught.value.detail
    # refused from the header: nothing was inflated
    assert _traced_peak(_refused, kind, bomb, params) < 2 << 20


def _refused(kind, path, params):
    with pytest.raises(InputTooLarge):
        check_job_inputs(kind, {"fod": path}, params, DEFAULT_LIMITS)


def test_issue_case_passes_when_the_operator_raises_the_limit(bomb):
    limits = InputLimits(DEFAULT_LIMITS.max_input_bytes, DEFAULT_LIMITS.max_voxels, 5 << 30)
    kind = get_job_kind("peaks")
    # the whole 377 MB stream is inflated to prove it whole, a chunk at a time
    peak = _traced_peak(check_job_inputs, kind, {"fod": bomb}, PeaksParams(), limits)
    assert peak < 8 << 20  # a few 1 MiB chunks, not the 377 MB


def _fod(path: Path, shape, lmax: int, dtype=np.float32, slope=None) -> Path:
    if dtype == np.float32:
        sh = fod_phantom(shape, lmax=lmax, seed=3)["sh"].astype(np.float32)
    else:
        sh = np.random.default_rng(3).integers(0, 200, size=(*shape, (lmax + 1) * (lmax + 2) // 2)).astype(dtype)
    image = nib.Nifti1Image(sh, np.eye(4))
    if slope is not None:
        image.header.set_slope_inter(slope, 0.25)
    nib.save(image, path)
    return path


@pytest.mark.parametrize(
    "shape, lmax, npeaks, masked",
    [((16, 14, 10), 8, 3, False), ((16, 14, 10), 8, 3, True), ((12, 10, 8), 4, 10, False)],
)
def test_estimate_bounds_the_memory_a_peaks_run_holds(tmp_path, shape, lmax, npeaks, masked):
    fod = _fod(tmp_path / "fod.nii.gz", shape, lmax)
    mask = None
    if masked:
        mask = tmp_path / "mask.nii.gz"
        inside = np.zeros(shape, np.uint8)
        inside[: shape[0] // 2] = 1
        nib.save(nib.Nifti1Image(inside, np.eye(4)), mask)
    params = PeaksParams(npeaks=npeaks, backend="cpu")
    run_peaks(fod, PeaksOutputs.in_folder(tmp_path / "warm"), params, mask=mask)  # compile first
    measured = _traced_peak(run_peaks, fod, PeaksOutputs.in_folder(tmp_path / "out"), params, mask=mask)
    estimate = job_memory_bytes(get_job_kind("peaks"), {"fod": fod, **({"mask": mask} if mask else {})}, params)
    assert measured <= estimate <= 2.5 * measured


@pytest.mark.parametrize("dtype, slope", [(np.float32, None), (np.uint8, None), (np.int16, 0.5), (np.float64, 3.0)])
def test_load_stays_within_its_estimate_and_matches_nibabel(tmp_path, dtype, slope):
    path = tmp_path / "fod.nii.gz"
    if dtype == np.float64:
        data = np.random.default_rng(1).normal(size=(24, 20, 12, 15))
        image = nib.Nifti1Image(data, np.eye(4))
        image.header.set_slope_inter(slope, 0.25)
        nib.save(image, path)
    else:
        _fod(path, (24, 20, 12), 4, dtype, slope)
    info = read_nifti_header(path, "FOD")
    peak = _traced_peak(load_nifti_data, info)
    assert peak <= load_memory_bytes(info)
    np.testing.assert_array_equal(load_nifti_data(info), nib.load(path).get_fdata(dtype=np.float32))


def _header_only(shape, dtype=np.float32) -> bytes:
    header = nib.Nifti1Header()
    header.set_data_shape(shape)
    header.set_data_dtype(dtype)
    header["vox_offset"] = 352
    return header.binaryblock + b"\x00" * 4


def test_the_limits_apply_outside_the_api_too(tmp_path):
    """The function the CLI calls refuses what the API refuses: a 2000³
    header, and a stream that inflates past its header, neither of them inflated in full."""
    kind, params = get_job_kind("peaks"), PeaksParams()
    claim = tmp_path / "claim.nii.gz"
    claim.write_bytes(gzip.compress(_header_only((2000, 2000, 2000, 45))))
    with pytest.raises(InputError, match="2000×2000×2000 has 8000000000 voxels") as caught:
        check_job_inputs(kind, {"fod": claim}, params, DEFAULT_LIMITS)
    assert caught.value.title == "Too many voxels"
    longer = tmp_path / "longer.nii.gz"
    longer.write_bytes(gzip.compress(_header_only((4, 4, 4, 15)) + bytes(256 << 20), 9))
    tracemalloc.start()
    with pytest.raises(InputError) as caught:
        check_job_inputs(kind, {"fod": longer}, params, DEFAULT_LIMITS)
    assert tracemalloc.get_traced_memory()[1] < 8 << 20
    tracemalloc.stop()
    assert caught.value.title == "Input larger than its header"


@pytest.mark.parametrize("suffix", [".mif", ".mif.gz"])
def test_a_kind_without_an_estimate_counts_mrtrix_inputs_at_what_loading_them_holds(tmp_path, suffix):
    """compress has no estimate of its own: its inputs count at what loading them holds
    (measured), an MRtrix one too (it counted 0 bytes before)."""
    from worker.io.images import read_image_header, load_image_data
    from worker.io.mif import write_mif
    from worker.params.compress import CompressParams

    path = write_mif(tmp_path / f"volume{suffix}",
                     np.random.default_rng(5).standard_normal((40, 30, 20, 6)).astype(np.float32), np.eye(4))
    estimate = job_memory_bytes(get_job_kind("compress"), {"volume": path}, CompressParams())
    held = _traced_peak(load_image_data, read_image_header(path, "volume"))
    assert held <= estimate + (16 << 10)  # the arrays, give or take the header's Python objects
    assert estimate >= 2 * 40 * 30 * 20 * 6 * 4  # the stored bytes and the float32 values


def _flip(content: bytes, at: int) -> bytes:
    return content[:at] + bytes([content[at] ^ 0xFF]) + content[at + 1:]


def test_kept_inflated_input_is_the_nii_of_the_upload_and_its_sha256(tmp_path):
    """The service's pass over a .nii.gz keeps what it inflates: a .nii with the upload's
    header bytes and data (trailing padding dropped) and the upload's sha256, nothing else."""
    from worker.provenance import file_sha256

    fod = _fod(tmp_path / "fod.nii.gz", (9, 8, 7), 4)
    padded = tmp_path / "mask.nii.gz"
    inside = (np.arange(9 * 8 * 7).reshape(9, 8, 7) % 3 == 0).astype(np.uint8)
    nib.save(nib.Nifti1Image(inside, np.eye(4)), tmp_path / "mask.nii")
    # a second gzip member of zeros after the data: padding the check allows and the .nii drops
    padded.write_bytes(gzip.compress((tmp_path / "mask.nii").read_bytes()) + gzip.compress(bytes(1000)))
    kind, params = get_job_kind("peaks"), PeaksParams()
    (tmp_path / "mask.nii").unlink()
    kept = check_job_inputs(kind, {"fod": fod, "mask": padded}, params, DEFAULT_LIMITS, keep_inflated=True)
    assert {slot: (k.path.name, k.uploaded.name, k.uploaded.sha256) for slot, k in kept.items()} == {
        "fod": ("fod.nii", "fod.nii.gz", file_sha256(fod)), "mask": ("mask.nii", "mask.nii.gz", file_sha256(padded))}
    for slot, upload in (("fod", fod), ("mask", padded)):
        stored = kept[slot].path.read_bytes()
        image = nib.load(upload)
        data_bytes = int(np.prod(image.shape)) * image.get_data_dtype().itemsize
        assert stored == gzip.decompress(upload.read_bytes())[: image.dataobj.offset + data_bytes]
        np.testing.assert_array_equal(np.asarray(nib.load(kept[slot].path).dataobj), np.asarray(image.dataobj))
    # the CLI's check keeps nothing (it reads its files once already)
    for kept_input in kept.values():
        kept_input.path.unlink()
    assert check_job_inputs(kind, {"fod": fod, "mask": padded}, params, DEFAULT_LIMITS) == {}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fod.nii.gz", "mask.nii.gz"]


@pytest.mark.parametrize("damage", ["cut", "crc", "deflate", "longer"])
def test_a_damaged_upload_is_refused_as_before_and_leaves_no_inflated_file(tmp_path, damage):
    """Keeping the inflated bytes changes nothing in what is refused and how: the same title
    and detail as the check that keeps nothing, and no .nii left, not even the one written
    for an input that passed (the FOD) before the damaged one (the mask)."""
    fod = _fod(tmp_path / "fod.nii.gz", (9, 8, 7), 4)
    # noise, so that the stream is long and damage past its first quarter is in the data
    inside = np.random.default_rng(2).random((9, 8, 7)).astype(np.float32)
    raw = nib.Nifti1Image(inside, np.eye(4)).to_bytes()
    good = gzip.compress(raw)
    mask = tmp_path / "mask.nii.gz"
    mask.write_bytes({"cut": good[: len(good) * 3 // 4], "crc": _flip(good, len(good) - 6),
                      "deflate": _flip(good, len(good) * 3 // 4),
                      "longer": gzip.compress(raw + bytes(2 << 20))}[damage])
    kind, params = get_job_kind("peaks"), PeaksParams()
    with pytest.raises(InputError) as plain:
        check_job_inputs(kind, {"fod": fod, "mask": mask}, params, DEFAULT_LIMITS)
    with pytest.raises(InputError) as kept:
        check_job_inputs(kind, {"fod": fod, "mask": mask}, params, DEFAULT_LIMITS, keep_inflated=True)
    assert (kept.value.title, kept.value.detail) == (plain.value.title, plain.value.detail)
    assert plain.value.title in ("Truncated or damaged file", "Input larger than its header")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fod.nii.gz", "mask.nii.gz"]


@pytest.mark.requires_mrtrix
def test_a_kept_inflated_mif_is_the_image_mrtrix_reads_from_the_upload(tmp_path):
    """A .mif.gz upload is kept as the .mif it inflates to: MRtrix3 reads the same image
    (header and values) from it as from the upload."""
    import subprocess

    from worker.io.images import write_image
    from worker.provenance import file_sha256

    data = fod_phantom((7, 6, 5), lmax=4, seed=4)["sh"].astype(np.float32)
    upload = write_image(tmp_path / "fod.mif.gz", data, np.diag([2.0, 2.0, 2.5, 1.0]))
    kept = check_job_inputs(get_job_kind("peaks"), {"fod": upload}, PeaksParams(), DEFAULT_LIMITS, keep_inflated=True)
    assert kept["fod"].path.name == "fod.mif" and kept["fod"].uploaded.sha256 == file_sha256(upload)
    converted = {}
    for name, path in (("kept", kept["fod"].path), ("upload", upload)):
        converted[name] = tmp_path / f"{name}.nii"
        subprocess.run(["mrconvert", "-quiet", str(path), str(converted[name])], check=True)
    kept_image, upload_image = nib.load(converted["kept"]), nib.load(converted["upload"])
    np.testing.assert_array_equal(np.asarray(kept_image.dataobj), np.asarray(upload_image.dataobj))
    np.testing.assert_array_equal(kept_image.affine, upload_image.affine)
    assert kept_image.header.binaryblock == upload_image.header.binaryblock


def test_the_estimate_made_at_the_door_bounds_the_run_on_the_input_kept_inflated(tmp_path):
    """The service estimates a job's memory from the uploaded .nii.gz; its job reads the .nii
    kept instead (no inflater buffers), and stays within that estimate."""
    fod = _fod(tmp_path / "fod.nii.gz", (16, 14, 10), 8)
    kind, params = get_job_kind("peaks"), PeaksParams(backend="cpu")
    estimate = job_memory_bytes(kind, {"fod": fod}, params)
    kept = check_job_inputs(kind, {"fod": fod}, params, DEFAULT_LIMITS, keep_inflated=True)["fod"]
    uploaded = {"fod": kept.uploaded}
    run_peaks(kept.path, PeaksOutputs.in_folder(tmp_path / "warm"), params, uploaded=uploaded)  # compile first
    measured = _traced_peak(run_peaks, kept.path, PeaksOutputs.in_folder(tmp_path / "out"), params, uploaded=uploaded)
    assert measured <= job_memory_bytes(kind, {"fod": kept.path}, params) <= estimate
