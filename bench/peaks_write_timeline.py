"""Where the writing stage of a peaks job spends its time: every task the stage's thread
pools run, with its start, end and own-thread CPU, for the baseline outputs and for all of
them, on the 553k-voxel lmax-8 phantom.

    python bench/peaks_write_timeline.py --backend cuda

A task whose wall time is many times its CPU time is waiting, on a many-core machine
usually for the interpreter lock. The rows come from wrapping
``ThreadPoolExecutor.submit`` for this run; the best of ``--repeats`` runs is shown.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu.peaks.phantom import fod_phantom  # noqa: E402
from worker.io.images import write_image  # noqa: E402
from worker.jobs.peaks import PeaksOutputs, compute_peaks, plan_peaks, read_peaks_inputs, write_peaks_outputs  # noqa: E402
from worker.params.peaks import PeaksParams  # noqa: E402

_tasks: list[tuple[str, float, float, float]] = []
_submit = ThreadPoolExecutor.submit


def _timed_submit(self, fn, /, *args, **kwargs):
    """``submit`` that records the task's name, start, end and the CPU of its thread."""
    # an output's task binds the file it writes; an array's, its maker
    paths = [a for a in getattr(fn, "args", ()) if isinstance(a, Path)]
    name = paths[0].name if paths else getattr(getattr(fn, "func", fn), "__name__", repr(fn)).lstrip("_")

    def task():
        started, cpu = time.perf_counter(), time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            _tasks.append((name, started, time.perf_counter(), time.thread_time() - cpu))

    return _submit(self, task)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--repeats", type=int, default=6)
    args = parser.parse_args()

    ThreadPoolExecutor.submit = _timed_submit
    sh = fod_phantom((96, 96, 60), 8, seed=0)["sh"].astype(np.float32)
    configurations = {"baseline": PeaksParams(backend=args.backend, metrics=["none"], qc=False),
                      "all together": PeaksParams(backend=args.backend, format=["nifti", "mif", "fixel", "pam5"])}
    with tempfile.TemporaryDirectory() as tmp:
        fod = write_image(Path(tmp, "fod.nii.gz"), sh, np.diag([2.0, 2.0, 2.0, 1.0]))
        plans = {name: plan_peaks(fod, None, params) for name, params in configurations.items()}
        inputs = read_peaks_inputs(plans["all together"])
        result = compute_peaks(plans["all together"], inputs)
        best: dict[str, tuple[float, list]] = {}
        for _ in range(args.repeats):
            for name, plan in plans.items():
                _tasks.clear()
                folder = Path(tmp, "out")
                started = time.perf_counter()
                write_peaks_outputs(plan, inputs, result, PeaksOutputs.in_folder(folder))
                total = time.perf_counter() - started
                shutil.rmtree(folder)
                if name not in best or total < best[name][0]:
                    best[name] = (total, [(n, a - started, b - started, c) for n, a, b, c in _tasks])
    for name, (total, rows) in best.items():
        print(f"--- {name}: {total:.3f} s (best of {args.repeats}), backend {args.backend}")
        print(f"  {'task':<48}{'start':>7}{'end':>7}{'wall':>7}{'CPU':>7}")
        # The leaf pool's many short tasks (gzip runs, compiled passes) one row per kind.
        leaves: dict[str, list] = {}
        for task, start, end, cpu in rows:
            if task.startswith("_"):
                leaf = leaves.setdefault(task, [0, start, end, 0.0])
                leaf[0] += 1
                leaf[1], leaf[2], leaf[3] = min(leaf[1], start), max(leaf[2], end), leaf[3] + cpu
        rows = [row for row in rows if row[0] not in leaves]
        rows += [(f"{task} ×{n}", start, end, cpu) for task, (n, start, end, cpu) in leaves.items()]
        for task, start, end, cpu in sorted(rows, key=lambda row: row[1]):
            print(f"  {task[-48:]:<48}{start:7.3f}{end:7.3f}{end - start:7.3f}{cpu:7.3f}")

if __name__ == "__main__":
    main()
