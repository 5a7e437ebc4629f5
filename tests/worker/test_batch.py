"""The batch pipeline (``fibertensor batch peaks``): the files of one ``fibertensor peaks``
run per input, byte for byte once inflated, in one process or in worker processes sharing one queue; a
failing input fails alone and leaves no output behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from gpu.peaks.phantom import fod_phantom
from service.cli import main
from service.settings import get_settings
from tests.file_contents import assert_same_file
from worker.io import images
from worker.batch import batch_items, run_batch, up_to_date
from worker.errors import InputError
from worker.jobs.peaks import IMAGE_OUTPUTS
from worker.params import PeaksParams

SHAPE = (7, 6, 5)
GOOD = ("sub-01", "sub-02", "sub-03")
IMAGE_FILES = tuple(f"_{name}.nii.gz" for name in IMAGE_OUTPUTS)
OUTPUT_FILES = IMAGE_FILES + ("_qc.png", ".json")
REPO = Path(__file__).resolve().parents[2]


def write_fod(path: Path, seed: int, volumes: int | None = None, shape: tuple[int, int, int] = SHAPE) -> Path:
    sh = fod_phantom(shape, 8, seed=seed)["sh"]
    if volumes is not None:
        sh = sh[..., :volumes]
    affine = np.diag([2.0, 2.0, 2.5, 1.0])
    image = nib.Nifti1Image(sh, affine)
    image.set_sform(affine, code=1)
    nib.save(image, path)
    return path


@pytest.fixture(scope="module")
def cohort(tmp_path_factory) -> Path:
    """Three good subjects and, between them, a truncated file and a 10-volume file."""
    folder = tmp_path_factory.mktemp("cohort")
    for seed, name in enumerate(GOOD):
        write_fod(folder / f"{name}.nii.gz", seed)
    whole = write_fod(folder / "sub-02a_cut.nii.gz", 7).read_bytes()
    (folder / "sub-02a_cut.nii.gz").write_bytes(whole[: len(whole) // 2])
    write_fod(folder / "sub-02b_tenvolumes.nii.gz", 8, volumes=10)
    return folder


@pytest.fixture(scope="module")
def one_at_a_time(cohort, tmp_path_factory) -> Path:
    """``fibertensor peaks IN DIR/<name> --backend cpu`` for each good input, in a process of
    its own (one for the three: tests/worker/jobs/test_reproducible_outputs.py shows a peaks
    run writes the same bytes whatever ran before it in its process)."""
    out = tmp_path_factory.mktemp("single")
    environment = {**os.environ, "PYTHONPATH": str(REPO)}
    runs = [["peaks", str(cohort / f"{name}.nii.gz"), str(out / name), "--backend", "cpu", "--quiet"] for name in GOOD]
    code = "import json, sys; from service.cli import main; sys.exit(max(main(run) for run in json.loads(sys.argv[1])))"
    done = subprocess.run([sys.executable, "-c", code, json.dumps(runs)], cwd=REPO, env=environment, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    return out


def assert_same_outputs(batch: Path, single: Path) -> None:
    for name in GOOD:
        for suffix in IMAGE_FILES:
            # the images' values first, so that a difference says where it is, then the files
            np.testing.assert_array_equal(np.asanyarray(nib.load(batch / f"{name}{suffix}").dataobj),
                                          np.asanyarray(nib.load(single / f"{name}{suffix}").dataobj), name + suffix)
            assert_same_file(batch / f"{name}{suffix}", single / f"{name}{suffix}", name + suffix)
        sidecars = [json.loads((folder / f"{name}.json").read_text()) for folder in (batch, single)]
        for sidecar in sidecars:
            assert sidecar.pop("seconds").keys() >= {"read", "peaks_total", "write", "total"}
        assert sidecars[0] == sidecars[1]


def assert_failures_left_nothing(out: Path) -> None:
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(f"{name}{suffix}" for name in GOOD for suffix in OUTPUT_FILES)


def test_batch_equals_one_peaks_run_per_input_and_failures_fail_alone(cohort, one_at_a_time, tmp_path, capsys,
                                                                        monkeypatch):
    """In one process; the service's checks pass each input from its header, and the read
    that follows is the only pass over its compressed data."""
    passes_before_the_read = []
    monkeypatch.setattr(images, "check_stored_size", lambda path, *a: passes_before_the_read.append(path))
    out = tmp_path / "batch"
    status = main(["batch", "peaks", str(cohort), "--out-dir", str(out), "--backend", "cpu", "--readers", "2",
                   "--processes-per-gpu", "1"])
    captured = capsys.readouterr()
    assert status == 1
    assert passes_before_the_read == []
    assert_same_outputs(out, one_at_a_time)
    assert_failures_left_nothing(out)
    assert "3 of 5 inputs written" in captured.out and "2 failed" in captured.out
    failures = captured.err.splitlines()
    assert failures[0] == "fibertensor: 2 of 5 inputs failed:"
    assert failures[1].startswith(f"  {cohort / 'sub-02a_cut.nii.gz'}: Truncated or damaged file: "
                                  "sub-02a_cut.nii.gz: the gzip")
    assert "sub-02b_tenvolumes.nii.gz" in failures[2] and "has one of 6 (lmax 2)" in failures[2]


def test_batch_refuses_as_the_service_does(cohort, tmp_path, capsys, monkeypatch):
    """The service's limits (here FIBERTENSOR_MAX_VOXELS) refuse an input from its header, in
    the batch's worker processes too; nothing is written for it."""
    monkeypatch.setenv("FIBERTENSOR_MAX_VOXELS", str(SHAPE[0] * SHAPE[1] * SHAPE[2] - 1))
    get_settings.cache_clear()
    try:
        out = tmp_path / "out"
        assert main(["batch", "peaks", str(cohort / "sub-01.nii.gz"), str(cohort / "sub-02.nii.gz"), "--out-dir",
                     str(out), "--backend", "cpu", "--processes-per-gpu", "2", "--quiet"]) == 1
    finally:
        get_settings.cache_clear()
    failures = capsys.readouterr().err.splitlines()
    assert failures[0] == "fibertensor: 2 of 2 inputs failed:"
    assert all(line.endswith("more than this server's limit of 209 (FIBERTENSOR_MAX_VOXELS); crop it")
               and ": Too many voxels: the image grid 7×6×5 has 210 voxels" in line for line in failures[1:])
    assert list(out.iterdir()) == []


@pytest.mark.parametrize("devices, processes, names", [
    (["0", "1"], 1, {"gpu 0", "gpu 1"}),
    (["0"], 2, {"gpu 0 #1", "gpu 0 #2"}),
    (None, 3, {"process #1", "process #2", "process #3"}),
])
def test_worker_processes_share_one_queue(cohort, one_at_a_time, tmp_path, devices, processes, names):
    """Spawned worker processes (one per GPU, several on one GPU, or several on the backend's
    device; the CPU backend here) write the same files as one process."""
    out = tmp_path / "processes"
    items = batch_items([cohort], out)
    reports = run_batch(items, PeaksParams(backend="cpu"), devices=devices, processes=processes, readers=1,
                        writers=1)
    assert [r.input.name for r in reports] == [item.fod.name for item in items]
    assert [r.ok for r in reports] == [True, True, False, False, True]
    assert {r.worker for r in reports if r.ok} <= names
    assert all(r.seconds["read"] > 0 and r.seconds["compute"] > 0 for r in reports if r.ok)
    assert_same_outputs(out, one_at_a_time)
    assert_failures_left_nothing(out)


def test_a_failed_write_leaves_none_of_its_outputs(cohort, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "sub-02_count.nii.gz").mkdir()  # the count image cannot be renamed onto a folder
    items = batch_items([cohort / f"{name}.nii.gz" for name in GOOD], out)
    reports = run_batch(items, PeaksParams(backend="cpu"), readers=1, writers=1)
    assert [r.ok for r in reports] == [True, False, True]
    assert "sub-02_count.nii.gz" in reports[1].error
    left = sorted(p.name for p in out.iterdir())
    assert left == sorted([f"{n}{s}" for n in ("sub-01", "sub-03") for s in OUTPUT_FILES] + ["sub-02_count.nii.gz"])


def test_resume_runs_only_what_is_missing_or_stale(cohort, one_at_a_time, tmp_path, capsys):
    """--resume: an input whose outputs a run with these options wrote after the input last
    changed is skipped (its files untouched); one with no sidecar, an older one, an output
    missing or other options runs again, and its outputs are those of one run alone."""
    inputs, out = tmp_path / "in", tmp_path / "out"
    inputs.mkdir()
    out.mkdir()
    for name in GOOD:
        (inputs / f"{name}.nii.gz").write_bytes((cohort / f"{name}.nii.gz").read_bytes())
    for name in GOOD[:2]:  # sub-01 and sub-02 were written by an earlier run; sub-03 was not
        for suffix in OUTPUT_FILES:
            (out / f"{name}{suffix}").write_bytes((one_at_a_time / f"{name}{suffix}").read_bytes())
    earlier = (inputs / "sub-02.nii.gz").stat().st_mtime - 10
    os.utime(out / "sub-02.json", (earlier, earlier))  # sub-02's input changed since
    kept = {p.name: p.stat().st_mtime_ns for p in out.iterdir() if p.name.startswith("sub-01")}
    items = batch_items(sorted(inputs.iterdir()), out)
    params = PeaksParams(backend="cpu")
    assert [up_to_date(item, params) for item in items] == [True, False, False]
    assert not up_to_date(items[0], PeaksParams(backend="cpu", npeaks=2))

    assert main(["batch", "peaks", str(inputs), "--out-dir", str(out), "--backend", "cpu", "--resume",
                 "--processes-per-gpu", "1"]) == 0
    summary = capsys.readouterr().out
    assert "2 of 3 inputs written" in summary and "1 up to date, skipped; 0 failed" in summary
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir() if p.name.startswith("sub-01")} == kept
    assert_same_outputs(out, one_at_a_time)
    assert all(up_to_date(item, params) for item in items)

    (out / "sub-03_amplitudes.nii.gz").unlink()
    (out / "sub-01.json").write_text("{")  # a sidecar cut short
    reports = run_batch(items, params, resume=True)
    assert [(r.ok, r.skipped) for r in reports] == [(True, False), (True, True), (True, False)]
    assert_same_outputs(out, one_at_a_time)


def test_batch_items_names_and_folders(cohort, tmp_path):
    out = tmp_path / "out"
    items = batch_items([cohort / "sub-01.nii.gz", cohort, cohort / "sub-01.nii.gz"], out)
    assert [item.fod.name for item in items] == [
        "sub-01.nii.gz", "sub-02.nii.gz", "sub-02a_cut.nii.gz", "sub-02b_tenvolumes.nii.gz", "sub-03.nii.gz"]
    assert items[1].outputs.path("peaks", ".nii.gz") == out / "sub-02_peaks.nii.gz"
    assert items[1].outputs.sidecar == out / "sub-02.json"

    earlier = tmp_path / "earlier"
    earlier.mkdir()
    write_fod(earlier / "sub-09.nii", 9)
    for suffix in IMAGE_FILES:
        (earlier / f"sub-09{suffix}").write_bytes(b"")
    assert [item.fod.name for item in batch_items([earlier], earlier)] == ["sub-09.nii"]

    with pytest.raises(InputError, match="would both write sub-09_peaks.nii.gz"):
        batch_items([earlier / "sub-09.nii", write_fod(tmp_path / "sub-09.nii.gz", 9)], out)
    with pytest.raises(InputError, match="does not exist"):
        batch_items([tmp_path / "missing.nii.gz"], out)
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="holds no .nii, .nii.gz, .mif, .mif.gz or .mih file"):
        batch_items([tmp_path / "empty"], out)


@pytest.mark.parametrize("gpus, message", [
    ("0,,1", "distinct device numbers"), ("1,1", "distinct device numbers"), ("all", "no CUDA GPU is visible")])
def test_gpus_option_errors(cohort, tmp_path, capsys, gpus, message):
    assert main(["batch", "peaks", str(cohort), "--out-dir", str(tmp_path), "--gpus", gpus]) == 2
    assert message in capsys.readouterr().err


def test_an_interrupted_batch_stops_reading_and_finishes_started_writes(cohort, tmp_path):
    """Ctrl-C (here: raised from the report of the second input, in the computing thread):
    no further input is computed, the first input's write completes, nothing partial stays."""
    out = tmp_path / "out"
    items = batch_items([cohort / name for name in ("sub-01.nii.gz", "sub-02a_cut.nii.gz", "sub-02.nii.gz",
                                                    "sub-03.nii.gz")], out)

    def report(item_report):
        if not item_report.ok:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_batch(items, PeaksParams(backend="cpu"), readers=1, writers=1, report=report)
    assert sorted(p.name for p in out.iterdir()) == sorted(f"sub-01{suffix}" for suffix in OUTPUT_FILES)


def _numbered_inputs(count: int):
    """``take(stopping)`` for ``worker.batch._pipeline``: inputs numbered 0 … count − 1, then None."""
    import threading
    from types import SimpleNamespace

    inputs = iter(range(count))
    lock = threading.Lock()

    def take(stopping):
        with lock:
            number = next(inputs, None)
        return None if number is None else SimpleNamespace(input=Path(f"sub-{number:02d}"), number=number)

    return take


@pytest.mark.parametrize("readers", [1, 2, 3])
def test_a_process_holds_at_most_one_volume_a_reader_besides_the_one_computing(readers):
    """Reads far faster than the engine (the GPU-bound case): a reader claims an input only
    where the pipeline has room, so readers + 1 volumes are in memory at most, every input
    is computed once."""
    import threading

    from worker.batch import _pipeline
    from worker.batch_jobs import BatchStages

    take = _numbered_inputs(12)
    lock = threading.Lock()
    held, most, computed, reports = [0], [0], [], []

    def read(item, inflate_threads):
        with lock:
            held[0] += 1
            most[0] = max(most[0], held[0])
        return item.number

    def compute(number):
        time.sleep(0.02)
        with lock:
            held[0] -= 1
        computed.append(number)
        return number

    _pipeline(take, BatchStages(read, compute, lambda item, loaded, result, seconds: {}), readers, 1,
              reports.append, "test")
    assert most[0] == readers + 1
    assert sorted(computed) == list(range(12)) and len(reports) == 12 and all(r.ok for r in reports)


@pytest.mark.parametrize("readers, cores, first", [(1, 8, 8), (3, 8, 2), (4, 2, 1)])
def test_each_reader_inflates_its_first_input_on_its_part_of_the_cores(readers, cores, first):
    """At the start the engine waits for the first reads and the cores are idle: each reader
    takes cores // readers inflate threads for its first input, one for every later one."""
    import threading

    from worker.batch import _pipeline
    from worker.batch_jobs import BatchStages

    take = _numbered_inputs(12)
    lock = threading.Lock()
    threads_by_reader: dict[str, list[int]] = {}

    def read(item, inflate_threads):
        with lock:
            threads_by_reader.setdefault(threading.current_thread().name, []).append(inflate_threads)
        return item.number

    _pipeline(take, BatchStages(read, lambda number: number, lambda item, loaded, result, seconds: {}), readers, 1,
              lambda report: None, "test", cores)
    assert sum(map(len, threads_by_reader.values())) == 12
    assert all(threads[0] == first and set(threads[1:]) <= {1} for threads in threads_by_reader.values())


def test_ctrl_c_stops_worker_processes_and_leaves_whole_outputs_only(tmp_path):
    """Ctrl-C (SIGINT to the process group, as a terminal sends it) during a batch in two
    worker processes: exit status 130, no further input is started, and every input has all
    of its files or none (no partial or temporary file)."""
    inputs, out = tmp_path / "inputs", tmp_path / "out"
    inputs.mkdir()
    names = [f"sub-{index:02d}" for index in range(16)]
    for index, name in enumerate(names):
        write_fod(inputs / f"{name}.nii.gz", index, shape=(20, 20, 16))
    environment = {**os.environ, "PYTHONPATH": str(REPO)}
    batch = subprocess.Popen([sys.executable, "-m", "service", "batch", "peaks", str(inputs), "--out-dir", str(out),
                              "--backend", "cpu", "--processes-per-gpu", "2", "--readers", "1", "--writers", "1",
                              "--quiet"], cwd=REPO, env=environment, start_new_session=True,
                             stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not (out.is_dir() and any(out.glob("*.json"))) and batch.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    os.killpg(batch.pid, signal.SIGINT)
    _, stderr = batch.communicate(timeout=300)
    assert batch.returncode == 130, stderr
    assert "fibertensor: interrupted" in stderr
    left = {p.name for p in out.iterdir()}
    whole = [name for name in names if f"{name}.json" in left]
    assert 1 <= len(whole) < len(names)
    assert left == {f"{name}{suffix}" for name in whole for suffix in OUTPUT_FILES}


def test_ctrl_c_while_a_report_is_read_waits_for_the_report_to_end():
    """Ctrl-C while the batch's report loop reads from its pipe only sets an event, which the
    loop checks between reports: raised in the middle of a read, it left half a report on the
    pipe, read next as garbage (``EOFError``, exit status 1 instead of 130)."""
    import multiprocessing
    import threading

    from worker.batch import _ctrl_c_between_reports

    reports = multiprocessing.get_context("spawn").Queue()
    big = np.arange(1 << 21, dtype=np.float64)  # 16 MiB: many reads of the pipe
    with _ctrl_c_between_reports() as interrupted:
        # the signal arrives while the main thread is inside get(), the report soon after
        threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT)).start()
        threading.Timer(0.2, reports.put, (big,)).start()
        received = reports.get(timeout=30)
        assert interrupted.is_set()
    np.testing.assert_array_equal(received, big)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.parametrize("chosen", [None, "3"])
def test_worker_processes_get_their_share_of_cores_as_blas_threads_unless_the_user_chose(monkeypatch, chosen):
    """A spawned worker imports numpy, whose OpenBLAS reads OPENBLAS_NUM_THREADS, before its
    own code runs: the batch sets it for the processes it starts, and only for them."""
    from worker.batch import _blas_threads_of_children

    if chosen is None:
        monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OPENBLAS_NUM_THREADS", chosen)
    probe = [sys.executable, "-c", "import os; print(os.environ.get('OPENBLAS_NUM_THREADS'))"]
    with _blas_threads_of_children(2):
        seen = subprocess.run(probe, capture_output=True, text=True, check=True).stdout.strip()
    assert seen == (chosen or "2")
    assert os.environ.get("OPENBLAS_NUM_THREADS") == chosen


@pytest.mark.parametrize("cores, devices, kind, expected", [
    (32, 1, "peaks", 24), (32, 2, "peaks", 12), (32, 1, "fixels", 24),
    (32, 1, "fod", 6), (32, 2, "fod", 6), (16, 1, "fod", 6), (16, 2, "fod", 6), (4, 1, "fod", 3), (2, 2, "fod", 1), (1, 1, "peaks", 1)])
def test_default_processes_per_gpu_by_kind(monkeypatch, cores, devices, kind, expected):
    """Three per four cores among the GPUs, at least one; a fod batch, whose fit waits on the GPU,
    no more than FOD_PROCESSES_PER_GPU a GPU."""
    from worker import batch

    monkeypatch.setattr(batch.os, "sched_getaffinity", lambda pid: set(range(cores)))
    assert batch.default_processes(devices, kind) == expected


def test_the_help_states_the_fod_processes_limit(capsys):
    """The command line's help gives the limit the batch applies (the CLI does not import the
    batch module to build its help: it is slow to import)."""
    from service.cli import main
    from worker.batch import FOD_PROCESSES_PER_GPU

    for command in (["batch", "fod"], ["bids"]):
        with pytest.raises(SystemExit):
            main([*command, "--help"])
        assert f"at most {FOD_PROCESSES_PER_GPU} per GPU" in " ".join(capsys.readouterr().out.split())
