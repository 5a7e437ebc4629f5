"""Writing a peaks job's outputs: each wanted output (:mod:`worker.jobs.peaks.outputs`) a
task on a pool of threads (compression and most array work release the GIL), after the
arrays it needs; then the sidecar, last, so that its presence means every output is there."""

from __future__ import annotations

import os
import shutil
import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from worker.jobs.peaks.names import PeaksOutputs
from worker.jobs.peaks.outputs import OutputSource, import_writer_modules, output_files, wanted_arrays
from worker.jobs.peaks.sidecar import write_peaks_sidecar
from worker.pipeline import Task, run_tasks

if TYPE_CHECKING:
    from gpu.peaks.search import PeaksResult
    from worker.jobs.peaks.plan import PeaksPlan
    from worker.jobs.peaks.read import PeaksInputs

__all__ = ["write_peaks_outputs"]


def write_peaks_outputs(plan: "PeaksPlan", inputs: "PeaksInputs", result: "PeaksResult", destination: PeaksOutputs,
                        *, fixel_archive: bool = False, compress_threads: int | None = None,
                        threads: int | None = None) -> dict:
    """Write every output of ``plan``, then the sidecar; returns the sidecar content
    (:func:`worker.jobs.peaks.sidecar.write_peaks_sidecar`). ``fixel_archive`` writes the
    fixel directory as one ``fixels.tar`` (for the service, whose results are files);
    ``compress_threads``: gzip threads per image (:func:`worker.io.nifti.save_nifti_atomic`);
    ``threads``: outputs written at once (default: one per core). A failure leaves none of
    the outputs behind."""
    started = time.perf_counter()
    destination.folder.mkdir(parents=True, exist_ok=True)
    destination.sidecar.parent.mkdir(parents=True, exist_ok=True)
    source = OutputSource(plan, inputs.sh, result, destination, fixel_archive, compress_threads, inputs.mask)
    files = output_files(source)
    import_writer_modules(plan.outputs)
    made: dict[str, object] = {}
    try:
        run_tasks(_tasks(source, files), threads or os.cpu_count() or 2, made)
    except BaseException:
        _remove(files, made)
        raise
    return write_peaks_sidecar(plan, inputs, result, destination, files, time.perf_counter() - started)


def _tasks(source: OutputSource, files: dict[str, list[Path]]) -> list[Task]:
    """A task per shared array and per output file (named by its path), the long ones first."""
    outputs = source.plan.outputs
    tasks = [(array.long, Task(array.name, partial(array.make, source))) for array in wanted_arrays(outputs)]
    tasks += [(output.long, Task(str(path), partial(output.write, source, path), output.needs))
              for output in outputs for path in files[output.name]]
    return [task for long, task in sorted(tasks, key=lambda entry: not entry[0])]


def _remove(files: dict[str, list[Path]], made: dict[str, object]) -> None:
    """Remove what a failed write made. Each file appeared whole (atomic rename) or not at
    all; so did the fixel directory, removed only where its task finished (its writer
    refuses a folder that is there and not empty)."""
    for path in (path for paths in files.values() for path in paths):
        if not path.is_dir():
            path.unlink(missing_ok=True)
        elif str(path) in made:
            shutil.rmtree(path)
