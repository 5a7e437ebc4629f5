"""The peak search on noisy FODs: the clean phantom, one with noise on every SH order
proportional to each voxel's l = 0 term, and (``--csd-voxels``) DIPY CSD fits of simulated
DWI (the phantom's fibers as tensors, Rician noise at SNR 20), with MRtrix3 sh2peaks on the
same volumes (``--peers``).

Per run: seconds of the whole call (best of ``--repeats``), the ratio sh2peaks / ours,
CUDA kernel time and its phases, climbs and iterations per voxel, climbs that hit the
iteration cap, and fiber count agreement and mean angular error against the phantom's
fibers.
"""

from __future__ import annotations

import argparse

import numpy as np

from bench.harness import Column, Report, ratio, time_host
from bench.peaks.peers import run_sh2peaks, truth_agreement
from bench.peaks.volume import add_volume_options
from gpu.peaks import PeaksOptions, fod_phantom, sshopm_peaks
from gpu.sh_basis import convert_sh_basis
from gpu.peaks.sshopm_starts import hemisphere_starts

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_volume_options(parser, shape=(48, 48, 30))
    parser.add_argument("--starts", type=int, default=128)
    parser.add_argument("--relative-noise", type=float, default=0.3,
                        help="noise SD on every coefficient as a fraction of the voxel's l = 0 coefficient")
    parser.add_argument("--backends", nargs="+", default=["cpu"], choices=["cpu", "cuda"])
    parser.add_argument("--csd-voxels", type=int, default=0,
                        help="also this many voxels of DIPY CSD fits to simulated DWI at SNR 20")
    parser.add_argument("--peers", action="store_true", help="also time MRtrix3 sh2peaks on each volume")


def csd_fods(voxels: int, lmax: int, snr: float, seed: int = 0) -> dict[str, np.ndarray]:
    """FODs (MRtrix3 basis) that DIPY's CSD fits to simulated DWI: the phantom's 1–3 fibers
    per voxel as prolate tensors (1.5, 0.3, 0.3 µm²/ms) with volume fractions ∝ their
    weights, 6 b = 0 and 64 b = 3000 s/mm² directions, Rician noise at ``snr`` (DIPY's
    multi_tensor), the response the tensor itself."""
    from dipy.core.gradients import gradient_table
    from dipy.reconst.csdeconv import ConstrainedSphericalDeconvModel
    from dipy.sims.voxel import multi_tensor

    truth = fod_phantom((voxels,), lmax, noise=0.0, seed=seed)
    bvecs = np.concatenate([np.zeros((6, 3)), hemisphere_starts(64)])
    gtab = gradient_table(np.r_[np.zeros(6), np.full(64, 3000.0)], bvecs=bvecs)
    evals = np.array([0.0015, 0.0003, 0.0003])
    rng = np.random.default_rng(seed)
    signals = np.empty((voxels, len(bvecs)))
    for v in range(voxels):
        k = int(truth["count"][v])
        d = truth["directions"][v, :k].astype(np.float64)
        angles = [(np.degrees(np.arccos(np.clip(z, -1, 1))), np.degrees(np.arctan2(y, x))) for x, y, z in d]
        fractions = 100.0 * truth["weights"][v, :k] / truth["weights"][v, :k].sum()
        signals[v], _ = multi_tensor(gtab, np.tile(evals, (k, 1)), S0=100.0, angles=angles, fractions=fractions,
                                     snr=snr, rng=rng)
    fit = ConstrainedSphericalDeconvModel(gtab, (evals, 100.0), sh_order_max=lmax).fit(signals)
    sh = convert_sh_basis(np.asarray(fit.shm_coeff, np.float64), "dipy", "mrtrix").astype(np.float32)
    # a (voxels, 1, 1) volume, as sh2peaks reads 4D images
    return {key: value.reshape(voxels, 1, 1, *value.shape[1:]) for key, value in {**truth, "sh": sh}.items()}


def run(args: argparse.Namespace, report: Report) -> None:
    shape = tuple(args.shape)
    volumes = [("clean", lambda: fod_phantom(shape, args.lmax, seed=0)),
               (f"noisy {args.relative_noise:g}",
                lambda: fod_phantom(shape, args.lmax, relative_noise=args.relative_noise, seed=0))]
    if args.csd_voxels:
        volumes.append(("CSD SNR 20", lambda: csd_fods(args.csd_voxels, args.lmax, snr=20.0)))
    options = PeaksOptions(starts=args.starts)
    rows = []
    for volume, make in volumes:
        truth = make()
        sh = truth["sh"]
        Report.progress(f"{volume}: {sh.shape[:-1]} voxels")
        ours = []
        for backend in args.backends:
            sshopm_peaks(sh[:2], options=options, backend=backend)  # compiles or loads (same array layout)
            results = []
            timing = time_host(lambda: results.append(sshopm_peaks(sh, options=options, backend=backend)),
                               args.repeats, warmup=0)
            result = results[int(np.argmin(timing.wall))]
            s = result.stats
            ours.append({
                "volume": volume, "method": f"ours-{backend}", "seconds": timing.best_wall,
                "kernel_ms": 1e3 * s["seconds"]["kernel"] if "kernel" in s["seconds"] else None,
                "phases_ms": {k[7:]: round(1e3 * v, 3) for k, v in s["seconds"].items() if k.startswith("kernel_")},
                "climbs_per_voxel": s.get("starts_climbed_per_voxel"),
                "iterations_per_voxel": s["iterations_total"] / max(s["voxels_processed"], 1),
                "capped": s.get("starts_hit_cap"),
                **truth_agreement(result.directions, result.count, truth),
            })
        peer = run_sh2peaks(sh, truth) if args.peers else None
        for row in ours:
            row["x_sh2peaks"] = ratio(peer and peer["seconds"], row["seconds"])
        rows += ours + ([{"volume": volume, **peer}] if peer else [])
    report.table(
        f"{int(np.prod(shape))} voxels (CSD: {args.csd_voxels}), lmax {args.lmax}, {args.starts} starts, relative "
        f"noise {args.relative_noise:g}; ours: best of {args.repeats}", rows,
        [Column("volume", "volume"), Column("method", "method"), Column("seconds", "s", ".3f"),
         Column("x_sh2peaks", "x sh2peaks", ".2f"), Column("kernel_ms", "kernel ms", ".2f"),
         Column("climbs_per_voxel", "climbs", ".2f"), Column("iterations_per_voxel", "its", ".1f"),
         Column("capped", "capped", "d"), Column("count_agreement", "count ok", ".3f"),
         Column("mean_error_deg", "mean°", ".2f"),
         Column("phases_ms", "kernel phases ms", lambda phases: " ".join(f"{k}={v}" for k, v in phases.items()))],
        note="x sh2peaks: sh2peaks' seconds over ours on the same volume; count ok, mean°: against the true fibers")
