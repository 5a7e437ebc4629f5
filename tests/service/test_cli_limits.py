"""The local commands refuse what the API refuses, from the header and with
the API's titles and messages, before reading any data; one line ``fibertensor: error: ...``
and exit code 2 (a batch or a BIDS run lists the refused input and goes on with the others)."""

from __future__ import annotations

import gzip
import tracemalloc

import nibabel as nib
import numpy as np
import pytest

from gpu.peaks.phantom import fod_phantom
from service.cli import main
from service.settings import get_settings
from tests.worker.test_bids import make_dataset
from tests.worker.test_input_limits import BOMB_SHAPE, write_header_and_zeros


@pytest.fixture(autouse=True)
def fresh_settings():
    """Each test reads the FIBERTENSOR_* environment it sets (the settings are cached)."""
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def _header(shape, dtype=np.float32) -> bytes:
    header = nib.Nifti1Header()
    header.set_data_shape(shape)
    header.set_data_dtype(dtype)
    header["vox_offset"] = 352
    return header.binaryblock + b"\x00" * 4


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("limits")
    claim = folder / "claim.nii.gz"
    claim.write_bytes(gzip.compress(_header((2000, 2000, 2000, 45))))
    # a 4×4×4×15 header followed by 1 GiB of zeros, compressed to ~5 MB without holding it
    longer = folder / "longer.nii.gz"
    with gzip.open(longer, "wb", compresslevel=1) as stream:
        stream.write(_header((4, 4, 4, 15)))
        zeros = bytes(8 << 20)
        for _ in range(128):
            stream.write(zeros)
    good = folder / "good.nii.gz"
    nib.save(nib.Nifti1Image(fod_phantom((6, 5, 4), lmax=4, seed=1)["sh"].astype(np.float32), np.eye(4)), good)
    np.save(folder / "kernel.npy", np.ones((2, 15, 3, 3), np.float32))
    return {"claim": claim, "longer": longer, "good": good, "bomb": write_header_and_zeros(folder / "bomb.nii.gz", BOMB_SHAPE),
            "kernel": folder / "kernel.npy", "folder": folder}


def error_line(argv, capsys) -> str:
    assert main([str(a) for a in argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("fibertensor: error: ")
    return err[0]


def _commands(path, files, tmp_path):
    """Each local command with ``path`` as its (NIfTI) input."""
    return {
        "peaks": ["peaks", path, tmp_path / "out", "--backend", "cpu"],
        "conv": ["conv", "cp", "--input", path, "--kernel", files["kernel"], "--rank", "1",
                 "--out", tmp_path / "y.nii.gz", "--backend", "cpu"],
        "compress": ["compress", path, tmp_path / "c.npz"],
    }


@pytest.mark.parametrize("command", ["peaks", "conv", "compress"])
def test_a_2000_cubed_header_is_too_many_voxels(files, tmp_path, capsys, command):
    line = error_line(_commands(files["claim"], files, tmp_path)[command], capsys)
    assert line == (f"fibertensor: error: Too many voxels: {files['claim']}: the image grid 2000×2000×2000 has 8000000000 "
                    "voxels, more than this server's limit of 67108864 (FIBERTENSOR_MAX_VOXELS); crop it")
    assert list(tmp_path.iterdir()) == []


def test_the_servers_environment_variables_set_the_limits(files, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FIBERTENSOR_MAX_INPUT_BYTES", "5000")
    line = error_line(["peaks", files["good"], tmp_path / "out"], capsys)
    assert line == (f"fibertensor: error: Input too large: {files['good']}: the header declares 7200 bytes of image data "
                    "(6×5×4×15 of float32), more than this server's limit of 5000 (FIBERTENSOR_MAX_INPUT_BYTES); "
                    "crop the volume")
    monkeypatch.setenv("FIBERTENSOR_MAX_INPUT_BYTES", "lots")
    get_settings.cache_clear()
    line = error_line(["peaks", files["good"], tmp_path / "out"], capsys)
    assert line.startswith("fibertensor: error: invalid setting in the environment: FIBERTENSOR_MAX_INPUT_BYTES: ")


@pytest.mark.parametrize("command", ["peaks", "conv", "compress"])
def test_a_stream_longer_than_its_header_is_refused_without_inflating_it(files, tmp_path, capsys, command):
    argv = [str(a) for a in _commands(files["longer"], files, tmp_path)[command]]
    main(argv)  # the command's modules imported, so the trace below counts the check alone
    capsys.readouterr()
    tracemalloc.start()
    try:
        assert main(argv) == 2
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert capsys.readouterr().err == (
        f"fibertensor: error: Input larger than its header: {files['longer']}: the compressed data inflates to more than its "
        "header declares; the file is damaged, write it again\n")
    # 1 GiB of zeros behind the header: the reader's 4 MiB input chunk, its unconsumed tail and
    # a 1 MiB piece held (the checks' 1 MiB chunks for conv), not the stream
    assert peak < 16 << 20


def test_the_issues_small_upload_of_a_huge_peaks_job(files, tmp_path, capsys):
    bomb = files["bomb"]
    assert 300_000 < bomb.stat().st_size < 400_000
    argv = ["peaks", str(bomb), str(tmp_path / "out")]
    main(argv)
    capsys.readouterr()
    tracemalloc.start()
    try:
        assert main(argv) == 2
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    line = capsys.readouterr().err.strip()
    assert line.startswith("fibertensor: error: Job too large for memory: this peaks job needs about 4.4 GiB of "
                           f"memory ({256 * 256 * 128 * 568} bytes), more than this server's limit of 4.0 GiB "
                           "(FIBERTENSOR_MAX_JOB_MEMORY_BYTES); crop the volume")
    assert "\n" not in line and peak < 2 << 20  # refused from its header
    assert list(tmp_path.iterdir()) == []


def test_a_batch_lists_the_refused_inputs_and_writes_the_others(files, tmp_path, capsys):
    folder = tmp_path / "in"
    folder.mkdir()
    for name in ("good", "claim", "bomb"):
        (folder / f"{name}.nii.gz").symlink_to(files[name])
    out = tmp_path / "out"
    assert main(["batch", "peaks", str(folder), "--out-dir", str(out), "--backend", "cpu", "--quiet"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "fibertensor: 2 of 3 inputs failed:"
    assert err[1].startswith(f"  {folder / 'bomb.nii.gz'}: Job too large for memory: this peaks job needs about 4.4 GiB")
    assert err[2].startswith(f"  {folder / 'claim.nii.gz'}: Too many voxels: the image grid 2000×2000×2000")
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(("bomb", "claim"))) == []
    reference = tmp_path / "reference"
    assert main(["peaks", str(files["good"]), str(reference), "--backend", "cpu", "--quiet"]) == 0
    for name in ("peaks", "amplitudes", "count"):
        np.testing.assert_array_equal(np.asarray(nib.load(out / f"good_{name}.nii.gz").dataobj),
                                      np.asarray(nib.load(f"{reference}_{name}.nii.gz").dataobj), err_msg=name)


def test_a_bids_run_reports_the_refused_fod_and_publishes_the_others(files, tmp_path, capsys):
    root = tmp_path / "ds"
    fods = make_dataset(root)
    fods["01", "2"].write_bytes(files["claim"].read_bytes())
    out = tmp_path / "out"
    argv = ["bids", root, out, "participant", "--participant-label", "01", "--backend", "cpu", "--quiet"]
    assert main([str(a) for a in argv]) == 1
    assert capsys.readouterr().err == (
        f"{fods['01', '2'].name}: Too many voxels: the image grid 2000×2000×2000 has 8000000000 voxels, more "
        "than this server's limit of 67108864 (FIBERTENSOR_MAX_VOXELS); crop it\n")
    published = {p.name for p in out.rglob("*_desc-peaks_dwimap.nii.gz")}
    assert published == {"sub-01_ses-1_model-csd_param-peaks_desc-peaks_dwimap.nii.gz"}
