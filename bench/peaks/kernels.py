"""The peak search on the phantom: ours (CUDA and/or CPU backend) against MRtrix3
``sh2peaks`` and DIPY ``peak_directions``, side by side.

Per method: voxels per second and its ratio to sh2peaks (sh2peaks' seconds per voxel over
the method's), fiber count agreement and angular error against the true fibers; for ours
also the offset of each reported peak from the exact (float64) local maximum, starts
climbed and iterations per climb, and on CUDA the kernel time (CUDA events in the engine)
with its share of the FP32 peak. ``--file-to-file`` adds a .nii.gz-to-outputs run in a warm
worker and in a fresh ``fibertensor peaks`` process; ``--compare-backends N`` checks CUDA
against the CPU backend. Peers run only where installed.
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

from bench.harness import Column, Report, child_environment, ratio, time_host
from bench.peaks.peers import run_dipy, run_sh2peaks, truth_agreement
from bench.peaks.volume import add_volume_options, make_phantom
from gpu.peaks import PeaksOptions, sshopm_peaks
from gpu.peaks.peak_matching import exact_peak_offsets
from gpu.peaks.symmetric_tensor import sh_to_tensor

__all__ = ["add_arguments", "run"]

H100_FP32_TFLOPS = 66.9  # H100 SXM5, non-tensor FP32 peak


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_volume_options(parser)
    parser.add_argument("--starts", type=int, nargs="+", default=[128], help="one run of ours per value")
    parser.add_argument("--backends", nargs="+", default=["cpu"], choices=["cpu", "cuda"])
    parser.add_argument("--peers", nargs="*", default=["sh2peaks", "dipy"], choices=["sh2peaks", "dipy"],
                        help="peers to run (none: --peers alone)")
    parser.add_argument("--dipy-voxels", type=int, default=20000, help="DIPY is slow: time it on this many voxels")
    parser.add_argument("--relative-threshold", type=float, default=0.1)
    parser.add_argument("--check-voxels", type=int, default=2000,
                        help="voxels whose peaks are checked against the exact float64 maxima")
    parser.add_argument("--compare-backends", type=int, default=0, metavar="N",
                        help="also check CUDA against the CPU backend on the first N voxels")
    parser.add_argument("--file-to-file", action="store_true",
                        help="also time .nii.gz to outputs in a warm worker and from a fresh CLI process")


def _flops_per_iteration(order: int) -> tuple[int, int]:
    """(flops of one climb iteration, flops of one A x^m evaluation) of the generated code."""
    from gpu.peaks.symmetric_tensor import index_classes

    lower = len(index_classes(order - 2))
    full = len(index_classes(order))
    powers = 3 * (order - 1)
    # axm2: 6 sums of `lower` terms (σ·a·monomial: 2 mul + 1 add) + monomials; the step
    per_iteration = 6 * lower * 3 + lower + powers + 110
    per_value = full * 4 + powers
    return per_iteration, per_value


def run_ours(sh, truth, options, backend, repeats, check_voxels, order) -> dict:
    sshopm_peaks(sh[:2, :2, :2], options=options, backend=backend)  # compiles or loads the kernels
    results = []
    timing = time_host(lambda: results.append(sshopm_peaks(sh, options=options, backend=backend)), repeats, warmup=0)
    best = int(np.argmin(timing.wall))
    result = results[best]
    n = int(np.prod(sh.shape[:-1]))
    flat = sh.reshape(-1, sh.shape[-1])
    pick = np.random.default_rng(0).choice(n, size=min(check_voxels, n), replace=False)
    offsets = exact_peak_offsets(sh_to_tensor(flat[pick]), result.directions.reshape(n, -1, 3)[pick],
                                 result.count.reshape(-1)[pick], order)
    stats = result.stats
    row = {
        "method": f"ours-{backend} ({options.starts} starts)", "seconds": timing.best_wall, "voxels": n,
        **truth_agreement(result.directions, result.count, truth),
        "max_offset_from_exact_deg": float(offsets.max()) if offsets.size else 0.0,
        "starts_climbed_per_voxel": stats.get("starts_climbed_per_voxel"),
        "iterations": stats.get("iterations_per_climb"),
        "starts_hit_cap": stats.get("starts_hit_cap"),
    }
    if "kernel" in stats["seconds"]:
        fastest = min(results, key=lambda r: r.stats["seconds"]["kernel"]).stats
        kernel = fastest["seconds"]["kernel"]
        per_iteration, per_value = _flops_per_iteration(order)
        flops = fastest["iterations_total"] * per_iteration + n * options.starts * per_value
        row["kernel_ms"] = kernel * 1e3
        row["kernel_phases_ms"] = {k[7:]: round(v * 1e3, 3) for k, v in fastest["seconds"].items()
                                   if k.startswith("kernel_")}
        row["kernel_voxels_per_s"] = n / kernel
        row["fp32_peak_share"] = flops / kernel / (H100_FP32_TFLOPS * 1e12)
    return row


def compare_backends(sh: np.ndarray, voxels: int, report: Report) -> None:
    """CUDA against the CPU backend on the first ``voxels`` voxels: same count, largest angle
    and relative amplitude difference."""
    part = sh.reshape(-1, sh.shape[-1])[:voxels]
    cpu, gpu = sshopm_peaks(part, backend="cpu"), sshopm_peaks(part, backend="cuda")
    both = np.isfinite(cpu.amplitudes) & np.isfinite(gpu.amplitudes)
    angle = np.degrees(np.arccos(np.clip(np.abs((cpu.directions * gpu.directions).sum(-1))[both], 0, 1)))
    rel = np.abs(cpu.amplitudes - gpu.amplitudes)[both] / np.abs(cpu.amplitudes[both])
    report.table("CUDA against the CPU backend", [{
        "voxels": part.shape[0], "same_count": float((cpu.count == gpu.count).mean()),
        "max_angle_deg": float(angle.max(initial=0)), "max_rel_amplitude": float(rel.max(initial=0))}],
        [Column("voxels", "voxels", "d"), Column("same_count", "same count", ".4f"),
         Column("max_angle_deg", "max angle °", ".2e"), Column("max_rel_amplitude", "max rel. amplitude", ".2e")])


def file_to_file(sh, backend, starts) -> dict:
    """Seconds from .nii.gz to written outputs: in a warm process (second call of the job
    function) and as a fresh ``fibertensor peaks`` process (compiled kernels come from
    numba's on-disk cache, which the warm runs filled)."""
    import nibabel as nib

    from worker.jobs.peaks import PeaksOutputs, PeaksParams, run_peaks

    row = {"backend": backend, "starts": starts}
    with tempfile.TemporaryDirectory() as tmp:
        fod = Path(tmp, "fod.nii.gz")
        nib.save(nib.Nifti1Image(sh, np.eye(4)), fod)
        params = PeaksParams(backend=backend, starts=starts)
        for attempt in range(2):
            started = time.perf_counter()
            sidecar = run_peaks(fod, PeaksOutputs.with_prefix(Path(tmp, f"warm{attempt}")), params)
            row["warm_worker_s"] = time.perf_counter() - started
        row.update(warm_read_s=sidecar["seconds"]["read"], warm_peaks_s=sidecar["seconds"]["peaks_total"],
                   warm_write_s=sidecar["seconds"]["write"])
        command = [sys.executable, "-m", "service", "peaks", str(fod), str(Path(tmp, "cold")), "--backend", backend,
                   "--starts", str(starts), "--quiet"]
        started = time.perf_counter()
        subprocess.run(command, check=True, env=child_environment())
        row["cold_cli_s"] = time.perf_counter() - started
        cold = json.loads(Path(tmp, "cold.json").read_text())["seconds"]
        row["cold_cli_inside_s"] = {k: round(v, 3) for k, v in cold.items()}
    return row


def _iterations(it: dict) -> str:
    return f"{it['mean']:.1f}/{it['p99']}/{it['max']}"


def run(args: argparse.Namespace, report: Report) -> None:
    truth = make_phantom(args)
    sh = truth["sh"]
    if args.compare_backends:
        compare_backends(sh, args.compare_backends, report)
    rows = []
    for backend in args.backends:
        for starts in args.starts:
            options = PeaksOptions(starts=starts, relative_threshold=args.relative_threshold)
            rows.append(run_ours(sh, truth, options, backend, args.repeats, args.check_voxels, args.lmax))
            Report.progress(f"{rows[-1]['method']}: {rows[-1]['seconds']:.3f} s")
    if "sh2peaks" in args.peers and (row := run_sh2peaks(sh, truth, 3, args.relative_threshold)):
        rows.append(row)
    if "dipy" in args.peers and (row := run_dipy(sh, truth, 3, args.relative_threshold, args.dipy_voxels)):
        rows.append(row)
    reference = next((r for r in rows if r["method"] == "MRtrix3 sh2peaks"), rows[-1])
    name = "sh2peaks" if reference["method"] == "MRtrix3 sh2peaks" else reference["method"]
    for r in rows:
        r["voxels_per_s"] = r["voxels"] / r["seconds"]
        r["x_reference"] = ratio(reference["seconds"] / reference["voxels"], r["seconds"] / r["voxels"])
    report.table(
        f"{int(np.prod(args.shape))} voxels, lmax {args.lmax}, relative threshold {args.relative_threshold}; "
        f"ours: best of {args.repeats}",
        rows,
        [Column("method", "method"), Column("voxels_per_s", "vox/s", ".0f"),
         Column("x_reference", f"x {name}", ".2f"), Column("kernel_ms", "kernel ms", ".2f"),
         Column("count_agreement", "count ok", ".3f"), Column("mean_error_deg", "mean°", ".2f"),
         Column("p95_error_deg", "p95°", ".2f"), Column("max_offset_from_exact_deg", "exact°", ".1e"),
         Column("starts_climbed_per_voxel", "climbs", ".1f"), Column("iterations", "it mean/p99/max", _iterations),
         Column("fp32_peak_share", "FP32 peak", ".1%"),
         Column("kernel_phases_ms", "kernel phases ms", lambda phases: " ".join(f"{k}={v}" for k, v in phases.items()))],
        note=f"x {name}: its seconds per voxel over the method's; count ok, mean°, p95°: against the "
             "phantom's true fibers; exact°: largest offset of a reported peak from the float64 maximum")
    if args.file_to_file:
        files = [file_to_file(sh, backend, args.starts[0]) for backend in args.backends]
        report.table(
            f"file to file, {args.starts[0]} starts (seconds)", files,
            [Column("backend", "backend"), Column("warm_worker_s", "warm worker", ".2f"),
             Column("warm_read_s", "read", ".2f"), Column("warm_peaks_s", "peaks", ".2f"),
             Column("warm_write_s", "write", ".2f"), Column("cold_cli_s", "fresh CLI", ".2f"),
             Column("cold_cli_inside_s", "fresh CLI inside", lambda inside: json.dumps(inside))])
