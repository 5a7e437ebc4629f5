"""``fibertensor submit`` of a folder holding bad files (issue 14, item 5) and job warnings in
``fibertensor submit``/``jobs``/``peaks`` (issue 14, item 2), against a real service: the
API served by uvicorn on a port, and a worker thread running the queued jobs as the Celery
task does."""

from __future__ import annotations

import gzip
import threading
import time

import httpx
import nibabel as nib
import numpy as np
import pytest

from gpu.peaks.phantom import fod_phantom
from service.app import create_app
from service.cli import main
from service.settings import Settings
from tests.integration.processes import serve_in_thread
from tests.service.conftest import run_queued
from tests.service.toy_kind import write_volume
from tests.worker.test_bids import make_dataset
from worker.job_store import JobStore


@pytest.fixture
def service(tmp_path, toy_kinds):
    settings = Settings(data_dir=tmp_path / "data", max_voxels=10_000)
    stopping = threading.Event()

    def work() -> None:
        store = JobStore(settings.data_dir)
        while not stopping.is_set():
            run_queued(store)
            time.sleep(0.05)

    working = threading.Thread(target=work, daemon=True)
    working.start()
    try:
        with serve_in_thread(create_app(settings, kinds=toy_kinds)) as base:
            yield base
    finally:
        stopping.set()
        working.join(60)


def _header_only(shape) -> bytes:
    header = nib.Nifti1Header()
    header.set_data_shape(shape)
    header.set_data_dtype(np.float32)
    header["vox_offset"] = 352
    return header.binaryblock + b"\x00" * 4


def test_a_folder_with_bad_files_sends_every_good_one(service, tmp_path, capsys):
    folder = tmp_path / "subjects"
    folder.mkdir()
    rng = np.random.default_rng(5)
    good = {name: rng.normal(size=(6, 5, 4)).astype(np.float32) for name in ("sub-1", "sub-3", "sub-5")}
    for name, data in good.items():
        write_volume(folder / f"{name}.nii.gz", data)
    (folder / "sub-2.nii.gz").write_bytes(b"not gzip at all")
    (folder / "sub-4.nii.gz").write_bytes(gzip.compress(_header_only((100, 100, 100))))
    out = tmp_path / "out"
    code = main(["submit", "scale", str(folder), "--factor", "3", "--server", service, "--out", str(out), "--quiet"])
    captured = capsys.readouterr()
    assert code == 1
    assert captured.err.splitlines() == [
        "fibertensor: 2 of 5 inputs failed:",
        f"  {folder / 'sub-2.nii.gz'}: refused (422): Not gzip-compressed: volume: 'sub-2.nii.gz' ends in .gz but is "
        "not gzip data; rename it without .gz if it is uncompressed, or compress it with gzip",
        f"  {folder / 'sub-4.nii.gz'}: refused (422): Too many voxels: volume: the image grid 100×100×100 has "
        "1000000 voxels, more than this server's limit of 10000 (FIBERTENSOR_MAX_VOXELS); crop it",
    ]
    assert sorted(p.name for p in out.iterdir()) == sorted(good)
    for name, data in good.items():
        np.testing.assert_allclose(np.asarray(nib.load(out / name / "scaled.nii.gz").dataobj), 3 * data, rtol=1e-6)
    assert len(httpx.get(f"{service}/v1/jobs", params={"label": "subjects"}).json()["jobs"]) == 3


def test_a_refusal_names_the_users_file_not_the_stored_one(service, tmp_path, capsys):
    # nibabel's message names the file the service stored as .../inputs/volume.nii.gz
    broken = tmp_path / "sub-7_T1w.nii.gz"
    broken.write_bytes(gzip.compress(_header_only((6, 5, 4))[:200]))
    assert main(["submit", "scale", str(broken), "--server", service, "--quiet"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "fibertensor: 1 of 1 inputs failed:"
    assert err[1] == (f"  {broken}: refused (422): Unreadable NIfTI file: the volume file 'sub-7_T1w.nii.gz' could "
                      'not be read as NIfTI (Cannot work out file type of "sub-7_T1w.nii.gz"); check that it is a '
                      "complete .nii or .nii.gz file (convert other formats with mrconvert or nibabel)")


def test_warnings_reach_submit_jobs_and_peaks(service, tmp_path, capsys):
    sh = fod_phantom((6, 5, 4), lmax=4, seed=2)["sh"].astype(np.float32)
    sh[0, 0, 0, 3] = np.nan
    sh[1, 2, 3, 0] = np.inf
    fod = tmp_path / "sub-9_fod.nii.gz"
    nib.save(nib.Nifti1Image(sh, np.eye(4)), fod)
    warning = ("2 of 120 voxels of '{}' have NaN or infinite SH coefficients; their peaks are NaN and their "
               "count 0")

    assert main(["submit", "peaks", str(fod), "--backend", "cpu", "--label", "nan", "--server", service,
                 "--out", str(tmp_path / "served"), "--quiet"]) == 0
    captured = capsys.readouterr()
    assert captured.err == "  ! " + warning.format("sub-9_fod.nii.gz") + "\n"

    assert main(["jobs", "--label", "nan", "--server", service]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert listing[0].endswith("! label") and listing[1].endswith("! nan") and "succeeded" in listing[1]
    assert listing[2] == " " * 30 + "! " + warning.format("fod.nii.gz")  # the service's name for it
    assert len(listing) == 3

    assert main(["peaks", str(fod), str(tmp_path / "local"), "--backend", "cpu", "--quiet"]) == 0
    assert capsys.readouterr().err == "fibertensor: warning: " + warning.format("sub-9_fod.nii.gz") + "\n"
    served = np.asarray(nib.load(tmp_path / "served" / "peaks.nii.gz").dataobj)
    local = np.asarray(nib.load(tmp_path / "local_peaks.nii.gz").dataobj)
    np.testing.assert_array_equal(served, local)
    assert np.isnan(local[0, 0, 0]).all() and np.isnan(local[1, 2, 3]).all()


def test_bids_on_a_server_goes_on_past_a_refused_fod(service, tmp_path, capsys):
    root = tmp_path / "ds"
    fods = make_dataset(root)
    fods["01", "2"].write_bytes(gzip.compress(_header_only((100, 100, 100, 15))))
    argv = ["bids", root, tmp_path / "out", "participant", "--participant-label", "01", "--backend", "cpu",
            "--server", service, "--quiet"]
    assert main([str(a) for a in argv]) == 1
    assert capsys.readouterr().err == (
        f"{fods['01', '2'].name}: refused (422): Too many voxels: fod: the image grid 100×100×100 has 1000000 voxels, more than "
        "this server's limit of 10000 (FIBERTENSOR_MAX_VOXELS); crop it\n")
    published = {p.name for p in (tmp_path / "out").rglob("*_param-peaks_dwimap.nii.gz")}
    assert published == {"sub-01_ses-1_model-csd_param-peaks_dwimap.nii.gz"}
