"""``fibertensor peaks --backend cpu`` against MRtrix3 ``sh2peaks -num 3`` on the same
noisy-phantom .nii.gz, as whole processes, in CPU seconds (user + sys, children included):
on a machine shared with other jobs those count the work done, where wall time counts the
waiting too. Ours: best of ``--repeats`` after one run that loads numba's cache (or
compiles, the first time); sh2peaks: one run.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.harness import Column, Report, child_environment, ratio
from bench.peaks.volume import add_volume_options, make_phantom

__all__ = ["add_arguments", "run"]

OURS = "fibertensor peaks --backend cpu"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_volume_options(parser)
    parser.add_argument("--relative-noise", type=float, default=0.3,
                        help="noise SD on every coefficient as a fraction of the voxel's l = 0 coefficient")
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="threads of both")


def child_seconds(command: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """(CPU seconds: user + sys of the process and its children; wall seconds) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=env)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, wall


def run(args: argparse.Namespace, report: Report) -> None:
    import nibabel as nib

    sh = make_phantom(args, relative_noise=args.relative_noise)["sh"]
    with tempfile.TemporaryDirectory() as tmp:
        fod = Path(tmp, "fod.nii.gz")
        nib.save(nib.Nifti1Image(sh, np.eye(4)), fod)
        env = child_environment(NUMBA_NUM_THREADS=str(args.threads))
        ours = [sys.executable, "-m", "service", "peaks", str(fod), str(Path(tmp, "ours")), "--backend", "cpu",
                "--quiet"]
        child_seconds(ours, env)
        runs = {OURS: min(child_seconds(ours, env) for _ in range(args.repeats))}
        if exe := shutil.which("sh2peaks"):
            runs["MRtrix3 sh2peaks"] = child_seconds([exe, "-quiet", "-num", "3", "-nthreads", str(args.threads),
                                                     str(fod), str(Path(tmp, "sh2peaks.nii.gz"))])
    rows = [{"command": name, "cpu_s": cpu, "wall_s": wall, "cpu_x_ours": ratio(cpu, runs[OURS][0])}
            for name, (cpu, wall) in runs.items()]
    report.table(f"{sh[..., 0].size} voxels, lmax {args.lmax}, relative noise {args.relative_noise:g}, "
                 f"{args.threads} threads, whole processes", rows,
                 [Column("command", "command"), Column("cpu_s", "CPU s", ".2f"), Column("wall_s", "wall s", ".2f"),
                  Column("cpu_x_ours", "CPU x ours", ".1f")],
                 note="CPU x ours: the command's CPU seconds over ours")
