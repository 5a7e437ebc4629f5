"""Where a fresh ``fibertensor peaks`` process spends its time, with the kernels in numba's
cache (a first process fills it), step by step, per backend.

Steps: python start, imports, then the read of the volume in the main thread while a
background thread prepares the engine (imports numba, creates the CUDA context, loads the
kernels from the cache, builds the SH-to-tensor matrix and the starts:
``gpu.peaks.search.prepare_peaks``), how long the main thread then waited for it, compute
(kernel: CUDA events), write, exit; the same steps one after the other (no overlap) for
comparison; and the wall time of the real CLI. The best of ``--repeats`` fresh processes,
step by step. "late kernel loads" counts kernel signatures the run still had to load after
the preparation (0 when it prepared the right ones).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.harness import Column, Report, child_environment
from bench.peaks.volume import add_volume_options, make_phantom

__all__ = ["add_arguments", "run"]

LATE_LOADS = "late kernel loads (count)"
NUMBA_IMPORTED = "numba imported before the write (0/1)"

# A fresh process that runs ``fibertensor peaks``'s job (run_peaks) step by step, with the
# engine prepared in a background thread while the volume is read ({overlap}) or after it;
# absolute clock readings (time.time()) so that the parent can count from its spawn.
_STARTUP_CHILD = """
import json, os, sys, time
marks = {{"started": time.time()}}
from pathlib import Path
import threading
from worker.jobs.peaks import PeaksOutputs, PeaksParams, compute_peaks, engine_options, plan_peaks, read_peaks_inputs, write_peaks_outputs
marks["imported"] = time.time()
fod, prefix = Path(sys.argv[1]), Path(sys.argv[2])
params = PeaksParams(backend="{backend}", starts={starts})
plan = plan_peaks(fod, None, params)
prepare_seconds = []

def prepare():  # prepare_engine's work, timed
    from gpu.peaks.search import prepare_peaks
    prepare_seconds.append(prepare_peaks(plan.lmax, params.basis, engine_options(params), params.backend))

preparing = threading.Thread(target=prepare)
if {overlap}:
    preparing.start()
inputs = read_peaks_inputs(plan, inflate_threads=len(os.sched_getaffinity(0)))
marks["read"] = time.time()
if {overlap}:
    preparing.join()
else:
    prepare()
marks["prepared"] = time.time()

def loaded():
    from gpu.cuda.backend import resolve_backend
    if resolve_backend(params.backend) == "cuda":  # the CUDA path loads cubins; numba only for a kernel not cached yet
        return 0
    from gpu.peaks import sshopm_generated_cpu as g
    return len(g.sshopm_cpu_m{lmax}.overloads)

before = loaded()
result = compute_peaks(plan, inputs)
marks["computed"] = time.time()
late = loaded() - before
numba_imported = "numba" in sys.modules
sidecar = write_peaks_outputs(plan, inputs, result, PeaksOutputs.with_prefix(prefix))
marks["done"] = time.time()
print(json.dumps({{"marks": marks, "seconds": sidecar["seconds"], "prepare": prepare_seconds[0], "late_loads": late,
                  "numba": numba_imported}}))
import gc
gc.freeze()  # as service.cli.run exits
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_volume_options(parser)
    parser.add_argument("--starts", type=int, default=128)
    parser.add_argument("--backends", nargs="+", default=["cpu"], choices=["cpu", "cuda"])


def startup_breakdown(sh: np.ndarray, lmax: int, backend: str, starts: int, repeats: int) -> dict[str, float]:
    """Seconds of each step, the best of ``repeats`` fresh processes (the worst for the counts)."""
    import nibabel as nib

    env = child_environment()
    steps: dict[str, list[float]] = {}

    def child(tmp: str, overlap: bool) -> tuple[dict, float]:
        started = time.time()
        code = _STARTUP_CHILD.format(backend=backend, starts=starts, lmax=lmax, overlap=overlap)
        out = subprocess.run([sys.executable, "-c", code, str(Path(tmp, "fod.nii.gz")), str(Path(tmp, "run"))],
                             check=True, env=env, capture_output=True, text=True).stdout
        ended = time.time()
        report = json.loads(out.strip().splitlines()[-1])
        report["marks"] = {name: mark - started for name, mark in report["marks"].items()}
        return report, ended - started

    with tempfile.TemporaryDirectory() as tmp:
        fod = Path(tmp, "fod.nii.gz")
        nib.save(nib.Nifti1Image(sh, np.eye(4)), fod)
        child(tmp, overlap=False)  # fills numba's cache
        for _ in range(repeats):
            started = time.time()
            subprocess.run([sys.executable, "-c", "pass"], check=True, env=env)
            python = time.time() - started
            report, wall = child(tmp, overlap=True)
            marks, seconds = report["marks"], report["seconds"]
            serial, serial_wall = child(tmp, overlap=False)
            row = {
                "python start": python,
                "imports": marks["imported"] - python,
                "read ∥ prepare": marks["prepared"] - marks["imported"],
                "  read (main thread)": seconds["read"],
                "  prepare (background)": report["prepare"],
                "  main thread waited": marks["prepared"] - marks["read"],
                "compute": seconds["peaks_compute"],
                **({"  of which kernels": seconds["peaks_kernel"]} if "peaks_kernel" in seconds else {}),
                "write": seconds["write"],
                "process exit": wall - marks["done"],
                "total": wall,
                "no overlap: read, prepare": serial["marks"]["prepared"] - serial["marks"]["imported"],
                "no overlap: total": serial_wall,
                LATE_LOADS: report["late_loads"],
                NUMBA_IMPORTED: int(report["numba"]),
            }
            command = [sys.executable, "-m", "service", "peaks", str(fod), str(Path(tmp, "cli")), "--backend",
                       backend, "--starts", str(starts), "--quiet"]
            started = time.time()
            subprocess.run(command, check=True, env=env)
            row["fibertensor peaks (wall)"] = time.time() - started
            for name, value in row.items():
                steps.setdefault(name, []).append(value)
    return {name: max(values) if name in (LATE_LOADS, NUMBA_IMPORTED) else min(values) for name, values in steps.items()}


def run(args: argparse.Namespace, report: Report) -> None:
    sh = make_phantom(args)["sh"]
    by_backend = {backend: startup_breakdown(sh, args.lmax, backend, args.starts, args.repeats)
                  for backend in args.backends}
    rows = []
    for step in dict.fromkeys(name for steps in by_backend.values() for name in steps):
        scale = 1 if step in (LATE_LOADS, NUMBA_IMPORTED) else 1e3
        rows.append({"step": step, **{backend: scale * steps[step] for backend, steps in by_backend.items()
                                      if step in steps}})
    report.table(f"fresh process, kernels cached ({sh[..., 0].size} voxels, {args.starts} starts; ms, best of "
                 f"{args.repeats} processes per step; ∥: at once, in two threads)", rows,
                 [Column("step", "step")] + [Column(backend, backend, ".0f") for backend in by_backend])
