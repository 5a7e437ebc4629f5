"""A small job from process start to written files: ``fibertensor peaks FOD OUT --backend cpu``
(the README's quick start: every default output) against ``sh2peaks FOD OUT``, as fresh
processes on the same 1,000-voxel FOD, after ``fibertensor warmup --backend cpu`` for the
FOD's lmax: numba's cache warm and the ahead-of-time build made (gpu.ahead_of_time).

The FOD is real data unless ``--input`` names one: DIPY's ``small_64D`` DWI (10×10×10
voxels, 64 directions), through MRtrix3's ``dwi2response tournier`` and ``dwi2fod csd``
(lmax 8). The runs alternate, ours with the build, ours without it (numba's JIT code, from
its warm cache), sh2peaks, ``--repeats`` times; the table shows the median wall and CPU time
(all threads) and peak RSS of each, and ``python3 -c pass`` for the interpreter's own start.
A second table splits the imports of our process (``-X importtime``, the median of three
runs) by top-level package: the time spent in each package's own modules, whoever imported
them.
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


def run(args: argparse.Namespace, report: Report) -> None:
    import nibabel as nib

    from gpu.sh_basis import lmax_from_ncoeffs

    sh2peaks = shutil.which("sh2peaks")
    if sh2peaks is None:
        raise SystemExit("sh2peaks not found: install MRtrix3 (apt-get install mrtrix3)")
    with tempfile.TemporaryDirectory() as tmp:
        # Bytecode cached, as an installed package has it (pip compiles it): an image that sets
        # PYTHONDONTWRITEBYTECODE would have every run compile this checkout's modules again.
        env = {name: value for name, value in child_environment(FIBERTENSOR_KERNEL_CACHE=str(Path(tmp, "kernels"))).items()
               if name != "PYTHONDONTWRITEBYTECODE"}
        no_build = {**env, "FIBERTENSOR_KERNEL_CACHE": str(Path(tmp, "no-build"))}
        fod = args.input or _real_fod(Path(tmp))
        lmax = lmax_from_ncoeffs(nib.load(fod).shape[-1])
        subprocess.run([sys.executable, "-m", "service", "warmup", "--backend", "cpu", "--family", "peaks", "--lmax",
                        str(lmax), "--quiet"], env=env, check=True)
        ours = [sys.executable, "-m", "service", "peaks", str(fod), str(Path(tmp, "out", "sub")), "--backend", "cpu"]
        peer = [sh2peaks, str(fod), str(Path(tmp, "sh2peaks.nii.gz")), "-force", "-quiet"]
        python = [sys.executable, "-c", "pass"]
        runs: dict[str, list[dict]] = defaultdict(list)
        commands = (("fibertensor peaks", ours, env), ("  without the build (numba)", ours, no_build),
                    ("sh2peaks", peer, env), ("python3 -c pass", python, env))
        for name, command, environment in commands:  # bytecode written, files cached
            _fresh_process(command, environment)
        for _ in range(args.repeats):
            for name, command, environment in commands:
                runs[name].append(_fresh_process(command, environment))
        imports = [_import_self_times(ours, env) for _ in range(3)]
    medians = {name: {key: statistics.median(r[key] for r in results) for key in ("wall", "cpu", "rss")}
               for name, results in runs.items()}
    rows = [{"command": name, "wall_ms": 1e3 * m["wall"], "cpu_ms": 1e3 * m["cpu"], "rss_mib": m["rss"],
             "ours_over_peer": m["wall"] / medians["sh2peaks"]["wall"]}
            for name, m in medians.items()]
    ours_row = medians["fibertensor peaks"]
    report.table(f"fresh process, start to written files, 1,000-voxel lmax-{lmax} FOD ({fod.name if args.input else 'small_64D, dwi2fod csd'}); "
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
