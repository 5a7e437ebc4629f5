"""Fiber-peaks benchmark: ours (CUDA and/or CPU backend) vs MRtrix3 sh2peaks and DIPY.

Same phantom (known fibers), one run, side by side: voxels/s, ratios to the peers, fiber
count agreement and angular error vs the ground truth, offset of each reported peak from
the exact (float64) local maximum, iterations per climb and starts climbed per voxel.

    python bench/peaks.py --shape 96 96 60 --backends cpu --peers sh2peaks dipy   # here
    python bench/peaks.py --shape 96 96 60 --backends cuda cpu                    # on the GPU
    python bench/peaks.py --shape 96 96 60 --backends cuda cpu --startup          # fresh-process start-up only

Peers run only where installed (sh2peaks from MRtrix3, dipy). Kernel times come from CUDA
events around the launches; "host" is the whole call (conversion, transfers, launches).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu.peaks.phantom import fod_phantom  # noqa: E402
from gpu.peaks.peak_matching import exact_peak_offsets, match_peaks  # noqa: E402
from gpu.peaks.search import PeaksOptions, sshopm_peaks  # noqa: E402
from gpu.peaks.sh_basis import n_coeffs  # noqa: E402
from gpu.peaks.symmetric_tensor import sh_to_tensor  # noqa: E402

H100_FP32_TFLOPS = 66.9  # H100 SXM5, non-tensor FP32 peak


def _flops_per_iteration(order: int) -> tuple[int, int]:
    """(flops of one climb iteration, flops of one A x^m evaluation) of the generated code."""
    from gpu.peaks.symmetric_tensor import index_classes

    lower = len(index_classes(order - 2))
    full = len(index_classes(order))
    powers = 3 * (order - 1)
    # axm2: 6 sums of `lower` terms (σ·a·monomial: 2 mul + 1 add) + monomials; the step: ~110.
    per_iteration = 6 * lower * 3 + lower + powers + 110
    per_value = full * 4 + powers
    return per_iteration, per_value


def run_ours(sh, truth, options, backend, repeats, check_voxels, order):
    sshopm_peaks(sh[:2, :2, :2], options=options, backend=backend)  # compile / load the cache
    runs = []
    for _ in range(repeats):
        started = time.perf_counter()
        result = sshopm_peaks(sh, options=options, backend=backend)
        runs.append((time.perf_counter() - started, result))
    host, result = min(runs, key=lambda r: r[0])
    n = int(np.prod(sh.shape[:-1]))
    matched = match_peaks(result.directions, result.count, truth["directions"], truth["count"])
    flat = sh.reshape(-1, sh.shape[-1])
    pick = np.random.default_rng(0).choice(n, size=min(check_voxels, n), replace=False)
    offsets = exact_peak_offsets(sh_to_tensor(flat[pick]), result.directions.reshape(n, -1, 3)[pick],
                                 result.count.reshape(-1)[pick], order)
    stats = result.stats
    row = {
        "method": f"ours-{backend} ({options.starts} starts)",
        "seconds": host,
        "voxels_per_s": n / host,
        "count_agreement": matched["count_agreement"],
        "mean_error_deg": matched["mean_error"],
        "p95_error_deg": matched["p95_error"],
        "max_offset_from_exact_deg": float(offsets.max()) if offsets.size else 0.0,
        "starts_climbed_per_voxel": stats["starts_climbed_per_voxel"],
        "iterations": stats["iterations_per_climb"],
        "starts_hit_cap": stats["starts_hit_cap"],
    }
    if "kernel" in stats["seconds"]:
        kernel = min(r[1].stats["seconds"]["kernel"] for r in runs)
        per_iteration, per_value = _flops_per_iteration(order)
        flops = stats["iterations_total"] * per_iteration + n * options.starts * per_value
        row["kernel_ms"] = kernel * 1e3
        fastest = min(runs, key=lambda r: r[1].stats["seconds"]["kernel"])[1].stats["seconds"]
        row["kernel_phases_ms"] = {k[7:]: round(v * 1e3, 3) for k, v in fastest.items() if k.startswith("kernel_")}
        row["kernel_voxels_per_s"] = n / kernel
        row["fp32_peak_share"] = flops / kernel / (H100_FP32_TFLOPS * 1e12)
    return row


def run_sh2peaks(sh, truth, npeaks, relative_threshold):
    exe = shutil.which("sh2peaks")
    if exe is None:
        return None
    import nibabel as nib

    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp, "fod.nii"), Path(tmp, "peaks.nii")
        nib.save(nib.Nifti1Image(sh, np.eye(4)), src)
        started = time.perf_counter()
        subprocess.run([exe, "-quiet", "-num", str(npeaks), "-nthreads", str(os.cpu_count()), str(src), str(dst)],
                       check=True)
        seconds = time.perf_counter() - started
        peaks = np.asarray(nib.load(dst).dataobj, np.float64).reshape(*sh.shape[:-1], npeaks, 3)
    amplitude = np.linalg.norm(peaks, axis=-1)
    amplitude[~np.isfinite(amplitude)] = 0.0
    keep = (amplitude > 0) & (amplitude >= relative_threshold * amplitude.max(axis=-1, keepdims=True))
    order = np.argsort(-np.where(keep, amplitude, -1.0), axis=-1, kind="stable")
    directions = np.take_along_axis(peaks / np.maximum(amplitude, 1e-30)[..., None], order[..., None], axis=-2)
    count = keep.sum(axis=-1)
    matched = match_peaks(directions, count, truth["directions"], truth["count"])
    n = int(np.prod(sh.shape[:-1]))
    return {"method": "MRtrix3 sh2peaks", "seconds": seconds, "voxels_per_s": n / seconds,
            "count_agreement": matched["count_agreement"], "mean_error_deg": matched["mean_error"],
            "p95_error_deg": matched["p95_error"]}


def run_dipy(sh, truth, npeaks, relative_threshold, voxels):
    try:
        from dipy.data import default_sphere
        from dipy.direction.peaks import peak_directions
        from dipy.reconst.shm import sh_to_sf_matrix
    except ImportError:
        return None
    flat = sh.reshape(-1, sh.shape[-1]).astype(np.float64)[:voxels]
    lmax = {n_coeffs(l): l for l in (2, 4, 6, 8, 10, 12)}[sh.shape[-1]]
    b_matrix, _ = sh_to_sf_matrix(default_sphere, sh_order_max=lmax, basis_type="tournier07", legacy=False)
    started = time.perf_counter()
    directions = np.full((flat.shape[0], npeaks, 3), np.nan)
    count = np.zeros(flat.shape[0], int)
    for v, coeffs in enumerate(flat):
        dirs, _, _ = peak_directions(coeffs @ b_matrix, default_sphere, relative_peak_threshold=relative_threshold,
                                     min_separation_angle=25)
        k = min(npeaks, len(dirs))
        directions[v, :k] = dirs[:k]
        count[v] = k
    seconds = time.perf_counter() - started
    flat_truth = {key: truth[key].reshape(-1, *truth[key].shape[3:])[:voxels] for key in ("directions", "count")}
    matched = match_peaks(directions, count, flat_truth["directions"], flat_truth["count"])
    return {"method": f"DIPY peak_directions ({len(default_sphere.vertices)} pts, 1 core)", "seconds": seconds,
            "voxels_per_s": flat.shape[0] / seconds, "count_agreement": matched["count_agreement"],
            "mean_error_deg": matched["mean_error"], "p95_error_deg": matched["p95_error"]}


def file_to_file(sh, backend, starts):
    """Seconds from .nii.gz to written outputs: in a warm process (second call of the job
    function) and as a fresh ``fibertensor peaks`` process (compiled kernels come from
    numba's on-disk cache, which the warm runs filled)."""
    import nibabel as nib

    from worker.jobs.peaks import PeaksOutputs, PeaksParams, run_peaks

    timings = {}
    with tempfile.TemporaryDirectory() as tmp:
        fod = Path(tmp, "fod.nii.gz")
        nib.save(nib.Nifti1Image(sh, np.eye(4)), fod)
        params = PeaksParams(backend=backend, starts=starts)
        for attempt in range(2):
            started = time.perf_counter()
            sidecar = run_peaks(fod, PeaksOutputs.with_prefix(Path(tmp, f"warm{attempt}")), params)
            timings["warm_worker_s"] = time.perf_counter() - started
        timings["warm_read_s"] = sidecar["seconds"]["read"]
        timings["warm_write_s"] = sidecar["seconds"]["write"]
        timings["warm_peaks_s"] = sidecar["seconds"]["peaks_total"]
        command = [sys.executable, "-m", "service", "peaks", str(fod), str(Path(tmp, "cold")), "--backend", backend,
                   "--starts", str(starts), "--quiet"]
        started = time.perf_counter()
        subprocess.run(command, check=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
        timings["cold_cli_s"] = time.perf_counter() - started
        cold = json.loads(Path(tmp, "cold.json").read_text())["seconds"]
        timings["cold_cli_inside_s"] = {k: round(v, 3) for k, v in cold.items()}
    return timings


LATE_LOADS = "late kernel loads (count)"
NUMBA_IMPORTED = "numba imported before the write (0/1)"

# A fresh process that runs ``fibertensor peaks``'s job (run_peaks) step by step, with the
# engine prepared in a background thread while the volume is read ({overlap}) or after it;
# absolute clock readings (time.time()) so that the parent can count from its spawn.
_STARTUP_CHILD = """
import json, os, sys, time
marks = {{"started": time.time()}}
from pathlib import Path
from worker.jobs.peaks import (PeaksOutputs, PeaksParams, compute_peaks, engine_options, plan_peaks, prepare_engine,
                               read_peaks_inputs, write_peaks_outputs)
marks["imported"] = time.time()
fod, prefix = Path(sys.argv[1]), Path(sys.argv[2])
params = PeaksParams(backend="{backend}", starts={starts})
plan = plan_peaks(fod, None, params)
preparing = prepare_engine(plan) if {overlap} else None
inputs = read_peaks_inputs(plan, inflate_threads=len(os.sched_getaffinity(0)))
marks["read"] = time.time()
if {overlap}:
    prepared = preparing.result()
else:
    from gpu.peaks.search import prepare_peaks
    prepared = prepare_peaks({lmax}, params.basis, engine_options(params), params.backend)
marks["prepared"] = time.time()

def loaded():
    if prepared.backend == "cuda":  # the CUDA path loads cubins; numba only for a kernel not cached yet
        return 0
    from gpu.peaks import sshopm_generated_cpu as g
    return len(g.sshopm_cpu_m{lmax}.overloads)

before = loaded()
result = compute_peaks(plan, inputs, prepared)
marks["computed"] = time.time()
late = loaded() - before
numba_imported = "numba" in sys.modules
sidecar = write_peaks_outputs(plan, inputs, result, PeaksOutputs.with_prefix(prefix))
marks["done"] = time.time()
print(json.dumps({{"marks": marks, "seconds": sidecar["seconds"], "prepare": prepared.seconds, "late_loads": late,
                  "numba": numba_imported}}))
import gc
gc.freeze()  # as service.cli.run exits
"""


def startup_breakdown(sh, backend, starts, repeats=3):
    """Where a fresh ``fibertensor peaks`` process spends its time, with the kernels in numba's
    cache (a first process fills it): python start, imports, then the read of the volume in
    the main thread while a background thread prepares the engine (imports numba, creates
    the CUDA context, loads the kernels from the cache, builds the SH-to-tensor matrix and
    the starts: gpu.peaks.search.start_preparing), how long the main thread then waited for
    it, compute (kernel: CUDA events), write, exit; the same steps one after the other (no
    overlap) for comparison; and the wall time of the real CLI. The best of ``repeats``
    fresh processes, step by step. "late kernel loads" counts kernel signatures the run
    still had to load after the preparation (0 when it prepared the right ones)."""
    import nibabel as nib

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    lmax = {n_coeffs(l): l for l in (2, 4, 6, 8, 10, 12)}[sh.shape[-1]]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", type=int, nargs=3, default=[96, 96, 60])
    parser.add_argument("--lmax", type=int, default=8)
    parser.add_argument("--starts", type=int, nargs="+", default=[128])
    parser.add_argument("--backends", nargs="+", default=["cpu"], choices=["cpu", "cuda"])
    parser.add_argument("--peers", nargs="*", default=["sh2peaks", "dipy"], choices=["sh2peaks", "dipy"])
    parser.add_argument("--dipy-voxels", type=int, default=20000, help="DIPY is slow: time it on this many voxels")
    parser.add_argument("--relative-threshold", type=float, default=0.1)
    parser.add_argument("--shift", choices=["adaptive", "fixed"], default="adaptive",
                        help="SS-HOPM shift: GEAP's adaptive shift or the fixed convexity bound")
    parser.add_argument("--no-newton", action="store_true", help="power steps only, no Newton steps")
    parser.add_argument("--max-iter", type=int, default=PeaksOptions.max_iter)
    parser.add_argument("--step-tol", type=float, default=PeaksOptions.step_tol)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--check-voxels", type=int, default=2000)
    parser.add_argument("--compare-backends", type=int, default=0, metavar="N",
                        help="also check CUDA against the CPU backend on the first N voxels")
    parser.add_argument("--file-to-file", action="store_true",
                        help="also time .nii.gz to outputs in a warm worker and from a fresh CLI process")
    parser.add_argument("--startup", action="store_true",
                        help="only time the steps of fresh processes (python, imports, kernel load, read, ...)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    shape = tuple(args.shape)
    started = time.perf_counter()
    truth = fod_phantom(shape, args.lmax, seed=0)
    sh = truth["sh"]
    print(f"phantom {shape} lmax {args.lmax}: {int(np.prod(shape))} voxels, made in {time.perf_counter() - started:.1f} s",
          flush=True)
    if args.startup:
        startup = {backend: startup_breakdown(sh, backend, args.starts[0]) for backend in args.backends}
        if args.json:
            args.json.write_text(json.dumps({"startup": startup}, indent=2))
        print(f"\nfresh process, kernels cached ({int(np.prod(shape))} voxels, {args.starts[0]} starts; ms, "
              "best of 3 processes per step; ∥: at once, in two threads)")
        print(f"{'step':28s}" + "".join(f"{backend:>10s}" for backend in startup))
        for name in dict.fromkeys(n for steps in startup.values() for n in steps):
            scale = 1 if name in (LATE_LOADS, NUMBA_IMPORTED) else 1e3
            print(f"{name:28s}" + "".join(f"{scale * steps[name]:10.0f}" if name in steps else f"{'':10s}"
                                            for steps in startup.values()))
        return
    if args.compare_backends:
        part = sh.reshape(-1, sh.shape[-1])[: args.compare_backends]
        cpu = sshopm_peaks(part, backend="cpu")
        gpu = sshopm_peaks(part, backend="cuda")
        same = cpu.count == gpu.count
        both = np.isfinite(cpu.amplitudes) & np.isfinite(gpu.amplitudes)
        angle = np.degrees(np.arccos(np.clip(np.abs((cpu.directions * gpu.directions).sum(-1))[both], 0, 1)))
        rel = np.abs(cpu.amplitudes - gpu.amplitudes)[both] / np.abs(cpu.amplitudes[both])
        print(f"CUDA vs CPU on {part.shape[0]} voxels: same count in {same.mean():.4f}, "
              f"max angle {angle.max():.2e} deg, max relative amplitude difference {rel.max():.2e}", flush=True)
    rows = []
    for backend in args.backends:
        for starts in args.starts:
            options = PeaksOptions(starts=starts, relative_threshold=args.relative_threshold, shift=args.shift,
                                   newton=not args.no_newton, max_iter=args.max_iter, step_tol=args.step_tol)
            rows.append(run_ours(sh, truth, options, backend, args.repeats, args.check_voxels, args.lmax))
            print(json.dumps(rows[-1]), flush=True)
    if "sh2peaks" in args.peers and (row := run_sh2peaks(sh, truth, 3, args.relative_threshold)):
        rows.append(row)
        print(json.dumps(row), flush=True)
    if "dipy" in args.peers and (row := run_dipy(sh, truth, 3, args.relative_threshold, args.dipy_voxels)):
        rows.append(row)
        print(json.dumps(row), flush=True)
    files = {}
    if args.file_to_file:
        for backend in args.backends:
            files[backend] = file_to_file(sh, backend, args.starts[0])
            print(json.dumps({backend: files[backend]}), flush=True)
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "file_to_file": files}, indent=2))

    reference = next((r for r in rows if r["method"] == "MRtrix3 sh2peaks"), rows[-1])
    print(f"\n{'method':44s} {'vox/s':>10s} {'× ' + reference['method'][:10]:>14s} {'kernel ms':>9s} "
          f"{'count ok':>8s} {'mean°':>6s} {'p95°':>6s} {'exact°':>8s} {'climbs':>6s} {'it mean/p99/max':>16s}")
    for r in rows:
        it = r.get("iterations")
        it_text = f"{it['mean']:.1f}/{it['p99']}/{it['max']}" if it else ""
        print(f"{r['method']:44s} {r['voxels_per_s']:10.0f} {r['voxels_per_s'] / reference['voxels_per_s']:14.2f} "
              f"{r.get('kernel_ms', float('nan')):9.2f} {r['count_agreement']:8.3f} {r['mean_error_deg']:6.2f} "
              f"{r['p95_error_deg']:6.2f} {r.get('max_offset_from_exact_deg', float('nan')):8.1e} "
              f"{r.get('starts_climbed_per_voxel', float('nan')):6.1f} {it_text:>16s}")
    for backend, t in files.items():
        print(f"file to file ({backend}, {args.starts[0]} starts): warm worker {t['warm_worker_s']:.2f} s "
              f"(read {t['warm_read_s']:.2f}, peaks {t['warm_peaks_s']:.2f}, write {t['warm_write_s']:.2f}); "
              f"fresh CLI process {t['cold_cli_s']:.2f} s (inside: {t['cold_cli_inside_s']})")
    for r in rows:
        if "fp32_peak_share" in r:
            print(f"{r['method']}: kernel {r['kernel_ms']:.2f} ms = {r['kernel_voxels_per_s'] / 1e6:.1f} M voxels/s, "
                  f"{100 * r['fp32_peak_share']:.1f}% of FP32 peak; phases (ms) {r['kernel_phases_ms']}")


if __name__ == "__main__":
    main()
