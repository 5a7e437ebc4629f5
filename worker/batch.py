"""Many jobs of one kind (peaks, fod, fixels) as one pipeline: read the next inputs, compute
the current one, write the previous ones, at once.

In each process, reader threads check each input's header (as the service does, without
inflating it) and inflate the volume (ISA-L releases the GIL) for the main thread, which
runs the engine on one volume at a time, and writer threads compress and write the
results of the ones before; at most ``readers + 1`` volumes and ``writers`` results are
held, so memory stays flat however long the batch. Each input's files are those the kind's
job function (:func:`worker.jobs.peaks.run_peaks`, :func:`worker.jobs.fod.run_fod`,
:func:`worker.jobs.fixels.run_fixels`) writes for it alone, through the same steps
(:mod:`worker.batch_jobs`), byte for byte (the gzip streams do not depend on timing, thread
or process counts).

One process runs out of the GIL long before a host's cores run out (header parsing, numpy
glue, the fODF metrics, the QC picture), so the pipeline also runs in several spawned worker
processes, one or more per GPU, all taking inputs from one shared queue. Each sets
``CUDA_VISIBLE_DEVICES`` (its own CUDA context on that device) and its share of the cores
for numba's threads before numba is imported in it; the calling process never initialises
CUDA (it may itself have been forked from a server, or fork later).

An input that fails (refused by the checks, unreadable, an engine or write error) is
reported and the others go on; a failed write leaves none of that input's output files
behind.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import queue
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Sequence

from pydantic import BaseModel

from worker.batch_jobs import BatchItem, FixelsItem, FodItem, batch_stages
from worker.errors import InputError
from worker.io.image_names import IMAGE_SUFFIXES
from worker.jobs.fod.response import TISSUES, listed_responses
from worker.jobs.peaks import IMAGE_OUTPUTS, PeaksOutputs
from worker.params.fod import ResponseParams
from worker.params.peaks import PeaksParams

if TYPE_CHECKING:
    from worker.input_limits import InputLimits

__all__ = ["BatchItem", "FodItem", "FixelsItem", "ItemReport", "batch_items", "fod_items", "fixels_items",
           "up_to_date", "default_processes", "default_threads", "visible_gpus", "run_batch"]

_FORMATS = f"{', '.join(IMAGE_SUFFIXES[:-1])} or {IMAGE_SUFFIXES[-1]}"


def _endings(*names: str) -> tuple[str, ...]:
    return tuple(f"_{name}{suffix}" for name in names for suffix in IMAGE_SUFFIXES)


# Images a folder may hold that are not inputs: the masks beside them and outputs of an earlier
# batch into it (of peaks, and of fod but for the WM FODs, which are the FOD kinds' inputs).
_NOT_FODS = _endings(*IMAGE_OUTPUTS, "gm", "csf", "mask")
_NOT_DWIS = _NOT_FODS + _endings("wmfod")


@dataclass
class ItemReport:
    """How one input went: ``error`` says why it failed (empty when it did not); ``seconds``
    has ``read``, ``compute`` (the engine call), ``kernel`` (GPU kernel time, CUDA peaks only) and
    ``write``; ``worker`` names the process ("local", "gpu 0"); ``skipped``: its outputs were
    up to date (:func:`up_to_date`) and it was not run."""

    input: Path
    ok: bool
    worker: str
    error: str = ""
    seconds: dict[str, float] = field(default_factory=dict)
    skipped: bool = False


def _input_name(path: Path) -> str:
    """``sub-01.nii.gz`` → ``sub-01``."""
    for suffix in sorted(IMAGE_SUFFIXES, key=len, reverse=True):
        if path.name.endswith(suffix):
            return path.name[: -len(suffix)]
    return path.name


def _beside(path: Path, name: str, suffixes: Sequence[str]) -> Path | None:
    """The first file ``<name><suffix>`` beside ``path``."""
    return next((found for suffix in suffixes if (found := path.with_name(name + suffix)).is_file()), None)


def _named_inputs(inputs: Iterable[Path], writes: str, not_inputs: tuple[str, ...] = _NOT_FODS
                  ) -> dict[str, tuple[Path, Path | None]]:
    """Each input image by name (``sub-01.nii.gz`` → ``sub-01``) with its mask
    ``<name>_mask.<ext>`` beside it if any: files as given, and each folder's NIfTI and MRtrix
    images (not its sub-folders, nor those whose names end as ``not_inputs``: masks, outputs
    of an earlier batch); a file named twice counts once. ``writes``: the first output's name, for the error of two inputs of one name."""
    files: list[Path] = []
    for path in map(Path, inputs):
        if path.is_dir():
            found = sorted(p for p in path.iterdir()
                           if p.is_file() and p.name.endswith(IMAGE_SUFFIXES) and not p.name.endswith(not_inputs)
                           and not p.name.startswith("."))
            if not found:
                raise InputError("No inputs", f"the folder {str(path)!r} holds no {_FORMATS} file")
            files.extend(found)
        elif path.is_file():
            files.append(path)
        else:
            raise InputError("Missing input", f"{str(path)!r} does not exist; check the path")
    named: dict[str, tuple[Path, Path | None]] = {}
    for path in files:
        name = _input_name(path)
        if name in named:
            if named[name][0].resolve() == path.resolve():
                continue
            raise InputError(
                "Duplicate input names",
                f"{str(named[name][0])!r} and {str(path)!r} would both write {name}{writes}; rename one, "
                "or run them in two batches with different --out-dir",
            )
        named[name] = (path, _beside(path, f"{name}_mask", IMAGE_SUFFIXES))
    return named


def batch_items(inputs: Iterable[Path], out_dir: Path) -> list[BatchItem]:
    """The peaks items of a batch (:func:`_named_inputs`: files and folders' images, each
    with its ``<name>_mask`` beside it if any). Outputs: those of ``fibertensor peaks IN
    out_dir/<name> [--mask M]`` (``<name>_peaks.nii.gz``, ..., ``<name>.json``).
    :class:`InputError` for a missing path, an empty folder, or two inputs of the same name
    (they would write the same outputs)."""
    return [BatchItem(fod, PeaksOutputs.with_prefix(Path(out_dir) / name), mask)
            for name, (fod, mask) in _named_inputs(inputs, "_peaks.nii.gz").items()]


def fixels_items(inputs: Iterable[Path], out_dir: Path) -> list[FixelsItem]:
    """The fixels items of a batch of FOD images, found as :func:`batch_items` finds them;
    outputs: those of ``fibertensor fixels IN out_dir/<name>_fixels [--mask M]`` (the fixel
    directory and ``<name>_fixels.json``)."""
    return [FixelsItem(fod, Path(out_dir) / f"{name}_fixels", mask)
            for name, (fod, mask) in _named_inputs(inputs, "_fixels").items()]


def fod_items(inputs: Iterable[Path], out_dir: Path, responses: Sequence[Path] = (), *, algorithm: str = "msmt_csd",
              response_params: ResponseParams = ResponseParams()) -> list[FodItem]:
    """The fod items of a batch of DWIs, found as :func:`batch_items` finds images, each with
    its gradients beside it: FSL ``<name>.bval`` and ``<name>.bvec`` (as dcm2niix writes
    them), else an MRtrix ``<name>.b``, else a ``.mif``'s ``dw_scheme``. Responses:
    ``responses`` (WM [GM CSF], or WM CSF: :func:`worker.jobs.fod.response.listed_responses`)
    for every DWI (a group response), else each DWI's own ``<name>_wm.txt`` [``_gm.txt``]
    [``_csf.txt``] beside it (the names ``fibertensor response DWI <name>`` writes; WM alone
    for csd), else estimated with ``response_params``. Outputs:
    those of ``fibertensor fod DWI out_dir/<name>``. :class:`InputError`, before anything
    runs, as :func:`batch_items` and for a NIfTI DWI without gradients (naming the files it
    looked for)."""
    listed = listed_responses(responses)
    items, missing = [], []
    for name, (dwi, mask) in _named_inputs(inputs, "_wmfod", _NOT_DWIS).items():
        bval, bvec = _beside(dwi, name, (".bval", ".bvals")), _beside(dwi, name, (".bvec", ".bvecs"))
        grad = _beside(dwi, name, (".b",)) if bval is None and bvec is None else None
        if bval is None and bvec is None and grad is None and not dwi.name.endswith((".mif", ".mif.gz")):
            missing.append(f"{str(dwi)!r} has no {name}.bval and {name}.bvec beside it")
            continue
        if (bval is None) != (bvec is None):
            missing.append(f"{str(dwi)!r} has {(bval or bvec).name} but no {name}{'.bvec' if bvec is None else '.bval'} "
                           "beside it")
            continue
        beside = tuple(_beside(dwi, f"{name}_{tissue}", (".txt",)) for tissue in TISSUES[: 1 if algorithm == "csd" else 3])
        own = listed if listed else beside if any(beside) else ()
        items.append(FodItem(dwi, Path(out_dir) / name, bval, bvec, grad, mask, own, response_params))
    if missing:
        raise InputError(
            "Missing gradients",
            f"{'; '.join(missing)}: put each DWI's FSL b-values and b-vectors beside it under its name (as dcm2niix "
            "writes them), or an MRtrix gradient table <name>.b, or convert it to .mif with its dw_scheme "
            "(mrconvert -fslgrad BVEC BVAL)")
    return items


def up_to_date(item: BatchItem, params: PeaksParams) -> bool:
    """Whether ``item``'s outputs are those a run with ``params`` would write, as ``make``
    judges it: its sidecar (written last, so present only once every output is) names this
    input, its mask (or none) and these parameters, every output it lists is there, and it is
    newer than the input and the mask."""
    sidecar = item.outputs.sidecar
    try:
        written_at = sidecar.stat().st_mtime_ns
        if any(written_at < path.stat().st_mtime_ns for path in (item.fod, item.mask) if path is not None):
            return False
        written = json.loads(sidecar.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(written, dict):
        return False
    parameters = json.loads(json.dumps(params.model_dump()))  # as the sidecar holds them
    listed, read = written.get("outputs"), written.get("input") or {}
    return (written.get("job") == "peaks" and written.get("parameters") == parameters
            and read.get("fod") == item.fod.name and read.get("mask") == (item.mask.name if item.mask else None)
            and isinstance(listed, dict)
            and all((sidecar.parent / name).exists() for names in listed.values() for name in names))


#: Worker processes per GPU a fod batch needs at most: its fit is GPU work, and more
#: processes only queue for the GPU, each holding a DWI (docs/decisions/processes-per-gpu.md).
FOD_PROCESSES_PER_GPU = 6


def default_processes(devices: int = 1, kind: str = "peaks") -> int:
    """Worker processes per GPU (or in all, without one) for a batch of ``kind``: three per
    four of this machine's cores, at least one, and for fod at most
    :data:`FOD_PROCESSES_PER_GPU`. In one process the GIL, not the cores, caps a host-bound
    batch (peaks, fixels); a process's reader and writer threads keep more than one core
    busy, and three per four cores kept a host's cores busy without slowing its stages
    (docs/benchmarks.md, "Cohort batch")."""
    processes = max(1, 3 * len(os.sched_getaffinity(0)) // (4 * max(1, devices)))
    return min(processes, FOD_PROCESSES_PER_GPU) if kind == "fod" else processes


def default_threads(processes: int = 1) -> tuple[int, int]:
    """Reader and writer threads per process: half of its share of this machine's cores read
    (inflating is the longest stage), a quarter write; at least one of each."""
    share = max(1, len(os.sched_getaffinity(0)) // max(1, processes))
    return max(1, min(8, share // 2)), max(1, min(4, share // 4))


def _describe(exc: BaseException) -> str:
    """``exc`` as the batch's summary lists it: an :class:`InputError` as ``<title>: <detail>``
    (the CLI's own refusals read so), without the form field the service's checks name."""
    if not isinstance(exc, InputError):
        return f"{type(exc).__name__}: {exc}"
    return f"{exc.title}: {exc.detail.removeprefix('fod: ').removeprefix('dwi: ')}"


def _pipeline(take: Callable[[threading.Event], object | None], stages, readers: int, writers: int,
              report: Callable[[ItemReport], None], worker: str, cores: int = 1) -> None:
    """Process items from ``take(stopping)`` (thread-safe; None when there are no more, or
    soon after ``stopping`` is set) through ``stages`` (:class:`worker.batch_jobs.BatchStages`)
    until each of the ``readers`` threads has had its None; ``report`` (thread-safe) gets
    every item's :class:`ItemReport`. Interrupted, it stops reading, lets started writes
    finish, and re-raises.

    ``cores``: this pipeline's share of the machine. Each reader inflates its first input on
    its part of them (``cores // readers`` threads), later ones on one thread: at the start
    nothing is computed or written yet, the engine waits for those reads, and the cores are
    otherwise idle; after it, the other stages keep them busy and one thread a read costs the
    fewest CPU seconds (docs/decisions/parallel-gzip.md)."""
    ready: queue.Queue = queue.Queue()
    # A place for each volume read or waiting: a reader claims one before it takes an input
    # and the computing thread gives it back as it takes the volume, so that no reader holds
    # a volume the engine is not ready for, and an input not yet claimed stays in the shared
    # queue for whichever process frees first.
    claims = threading.Semaphore(readers)
    writing = threading.Semaphore(writers)
    stopping = threading.Event()

    def claim() -> bool:
        while not stopping.is_set():
            if claims.acquire(timeout=0.2):
                return True
        return False

    def read_ahead() -> None:
        threads = max(1, cores // readers)
        try:
            while claim():
                item = take(stopping)
                if item is None:
                    claims.release()
                    return
                try:
                    ready.put((item, stages.read(item, threads), None))
                except Exception as exc:
                    ready.put((item, None, _describe(exc)))
                threads = 1
        finally:
            ready.put(None)

    def write(item, loaded, result, compute_seconds: float) -> None:
        try:
            seconds = stages.write(item, loaded, result, compute_seconds)
        except Exception as exc:  # the stage removed what it had written
            report(ItemReport(item.input, False, worker, _describe(exc)))
        else:
            report(ItemReport(item.input, True, worker, seconds=seconds))
        finally:
            writing.release()

    with ThreadPoolExecutor(readers, "batch-read") as read_pool, ThreadPoolExecutor(writers, "batch-write") as write_pool:
        reading = [read_pool.submit(read_ahead) for _ in range(readers)]
        running = readers
        try:
            while running:
                entry = ready.get()
                if entry is None:
                    running -= 1
                    continue
                claims.release()
                item, loaded, error = entry
                if error:
                    report(ItemReport(item.input, False, worker, error))
                    continue
                started = time.perf_counter()
                try:
                    result = stages.compute(loaded)
                except Exception as exc:
                    report(ItemReport(item.input, False, worker, _describe(exc)))
                    continue
                compute_seconds = time.perf_counter() - started
                writing.acquire()
                # The writer may still need what was read (peaks: the SH volume for the fODF
                # metrics, fixels and .pam5; fod: the mask); the semaphore bounds how many are held.
                write_pool.submit(write, item, loaded, result, compute_seconds)
                del loaded, result
        except BaseException:
            # Interrupted: readers stop after the volume in hand, started writes finish.
            stopping.set()
            while not all(future.done() for future in reading):
                try:
                    ready.get(timeout=0.1)
                except queue.Empty:
                    pass
            raise


@dataclass(frozen=True)
class _WorkerSlot:
    """One spawned worker process: its GPU (a ``CUDA_VISIBLE_DEVICES`` value, or None to keep
    the parent's), its name in the reports, and the numba threads its share of cores allows."""

    device: str | None
    name: str
    numba_threads: int


def _worker_slots(devices: Sequence[str] | None, processes: int) -> list[_WorkerSlot]:
    """``processes`` per device, interleaved across devices (so a short batch spreads over
    all of them); with no devices, ``processes`` that keep the parent's device."""
    per_process = max(1, len(os.sched_getaffinity(0)) // (processes * len(devices or [None])))
    slots = []
    for number in range(1, processes + 1):
        for device in devices or [None]:
            name = "process" if device is None else f"gpu {device}"
            if processes > 1:
                name += f" #{number}"
            slots.append(_WorkerSlot(device, name, per_process))
    return slots


def _worker_process(slot: _WorkerSlot, tasks, reports, kind: str, params: dict, readers: int, writers: int,
                    limits: "InputLimits | None") -> None:
    """A spawned process's life: run the pipeline on ``slot``'s GPU until its readers have
    each taken a None from ``tasks``."""
    # Before numba is imported in this process: its GPU, and as many threads as its share of
    # the cores (the CPU backend's and host kernels' threads would otherwise oversubscribe).
    if slot.device is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = slot.device
    os.environ["NUMBA_NUM_THREADS"] = str(slot.numba_threads)

    interrupted = threading.Event()

    def interrupt(signum, frame):
        # Ctrl-C reaches the whole process group and the parent then sends SIGTERM: the first
        # stops the pipeline, which finishes its started writes; the second must not cut that
        # short (and leave a temporary file behind).
        if not interrupted.is_set():
            interrupted.set()
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, interrupt)
    signal.signal(signal.SIGTERM, interrupt)
    if slot.device is not None:
        # Each worker creates its own context on its GPU, which takes a while (longer where
        # several processes create theirs at once): beside the first reads, not after them (a
        # GPU that fails here is left for the first kernel's call to report, with its input).
        from gpu.cuda.device import start_cuda_context

        start_cuda_context()

    def take(stopping: threading.Event):
        # a bounded wait, so that a stopping reader never blocks on the shared queue
        while not stopping.is_set():
            try:
                return tasks.get(timeout=0.2)
            except queue.Empty:
                continue
        return None

    from worker.job_kinds import get_job_kind

    try:
        stages = batch_stages(kind, get_job_kind(kind).params_model(**params), limits)
        _pipeline(take, stages, readers, writers, reports.put, slot.name, slot.numba_threads)
    except KeyboardInterrupt:
        pass  # the parent reports the inputs left undone
    # Every output is written and closed, every report queued: the reports' pipe flushed, the
    # process leaves without the interpreter's teardown (its GPU context, page-locked buffers
    # and modules), which the system does at exit, while the batch's caller waits for it
    # (docs/decisions/batch-worker-exit.md).
    reports.close()
    reports.join_thread()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _count_gpus() -> int:
    from gpu.cuda.device import cuda_available

    if not cuda_available():
        return 0
    from gpu.cuda.driver import driver

    return driver.device_count()


def visible_gpus() -> list[str]:
    """The ``CUDA_VISIBLE_DEVICES`` value of each GPU this process could use, counted in a
    spawned process so that this one never initialises CUDA; empty without a GPU."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        count = pool.apply(_count_gpus)
    listed = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    return listed[:count] if listed else [str(i) for i in range(count)]


def run_batch(
    items: Sequence[BatchItem | FodItem | FixelsItem],
    params: BaseModel = PeaksParams(),
    *,
    devices: Sequence[str] | None = None,
    processes: int = 1,
    readers: int | None = None,
    writers: int | None = None,
    limits: "InputLimits | None" = None,
    report: Callable[[ItemReport], None] | None = None,
    resume: bool = False,
) -> list[ItemReport]:
    """Run the items' job (all of one kind: peaks, fod or fixels, with ``params`` of that
    kind) on every item; returns the reports in ``items`` order.

    ``devices``: ``CUDA_VISIBLE_DEVICES`` values; ``processes``: worker processes per device
    (or in all, without devices), spawned, all taking items from one queue (this process
    stays free of CUDA). No devices and one process: the pipeline runs in this process.
    ``readers`` and ``writers``: threads per process (default :func:`default_threads`).
    ``limits``: refuse each input as the service would (:func:`worker.input_limits.check_job_inputs`),
    as its reader's first step. ``report`` is called (in this process, one call at a time) as
    each item finishes. ``resume`` (peaks): items whose outputs are :func:`up_to_date` are
    reported as skipped, not run (a batch stopped part-way goes on where it stopped).
    """
    from worker.job_kinds import get_job_kind

    if processes < 1:
        raise ValueError(f"processes must be at least 1, not {processes}")
    kinds = {item.kind for item in items}
    if len(kinds) > 1:
        raise ValueError(f"a batch runs one job kind, not {sorted(kinds)}")
    kind = kinds.pop() if kinds else "peaks"
    if not isinstance(params, get_job_kind(kind).params_model):
        raise ValueError(f"{kind} items take {get_job_kind(kind).params_model.__name__}, not {type(params).__name__}")
    if resume and kind != "peaks":
        raise ValueError("resume is for peaks batches")
    slots = _worker_slots(devices, processes) if devices or processes > 1 else []
    default_readers, default_writers = default_threads(max(1, len(slots)))
    readers, writers = readers or default_readers, writers or default_writers
    reports: dict[Path, ItemReport] = {}
    lock = threading.Lock()

    def collect(item_report: ItemReport) -> None:
        with lock:
            reports[item_report.input] = item_report
            if report is not None:
                report(item_report)

    todo = []
    for item in items:
        if resume and up_to_date(item, params):
            collect(ItemReport(item.input, True, "", skipped=True))
        else:
            todo.append(item)
    if todo and not slots:
        pending = iter(todo)

        def take(stopping: threading.Event):
            with lock:
                return next(pending, None)

        _pipeline(take, batch_stages(kind, params, limits), readers, writers, collect, "local",
                  len(os.sched_getaffinity(0)))
    elif todo:
        _run_processes(todo, kind, params, slots, readers, writers, limits, collect)
    for item in items:
        if item.input not in reports:
            reports[item.input] = ItemReport(item.input, False, "", "not processed: its worker process stopped "
                                             "(see the messages above); run the batch again for this input")
    return [reports[item.input] for item in items]


@contextmanager
def _ctrl_c_between_reports() -> Iterator[threading.Event]:
    """Ctrl-C as an event the report loop checks between reports, not as an exception raised
    wherever the main thread is: one raised while a report was half read from the pipe left
    the rest of it to be read as the next report (EOFError, exit status 1, not 130). Off the
    main thread, where no signal arrives, the event is never set."""
    interrupted = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield interrupted
        return
    previous = signal.signal(signal.SIGINT, lambda signum, frame: interrupted.set())
    try:
        yield interrupted
    finally:
        signal.signal(signal.SIGINT, previous)


@contextmanager
def _blas_threads_of_children(threads: int) -> Iterator[None]:
    """``OPENBLAS_NUM_THREADS`` for the processes started inside, unless the user set it: their
    share of the cores, as their numba threads. A spawned process imports numpy, whose OpenBLAS
    starts that many threads, before its own code runs; a thread per core in each of 12
    processes on 16 cores cost a peaks batch a sixth of its throughput
    (docs/decisions/blas-threads.md)."""
    if "OPENBLAS_NUM_THREADS" in os.environ:
        yield
        return
    os.environ["OPENBLAS_NUM_THREADS"] = str(threads)
    try:
        yield
    finally:
        os.environ.pop("OPENBLAS_NUM_THREADS", None)


def _run_processes(items: Sequence, kind: str, params: BaseModel, slots: list[_WorkerSlot], readers: int,
                   writers: int, limits: "InputLimits | None", collect: Callable[[ItemReport], None]) -> None:
    context = multiprocessing.get_context("spawn")
    tasks, results = context.Queue(), context.Queue()
    for item in items:
        tasks.put(item)
    for _ in range(len(slots) * readers):
        tasks.put(None)
    processes = [context.Process(target=_worker_process, name=f"fibertensor-batch-{slot.name.replace(' ', '')}",
                                 args=(slot, tasks, results, kind, params.model_dump(), readers, writers, limits))
                 for slot in slots]
    with _blas_threads_of_children(slots[0].numba_threads):
        for process in processes:
            process.start()
    with _ctrl_c_between_reports() as interrupted:
        try:
            received = 0
            while received < len(items):
                if interrupted.is_set():
                    raise KeyboardInterrupt
                try:
                    item_report = results.get(timeout=0.5)
                except queue.Empty:
                    if any(process.is_alive() for process in processes):
                        continue
                    try:  # the last reports of processes that have just exited
                        item_report = results.get(timeout=0.5)
                    except queue.Empty:
                        break
                collect(item_report)
                received += 1
            for process in processes:
                while process.is_alive() and not interrupted.is_set():
                    process.join(timeout=0.5)
            if interrupted.is_set():
                raise KeyboardInterrupt
        finally:
            # Interrupted: each process finishes its started writes and exits; the reports it
            # still sends are drained, so that none blocks at exit on a full pipe.
            for process in processes:
                if process.is_alive():
                    process.terminate()
            deadline = time.monotonic() + 120
            while any(process.is_alive() for process in processes) and time.monotonic() < deadline:
                try:
                    results.get(timeout=0.1)
                except queue.Empty:
                    pass
            for process in processes:
                if process.is_alive():
                    process.kill()
                process.join()
