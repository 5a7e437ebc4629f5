"""``fibertensor submit`` of a folder holding bad files, job warnings in
``fibertensor submit``/``jobs``/``peaks`` and ``--transfers`` (several
uploads at a time, each job's results downloaded as it succeeds), against a real service:
the API served by uvicorn on a port, and a worker thread running the queued jobs as the
Celery task does."""

from __future__ import annotations

import gzip
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import nibabel as nib
import numpy as np
import pytest

from gpu.peaks.phantom import fod_phantom
from service.app import create_app
from service.cli import main
from service.cli.client import RequestRefused, ServiceClient, poll_interval, submit_each
from service.settings import Settings
from tests.integration.processes import serve_in_thread
from tests.service.conftest import run_queued
from tests.service.toy_kind import write_volume
from tests.worker.test_bids import make_dataset
from worker.job_kinds import get_job_kind
from worker.job_runner import run_job
from worker.job_store import JobStatus, JobStore


@contextmanager
def _serving(settings: Settings, kinds: dict, work_once: Callable[[JobStore], object] = run_queued) -> Iterator[str]:
    """The API on a port and a worker thread calling ``work_once(store)`` every 50 ms."""
    stopping = threading.Event()

    def work() -> None:
        store = JobStore(settings.data_dir)
        while not stopping.is_set():
            work_once(store)
            time.sleep(0.05)

    working = threading.Thread(target=work, daemon=True)
    working.start()
    try:
        with serve_in_thread(create_app(settings, kinds=kinds)) as base:
            yield base
    finally:
        stopping.set()
        working.join(60)


@pytest.fixture
def service(tmp_path, toy_kinds):
    with _serving(Settings(data_dir=tmp_path / "data", max_voxels=10_000), toy_kinds) as base:
        yield base


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
    assert listing[0].endswith("! label  (inputs)") and "succeeded" in listing[1]
    assert listing[1].endswith("! nan  (sub-9_fod.nii.gz)")  # the input by the name it was sent with
    assert listing[2] == " " * 30 + "! " + warning.format("sub-9_fod.nii.gz")
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
    published = {p.name for p in (tmp_path / "out").rglob("*_desc-peaks_dwimap.nii.gz")}
    assert published == {"sub-01_ses-1_model-csd_param-peaks_desc-peaks_dwimap.nii.gz"}


def _cohort(folder: Path, subjects: int) -> dict[str, np.ndarray]:
    """``subjects`` FOD phantoms (lmax 4) and one 10-volume FOD, which is no even-order SH
    series, so the service refuses it (422)."""
    folder.mkdir()
    for i in range(subjects):
        sh = fod_phantom((6, 5, 4), lmax=4, seed=10 + i)["sh"].astype(np.float32)
        nib.save(nib.Nifti1Image(sh, np.eye(4)), folder / f"sub-{i:02d}_fod.nii.gz")
    nib.save(nib.Nifti1Image(np.ones((6, 5, 4, 10), np.float32), np.eye(4)), folder / "sub-03b_fod.nii.gz")


def test_transfers_at_a_time_give_what_one_at_a_time_gives(service, tmp_path, capsys):
    folder = tmp_path / "cohort"
    _cohort(folder, 6)
    printed, files = {}, {}
    for transfers in ("1", "3"):
        out = tmp_path / f"out-{transfers}"
        code = main(["submit", "peaks", str(folder), "--backend", "cpu", "--label", f"t{transfers}", "--server",
                     service, "--out", str(out), "--transfers", transfers, "--quiet"])
        assert code == 1
        captured = capsys.readouterr()
        queued = dict(re.fullmatch(r"(\S+) queued \((\S+)_fod\.nii\.gz\)", line).groups()
                      for line in captured.out.splitlines() if " queued " in line)
        assert sorted(queued.values()) == [f"sub-{i:02d}" for i in range(6)]
        # each job named by its input, the output folder by OUT
        done = [re.sub(r"^\S+", lambda m: queued[m.group()], line).replace(str(out), "OUT")
                for line in captured.out.splitlines() if " queued " not in line]
        printed[transfers] = done, captured.err
        files[transfers] = {path.relative_to(out): path.read_bytes() for path in sorted(out.rglob("*"))
                            if path.is_file()}
    assert printed["3"] == printed["1"]
    done, err = printed["1"]
    assert done == [f"sub-{i:02d} succeeded -> OUT/sub-{i:02d}_fod" for i in range(6)]
    assert err.splitlines()[0] == "fibertensor: 1 of 7 inputs failed:"
    assert err.splitlines()[1].startswith(f"  {folder / 'sub-03b_fod.nii.gz'}: refused (422): ")
    assert len(err.splitlines()) == 2
    assert {path.parent.name for path in files["1"]} == {f"sub-{i:02d}_fod" for i in range(6)}
    assert sorted(files["3"]) == sorted(files["1"])
    for path, data in files["1"].items():
        if path.suffix == ".json":  # the same but for the job's own timings
            assert {**json.loads(files["3"][path]), "seconds": None} == {**json.loads(data), "seconds": None}
        else:
            assert files["3"][path] == data, path


def test_a_refusal_of_every_input_stops_the_batch(tmp_path, toy_kinds, capsys):
    folder = tmp_path / "subjects"
    folder.mkdir()
    for i in range(8):
        write_volume(folder / f"sub-{i}.nii.gz", np.full((4, 4, 3), i, np.float32))
    settings = Settings(data_dir=tmp_path / "data", api_keys={"right-key": "lab"})
    with _serving(settings, toy_kinds) as base:
        argv = ["submit", "scale", str(folder), "--server", base, "--api-key", "wrong-key", "--transfers", "3",
                "--out", str(tmp_path / "out"), "--quiet"]
        assert main(argv) == 2
        captured = capsys.readouterr()
        assert captured.out == ""
        assert re.fullmatch(r"fibertensor: error: POST /v1/jobs/scale -> 401 .*\n", captured.err)
        # the uploads under way when the first refusal came back end; no other starts
        posts: list[httpx.Request] = []
        with ServiceClient(base, "wrong-key") as client:
            client.http.event_hooks["request"] = [posts.append]
            with pytest.raises(RequestRefused) as refused:
                submit_each(client, get_job_kind("scale"), [{"volume": path} for path in sorted(folder.iterdir())],
                            {}, transfers=3)
        assert refused.value.status == 401 and len(posts) == 3
        assert httpx.get(f"{base}/v1/jobs", headers={"X-API-Key": "right-key"}).json()["jobs"] == []
    assert not (tmp_path / "out").exists()


def test_results_are_downloaded_while_other_jobs_run(tmp_path, toy_kinds, capsys):
    folder = tmp_path / "subjects"
    folder.mkdir()
    volumes = {f"sub-{i}": np.full((4, 4, 3), i, np.float32) for i in range(3)}
    for name, data in volumes.items():
        write_volume(folder / f"{name}.nii.gz", data)
    out = tmp_path / "out"
    on_disk_before_the_last: list[list[str]] = []

    def one_job_at_a_time(store: JobStore) -> None:
        queued = [job_id for job_id in reversed(store.job_ids()) if store.read(job_id).status is JobStatus.queued]
        if not queued:
            return
        if sum(store.read(job_id).status is JobStatus.succeeded for job_id in store.job_ids()) == 2:
            # the last job waits (30 s at most) for a result of the first two on the client's disk
            deadline = time.monotonic() + 30
            while not list(out.glob("*/scaled.nii.gz")) and time.monotonic() < deadline:
                time.sleep(0.05)
            on_disk_before_the_last.append(sorted(path.parent.name for path in out.glob("*/scaled.nii.gz")))
        run_job(store, queued[0], get_job_kind, heartbeat_interval=1.0, heartbeat_timeout=30.0, max_worker_losses=3)

    with _serving(Settings(data_dir=tmp_path / "data"), toy_kinds, one_job_at_a_time) as base:
        assert main(["submit", "scale", str(folder), "--factor", "3", "--server", base, "--out", str(out),
                     "--transfers", "2", "--quiet"]) == 0
    assert len(on_disk_before_the_last) == 1 and on_disk_before_the_last[0]
    assert set(on_disk_before_the_last[0]) < set(volumes)
    for name, data in volumes.items():
        np.testing.assert_array_equal(np.asarray(nib.load(out / name / "scaled.nii.gz").dataobj), 3 * data)
    assert [line.split(" ", 1)[1] for line in capsys.readouterr().out.splitlines() if "succeeded" in line] == [
        f"succeeded -> {out / name}" for name in volumes]


@pytest.mark.parametrize("command", [["submit", "scale", "v.nii.gz"], ["jobs"], ["bids", "ds", "out", "participant"]])
def test_transfers_must_be_at_least_one(toy_kinds, command, capsys):
    with pytest.raises(SystemExit) as exited:
        main([*command, "--transfers", "0"])
    assert exited.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith(
        "argument --transfers: '0': give a whole number of at least 1 (1: one after the other)")


def test_a_large_batch_is_polled_less_often():
    """Each poll lists the whole batch, the server reading every record: at 2,000 jobs a
    second of interval, a 50,000-subject batch is listed every 10 s, not every 0.5 s."""
    assert [poll_interval(n) for n in (1, 1000, 4000, 50_000, 1_000_000)] == [0.5, 0.5, 2.0, 10.0, 10.0]

