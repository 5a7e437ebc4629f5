"""A small job from process start to written files: ``fibertensor peaks FOD OUT --backend cpu``
(the README's quick start: every default output) against ``sh2peaks FOD OUT``, as fresh
processes on the same 1,000-voxel FOD, with numba's cache warm (one run first fills it).

The FOD is real data unless ``--input`` names one: DIPY's ``small_64D`` DWI (10×10×10
voxels, 64 directions), through MRtrix3's ``dwi2response tournier`` and ``dwi2fod csd``
(lmax 8). The runs alternate, ours then sh2peaks, ``--repeats`` times; the table shows the
median wall and CPU time (all threads) and peak RSS of each, and ``python3 -c pass`` for the
interpreter's own start. A second table splits the imports of our process (``-X importtime``,
the median of three runs) by top-level package: the time spent in each package's own
modules, whoever imported them.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from bench.harness import Column, Report, child_environment

__all__ = ["add_arguments", "run"]

NOTICE = "into numba's cache (first use"
_IMPORT_TIME = re.compile(r"^import time:\s+(?P<own>\d+) \|\s+\d+ \| *(?P<module>\S+)$")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--input", type=Path, help="the FOD (default: DIPY's small_64D through dwi2fod csd)")
    parser.add_argument("--repeats", type=int, default=10, help="fresh processes of each command (default 10)")


def _real_fod(folder: Path) -> Path:
    """DIPY's small_64D through ``dwi2response tournier`` and ``dwi2fod csd``, as NIfTI."""
    from dipy.data import get_fnames

    dwi, bval, bvec = get_fnames(name="small_64D")
    mif, response, fod = folder / "dwi.mif", folder / "response.txt", folder / "wmfod.mif"
    for command in (["mrconvert", dwi, "-fslgrad", bvec, bval, mif], ["dwi2response", "tournier", mif, response],
                    ["dwi2fod", "csd", mif, response, fod], ["mrconvert", fod, folder / "fod.nii.gz"]):
        subprocess.run([*map(str, command), "-quiet", "-force"], check=True)
    return folder / "fod.nii.gz"


# Runs a command and prints its wait4 figures. A child's peak RSS counts the memory of the
# process it was spawned from, so the command is spawned from this small interpreter (no
# site, json and os only), not from the benchmark.
_RUNNER = """
import json, os, subprocess, sys, time
started = time.perf_counter()
child = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
_, status, usage = os.wait4(child.pid, 0)
wall = time.perf_counter() - started
print(json.dumps({"status": status, "wall": wall, "cpu": usage.ru_utime + usage.ru_stime,
                  "rss": usage.ru_maxrss / 1024, "stderr": child.stderr.read().decode()}))
"""


def _fresh_process(command: list[str], env: dict[str, str]) -> dict:
    """Wall and CPU seconds (all threads) and peak RSS (MiB) of ``command`` as a child."""
    done = json.loads(subprocess.run([sys.executable, "-S", "-c", _RUNNER, *command], env=env, check=True,
                                     capture_output=True, text=True).stdout)
    if done["status"] != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {done['stderr']}")
    if NOTICE in done["stderr"]:
        raise RuntimeError(f"numba compiled during a timed run (run `fibertensor warmup`): {done['stderr']}")
    return done


def _import_self_times(command: list[str], env: dict[str, str]) -> dict[str, float]:
    """Seconds of each top-level package's own modules in one ``-X importtime`` run."""
    lines = subprocess.run([sys.executable, "-X", "importtime", *command[1:]], env=env, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True).stderr.splitlines()
    seconds: dict[str, float] = defaultdict(float)
    for line in lines:
        entry = _IMPORT_TIME.match(line)
        if entry:
            seconds[entry["module"].split(".")[0]] += int(entry["own"]) / 1e6
    return seconds


# Our job in a fresh process with numba's share timed: its import, its CPU target's set-up (the
# first compile or cache load does it: every implementation module, and the BLAS check that
# imports scipy.linalg), and each cache load of a compiled function.
_NUMBA_CHILD = """
import json, sys, time
started = time.perf_counter()
import numba
imported = time.perf_counter()
from numba.core.registry import cpu_target
cpu_target.target_context.refresh()
refreshed = time.perf_counter()
import gpu.numba_cache
from numba.core import caching
loads = {}
load = caching.FunctionCache.load_overload

def timed_load(self, sig, target_context):
    began = time.perf_counter()
    try:
        return load(self, sig, target_context)
    finally:
        loads[self._py_func.__qualname__] = loads.get(self._py_func.__qualname__, 0.0) + time.perf_counter() - began

caching.FunctionCache.load_overload = timed_load
from service.cli import main
main(sys.argv[1:] + ["--quiet"])
print(json.dumps({"import numba": imported - started, "numba CPU target set-up": refreshed - imported,
                  **{f"cache load {name}": seconds for name, seconds in loads.items()}}))
"""


def _numba_share(command: list[str], env: dict[str, str]) -> dict[str, float]:
    """Seconds of numba's import, CPU target set-up and each cache load in our job."""
    out = subprocess.run([sys.executable, "-c", _NUMBA_CHILD, *command[3:]], env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def run(args: argparse.Namespace, report: Report) -> None:
    sh2peaks = shutil.which("sh2peaks")
    if sh2peaks is None:
        raise SystemExit("sh2peaks not found: install MRtrix3 (apt-get install mrtrix3)")
    env = child_environment()
    with tempfile.TemporaryDirectory() as tmp:
        fod = args.input or _real_fod(Path(tmp))
        ours = [sys.executable, "-m", "service", "peaks", str(fod), str(Path(tmp, "out", "sub")), "--backend", "cpu"]
        peer = [sh2peaks, str(fod), str(Path(tmp, "sh2peaks.nii.gz")), "-force", "-quiet"]
        python = [sys.executable, "-c", "pass"]
        subprocess.run(ours, env=env, check=True, stdout=subprocess.DEVNULL)  # fills numba's cache if cold
        runs: dict[str, list[dict]] = defaultdict(list)
        for _ in range(args.repeats):
            for name, command in (("fibertensor peaks", ours), ("sh2peaks", peer), ("python3 -c pass", python)):
                runs[name].append(_fresh_process(command, env))
        imports = [_import_self_times(ours, env) for _ in range(3)]
        numba_runs = [_numba_share(ours, env) for _ in range(3)]
    medians = {name: {key: statistics.median(r[key] for r in results) for key in ("wall", "cpu", "rss")}
               for name, results in runs.items()}
    rows = [{"command": name, "wall_ms": 1e3 * m["wall"], "cpu_ms": 1e3 * m["cpu"], "rss_mib": m["rss"],
             "ours_over_peer": m["wall"] / medians["sh2peaks"]["wall"]}
            for name, m in medians.items()]
    ours_row = medians["fibertensor peaks"]
    report.table(f"fresh process, start to written files, 1,000-voxel lmax-8 FOD ({fod.name if args.input else 'small_64D, dwi2fod csd'}); "
                 f"median of {args.repeats} alternating runs; ours/sh2peaks: wall {ours_row['wall'] / medians['sh2peaks']['wall']:.2f}×, "
                 f"CPU {ours_row['cpu'] / medians['sh2peaks']['cpu']:.2f}×, "
                 f"peak RSS {ours_row['rss'] / medians['sh2peaks']['rss']:.1f}×", rows,
                 [Column("command", "command"), Column("wall_ms", "wall ms", ".0f"), Column("cpu_ms", "CPU ms", ".0f"),
                  Column("rss_mib", "peak RSS MiB", ".0f"), Column("ours_over_peer", "wall / sh2peaks' wall", ".2f")])
    packages = {name for seconds in imports for name in seconds}
    by_package = sorted(((statistics.median(seconds.get(name, 0.0) for seconds in imports), name) for name in packages),
                        reverse=True)
    total = statistics.median(sum(seconds.values()) for seconds in imports)
    shown = [{"package": name, "ms": 1e3 * seconds} for seconds, name in by_package[:12]]
    shown.append({"package": "(all imports)", "ms": 1e3 * total})
    report.table("imports of `fibertensor peaks` by top-level package (own modules' time, -X importtime, median of 3)",
                 shown, [Column("package", "package"), Column("ms", "ms", ".0f")])
    steps = dict.fromkeys(step for run in numba_runs for step in run)
    report.table("numba's share of `fibertensor peaks` (ms, median of 3 fresh processes)",
                 [{"step": step, "ms": 1e3 * statistics.median(run.get(step, 0.0) for run in numba_runs)}
                  for step in steps], [Column("step", "step"), Column("ms", "ms", ".0f")])
