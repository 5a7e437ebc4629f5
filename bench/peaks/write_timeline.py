"""Where the writing stage of a peaks job spends its time: every task the stage's thread
pools run, with its start, end and own-thread CPU, for the baseline outputs and for all of
them (with the baseline the peer).

A task whose wall time is many times its CPU time is waiting, on a many-core machine
usually for the interpreter lock. The rows come from wrapping
``ThreadPoolExecutor.submit`` for this run; the best of ``--repeats`` runs is shown, the
leaf pool's many short tasks (gzip runs, compiled passes) one row per kind.
"""

from __future__ import annotations

import argparse
import functools
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from bench.harness import Column, Report
from bench.peaks.volume import add_volume_options, make_phantom

__all__ = ["add_arguments", "run"]

_tasks: list[tuple[str, float, float, float]] = []
_submit = ThreadPoolExecutor.submit


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_volume_options(parser, repeats=6)
    parser.add_argument("--backend", choices=["cpu", "cuda"], default="cpu")


def _timed_submit(self, fn, /, *args, **kwargs):
    """``submit`` that records the task's name, start, end and the CPU of its thread."""
    if isinstance(fn, functools.partial):  # the job's tasks: an output's file, or an array outputs share
        paths = [a for a in fn.args if isinstance(a, Path)]
        name = paths[0].name if paths else fn.func.__name__.lstrip("_")
    else:
        name = getattr(fn, "__qualname__", repr(fn)).replace("<locals>.", "")

    def task():
        started, cpu = time.perf_counter(), time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            _tasks.append((name, started, time.perf_counter(), time.thread_time() - cpu))

    return _submit(self, task)


def _rows(tasks: list[tuple[str, float, float, float]]) -> list[dict]:
    """One row per task, the leaf pool's tasks (names starting with ``_``) summed per kind."""
    leaves: dict[str, list] = {}
    for task, start, end, cpu in tasks:
        if task.startswith("_"):
            leaf = leaves.setdefault(task, [0, start, end, 0.0])
            leaf[0] += 1
            leaf[1], leaf[2], leaf[3] = min(leaf[1], start), max(leaf[2], end), leaf[3] + cpu
    rows = [task for task in tasks if task[0] not in leaves]
    rows += [(f"{task} x{n}", start, end, cpu) for task, (n, start, end, cpu) in leaves.items()]
    return [{"task": task[-48:], "start": start, "end": end, "wall": end - start, "cpu": cpu}
            for task, start, end, cpu in sorted(rows, key=lambda row: row[1])]


def run(args: argparse.Namespace, report: Report) -> None:
    from worker.io.images import write_image
    from worker.jobs.peaks import PeaksOutputs, compute_peaks, plan_peaks, read_peaks_inputs, write_peaks_outputs
    from worker.params.peaks import PeaksParams

    sh = make_phantom(args)["sh"].astype(np.float32)
    configurations = {"baseline": PeaksParams(backend=args.backend, metrics=["none"], qc=False),
                      "all together": PeaksParams(backend=args.backend, format=["nifti", "mif", "fixel", "pam5"])}
    ThreadPoolExecutor.submit = _timed_submit
    try:
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
    finally:
        ThreadPoolExecutor.submit = _submit
    columns = [Column("task", "task"), Column("start", "start", ".3f"), Column("end", "end", ".3f"),
               Column("wall", "wall", ".3f"), Column("cpu", "CPU", ".3f")]
    for name, (total, tasks) in best.items():
        report.table(f"{name}: {total:.3f} s (best of {args.repeats}), backend {args.backend}; seconds from the "
                     "stage's start", _rows(tasks), columns)
