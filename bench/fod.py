"""From DWI to FODs: our MSMT-CSD (and, with ``--csd``, CSD) beside MRtrix3's ``dwi2fod``
on one multi-shell phantom, in one run.

    python3 -m bench.fod [--shape X Y Z] [--backends cpu cuda] [--repeats N] [--mask ellipsoid|none]
                         [--mrtrix-bin DIR] [--nthreads N] [--csd] [--dipy-voxels N] [--json PATH]
    python3 -m bench.fod --solver-only [--shape X Y Z] [--b0 N] [--shells B:N ...] [--repeats N]
                         [--check-voxels N] [--csd]
    python3 -m bench.fod --cohort N [--distinct D] [--gpus 0 0,1] [--processes-per-gpu P] [--peaks]
                         [--estimate-responses]
                         [--shape X Y Z] [--b0 N] [--shells B:N ...]
    python3 -m bench.fod --slabs [--shape X Y Z] [--b0 N] [--shells B:N ...] [--backends cpu cuda] [--repeats N]
    python3 -m bench.fod --responses [--shape X Y Z] [--b0 N] [--shells B:N ...] [--backends cpu cuda]

The phantom (``gpu.fod.phantom``): white matter of 1–3 crossing fibres, grey matter and
CSF in partial volume, Rician noise; b = 0 and two shells. Both sides are given its exact
tissue responses as response files. ``dwi2fod`` reads the DWI as ``.mif`` with its
``dw_scheme`` and the mask, and writes each tissue's ``.mif``: its seconds are the whole
process, file to file, best of ``--peer-repeats``. Ours: ``msmt_csd`` on arrays in memory
(best of ``--repeats`` after a call that compiles the kernels or loads them from the
cache), and file to file in this process (read the same ``.mif``, fit, write each tissue's
``.mif``), and as a fresh ``fibertensor fod`` process on the same files (its start,
imports and kernel loads included: what a user waits for). "GPU s" are CUDA events around
the CUDA solve (copies in, kernel, copies out). CPU s are the process's (all threads) or
the child's (user + sys).

``--solver-only`` times our CUDA solve alone (:func:`gpu.fod.backend_cuda.msmt_csd_cuda`,
with ``--csd`` also ``csd_cuda``) on the mask's voxels: CUDA events around ``--repeats``
calls after a warm-up call (copies in, kernels, copies out, CPU redos), and checks
``--check-voxels`` voxels drawn at random against the CPU backend (same iteration counts,
per-voxel relative L2); no dwi2fod, no files.

``--cohort N`` runs the cohort batch instead: N subjects (``--distinct`` phantoms of their own
noise seeds, the other subjects links to them), each a ``.nii.gz`` DWI with its ``.bval``,
``.bvec`` and ellipsoid mask beside it as ``fibertensor batch fod`` finds them, all given the
phantom's responses as group responses (with ``--estimate-responses`` each subject's estimated,
as ``fibertensor bids --from dwi`` does by default), through ``worker.batch.run_batch`` (what
``fibertensor batch fod [--peaks] --gpus G`` runs) once per ``--gpus`` value: subjects per second over the
whole run, each run against the first, the GPUs' busy share, the host's cores and the mean
seconds per subject of reading, fitting and writing. (Not the steady rate of
:mod:`bench.batch`: the fit is GPU work, its processes share the GPU and finish together.)

``--responses`` times response estimation instead: ``fibertensor response`` (dhollander and
tournier, :func:`worker.jobs.fod.response.run_response` in this process, best of
``--repeats`` after a warm-up call) on each backend, and MRtrix3's ``dwi2response`` (a whole
process, where it is on PATH), on the phantom as a ``.nii.gz`` with its ``.bval``, ``.bvec``
and mask, file to file: seconds (ours also the estimation alone, the read apart) and each
shell's l = 0 term of the WM response against ``dwi2response``'s and against the first
backend's (relative difference, the largest over the shells).

``--slabs`` times the fit of a DWI too large to hold (docs/decisions/fod-slabs.md): the
phantom as one ``.nii.gz`` subject with its ``.bval``, ``.bvec``, mask and the phantom's
responses through ``fibertensor fod`` as a whole process on the last of ``--backends`` (cuda where
a GPU is usable), in slabs from a
memory map (forced, whatever the size) and whole (the threshold and the job memory limit
raised), alternating, ``--repeats`` rounds after one untimed run of each: wall seconds, the
job's read and fit seconds, the process's peak resident size (the slab run's includes the
mapped files' pages), and whether the WM FOD files are the same bytes.

Agreement: per voxel of the mask and per tissue, ‖ours − dwi2fod‖ / ‖dwi2fod, all tissues
of the voxel‖ (a tissue the constraint holds at zero is then no error).

``--dipy-voxels N`` (default 1000) adds DIPY's multi-shell CSD (and with ``--csd`` its CSD)
on a central crop of about N mask voxels, given the same responses, beside ours (CPU
backend) on the same voxels: seconds, and DIPY's FODs against ours by the same relative L2
(:func:`dipy_comparison`). DIPY's multi-shell fit needs cvxpy (``pip install -e ".[bench]"``).
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.harness import Column, Report, child_environment, gpu_time, ratio, run_benchmark, time_host
from bench.peaks.processes import child_seconds
from gpu.cuda.device import cuda_available
from gpu.fod import csd, dwi_phantom, msmt_csd, shell_scheme, tissue_responses
from worker.io.gradients import scheme_from_header
from worker.io.mif import load_mif_data, read_mif_header, write_mif
from worker.io.response_files import read_response, write_response

TISSUES = ("wm", "gm", "csf")
# The agreement threshold on the per-voxel relative L2 (tests/gpu/fod/test_vs_mrtrix.py's).
TOLERANCE = 1e-3


def _shell(text: str) -> tuple[float, int]:
    try:
        b, count = text.split(":")
        return float(b), int(count)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a shell is B:DIRECTIONS, e.g. 1000:30, not {text!r}") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--shape", type=int, nargs=3, default=(96, 96, 60), metavar=("X", "Y", "Z"),
                        help="phantom grid (default: whole-brain sized 96 96 60)")
    parser.add_argument("--b0", type=int, default=5, help="b = 0 volumes (default 5)")
    parser.add_argument("--shells", type=_shell, nargs="+", default=[(1000.0, 30), (2000.0, 60)], metavar="B:N",
                        help="shells as b-value:directions (default 1000:30 2000:60)")
    parser.add_argument("--snr", type=float, default=20.0, help="b = 0 white-matter signal over Rician σ")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mask", choices=("ellipsoid", "none"), default="ellipsoid",
                        help="ellipsoid: the brain-like ellipsoid of semi-axes 0.48 × each side (about half "
                             "the grid); none: every voxel")
    parser.add_argument("--backends", nargs="+", choices=("cpu", "cuda"), default=["cpu", "cuda"],
                        help="our backends (cuda only where a GPU is usable)")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls of ours, after a warm-up call")
    parser.add_argument("--peer-repeats", type=int, default=1, help="timed runs of dwi2fod")
    parser.add_argument("--mrtrix-bin", type=Path, metavar="DIR",
                        help="folder of MRtrix3's dwi2fod (default: the one on PATH)")
    parser.add_argument("--nthreads", type=int, default=len(os.sched_getaffinity(0)),
                        help="dwi2fod -nthreads (default: every core of this process)")
    parser.add_argument("--csd", action="store_true",
                        help="also single-shell CSD against dwi2fod csd (b = 0 and the highest shell)")
    parser.add_argument("--no-file-to-file", dest="file_to_file", action="store_false",
                        help="time ours in memory only")
    parser.add_argument("--workdir", type=Path, help="keep the files here (default: a temporary folder)")
    parser.add_argument("--solver-only", action="store_true",
                        help="time our CUDA solve alone and check a sample of voxels against the CPU backend")
    parser.add_argument("--check-voxels", type=int, default=2000,
                        help="--solver-only: voxels checked against the CPU backend (default 2000)")
    parser.add_argument("--cohort", type=int, metavar="N",
                        help="the cohort batch of N subjects instead (file to file, fibertensor batch fod), once per "
                             "--gpus value")
    parser.add_argument("--distinct", type=int, default=8,
                        help="--cohort: phantoms written (each its own noise); the other subjects link to them")
    parser.add_argument("--gpus", nargs="+", default=["0"], metavar="G",
                        help="--cohort: one run per value, each CUDA_VISIBLE_DEVICES values (e.g. 0 0,1)")
    parser.add_argument("--processes-per-gpu", type=int,
                        help="--cohort: worker processes per GPU (default: fibertensor batch fod's)")
    parser.add_argument("--peaks", action="store_true", help="--cohort: each WM FOD's peaks too (batch fod --peaks)")
    parser.add_argument("--estimate-responses", action="store_true",
                        help="--cohort: each subject's responses estimated (dhollander), as fibertensor bids --from dwi "
                             "does by default, instead of the group responses given")
    parser.add_argument("--responses", action="store_true",
                        help="time response estimation (ours on each backend, dwi2response where on PATH) instead")
    parser.add_argument("--slabs", action="store_true",
                        help="time a fresh fod in slabs from a memory map against the whole-volume fit instead")
    parser.add_argument("--dipy-voxels", type=int, default=1000,
                        help="DIPY's multi-shell CSD (and with --csd its CSD) on a central crop of about this many "
                             "mask voxels, beside ours on the same voxels (0: no DIPY; its MSMT needs cvxpy)")


def ellipsoid_mask(shape: tuple[int, int, int], semi_axis: float = 0.48) -> np.ndarray:
    """The voxels whose centres lie in the ellipsoid centred on the grid with semi-axes
    ``semi_axis`` × each side."""
    axes = [(np.arange(n) - (n - 1) / 2) / (semi_axis * n) for n in shape]
    x, y, z = np.meshgrid(*axes, indexing="ij", sparse=True)
    return x ** 2 + y ** 2 + z ** 2 <= 1.0


def agreement(ours: list[np.ndarray], theirs: list[np.ndarray], mask: np.ndarray) -> list[dict]:
    """Per tissue: the fraction of mask voxels within :data:`TOLERANCE`, the median, the
    99.9th percentile and the largest relative L2 (see the module docstring)."""
    ours = [np.asarray(o, np.float64)[mask].reshape(int(mask.sum()), -1) for o in ours]
    theirs = [np.asarray(t, np.float64)[mask].reshape(int(mask.sum()), -1) for t in theirs]
    scale = np.linalg.norm(np.concatenate(theirs, axis=1), axis=1)
    scale[scale == 0] = np.inf  # both zero there: no error
    rows = []
    for o, t in zip(ours, theirs):
        error = np.linalg.norm(o - t, axis=1) / scale
        rows.append({"within": float((error <= TOLERANCE).mean()), "median": float(np.median(error)),
                     "p999": float(np.quantile(error, 0.999)), "max": float(error.max())})
    return rows


def _dwi2fod(args: argparse.Namespace) -> str | None:
    if args.mrtrix_bin is not None:
        exe = args.mrtrix_bin / "dwi2fod"
        if not exe.is_file():
            raise SystemExit(f"--mrtrix-bin {args.mrtrix_bin}: no dwi2fod there; give MRtrix3's bin folder")
        return str(exe)
    return shutil.which("dwi2fod")


def _peer(exe: str, command: list, repeats: int, outputs: list[Path]) -> dict:
    runs = [child_seconds([exe, *map(str, command), "-force", "-quiet"]) for _ in range(repeats)]
    cpu, wall = min(runs, key=lambda run: run[1])
    theirs = [load_mif_data(read_mif_header(path), np.float64) for path in outputs]
    return {"seconds": wall, "cpu_s": cpu, "theirs": [t.reshape(*t.shape[:3], -1) for t in theirs]}


class Fit:
    """One fit (MSMT-CSD or CSD) on one data set: its files, our call, and dwi2fod's command."""

    def __init__(self, name: str, folder: Path, dwi: np.ndarray, bvals: np.ndarray, bvecs: np.ndarray,
                 responses: list[np.ndarray], tissues: tuple[str, ...], mask: np.ndarray):
        self.name, self.folder, self.tissues, self.mask = name, folder, tissues, mask
        self.dwi, self.bvals, self.bvecs, self.responses = dwi, bvals, bvecs, responses
        # identity transform: image axes are the scheme's (scanner) axes
        scheme = "\n".join(",".join(repr(float(v)) for v in row) for row in np.column_stack([bvecs, bvals]))
        self.dwi_path = write_mif(folder / f"{name}_dwi.mif", dwi, np.eye(4), keyval={"dw_scheme": scheme})
        self.mask_path = write_mif(folder / f"{name}_mask.mif", mask.astype(np.uint8), np.eye(4))
        self.response_paths = [folder / f"{name}_{t}.txt" for t in tissues]
        for path, response in zip(self.response_paths, responses):
            write_response(path, response, None if name == "csd" else [0.0, *sorted(set(bvals[bvals > 0]))])

    def ours(self, dwi, bvals, bvecs, responses, mask, backend) -> list[np.ndarray]:
        if self.name == "csd":
            return [csd(dwi, bvals, bvecs, responses[0].ravel(), mask=mask, backend=backend)]
        return msmt_csd(dwi, bvals, bvecs, responses, mask=mask, backend=backend)

    def in_memory(self, backend: str) -> list[np.ndarray]:
        return self.ours(self.dwi, self.bvals, self.bvecs, self.responses, self.mask, backend)

    def file_to_file(self, backend: str) -> None:
        info = read_mif_header(self.dwi_path)
        dwi = load_mif_data(info, np.float32)
        scheme = scheme_from_header(info.keyval, dwi.shape[-1])
        mask = load_mif_data(read_mif_header(self.mask_path), np.float32) > 0
        responses = [read_response(path)[0] for path in self.response_paths]
        for tissue, image in zip(self.tissues, self.ours(dwi, scheme[:, 3], scheme[:, :3], responses, mask, backend)):
            write_mif(self.folder / f"{self.name}_ours_{tissue}.mif", image, info.affine)

    def fresh_process(self, backend: str) -> tuple[float, float]:
        """``fibertensor fod`` on the same files in a new process (its start, imports and kernel
        loads included), as a user runs it: its (CPU, wall) seconds."""
        command = [sys.executable, "-m", "service", "fod", str(self.dwi_path), str(self.folder / f"{self.name}_fresh"),
                   "--mask", str(self.mask_path), "--response", *map(str, self.response_paths),
                   "--algorithm", self.name, "--backend", backend, "--quiet"]
        return child_seconds(command, env=child_environment())

    def peer_command(self) -> tuple[list, list[Path]]:
        outputs = [self.folder / f"{self.name}_theirs_{t}.mif" for t in self.tissues]
        pairs = [a for response, out in zip(self.response_paths, outputs) for a in (response, out)]
        return [self.name, self.dwi_path, *pairs, "-mask", self.mask_path], outputs

    def gpu_seconds(self, repeats: int) -> float:
        """CUDA events around the CUDA solve alone (no problem set-up, no scatter into the grid)."""
        from gpu.fod import backend_cuda
        from gpu.fod.csd_problem import csd_problem
        from gpu.fod.msmt_problem import msmt_problem

        signals = self.dwi[self.mask]
        if self.name == "csd":
            problem = csd_problem(self.bvals, self.bvecs, self.responses[0].ravel())
            signals = signals[:, problem.volumes]
            solve = backend_cuda.csd_cuda
        else:
            problem = msmt_problem(self.bvals, self.bvecs, self.responses)
            solve = backend_cuda.msmt_csd_cuda
        return gpu_time(lambda: solve(problem, signals), repeats=repeats)[0]


def _measure(fit: Fit, args: argparse.Namespace, backends: list[str], exe: str | None, report: Report) -> list[dict]:
    """The rows of one fit: dwi2fod, then ours in memory and file to file per backend; their
    agreement with dwi2fod as a table of its own."""
    voxels = int(fit.mask.sum())
    label = "dwi2fod msmt_csd" if fit.name == "msmt_csd" else "dwi2fod csd"
    peer = None
    if exe is None:
        Report.progress("dwi2fod not found (install MRtrix3 or give --mrtrix-bin DIR): ours alone")
    else:
        command, outputs = fit.peer_command()
        peer = _peer(exe, [*command, "-nthreads", args.nthreads], args.peer_repeats, outputs)
        Report.progress(f"{label} -nthreads {args.nthreads}: {peer['seconds']:.2f} s")
    rows, agreements = [], []
    for backend in backends:
        result = []
        timing = time_host(lambda: result.append(fit.in_memory(backend)), repeats=args.repeats)
        row = {"fit": fit.name, "method": f"ours {backend}, in memory", "voxels": voxels,
               "seconds": timing.best_wall, "cpu_s": timing.best_cpu}
        if backend == "cuda":
            row["gpu_s"] = fit.gpu_seconds(args.repeats)
        if peer is not None:
            for tissue, values in zip(fit.tissues, agreement(result[-1], peer["theirs"], fit.mask)):
                agreements.append({"fit": fit.name, "backend": backend, "tissue": tissue, "voxels": voxels, **values})
            row["within"] = min(a["within"] for a in agreements[-len(fit.tissues):])
        rows.append(row)
        Report.progress(f"{row['method']}: {row['seconds']:.3f} s")
        if args.file_to_file:
            timing = time_host(lambda: fit.file_to_file(backend), repeats=args.repeats, warmup=0)
            rows.append({"fit": fit.name, "method": f"ours {backend}, file to file", "voxels": voxels,
                         "seconds": timing.best_wall, "cpu_s": timing.best_cpu, "within": row.get("within")})
            Report.progress(f"{rows[-1]['method']}: {rows[-1]['seconds']:.3f} s")
            cpu, wall = min((fit.fresh_process(backend) for _ in range(args.repeats)), key=lambda run: run[1])
            rows.append({"fit": fit.name, "method": f"fibertensor fod --backend {backend}, a fresh process",
                         "voxels": voxels, "seconds": wall, "cpu_s": cpu})
            Report.progress(f"{rows[-1]['method']}: {rows[-1]['seconds']:.3f} s")
    if peer is not None:
        rows.append({"fit": fit.name, "method": f"{label} -nthreads {args.nthreads}, file to file", "voxels": voxels,
                     "seconds": peer["seconds"], "cpu_s": peer["cpu_s"]})
        for row in rows:
            row["ratio"] = ratio(peer["seconds"], row["seconds"])
            row["cpu_ratio"] = ratio(peer["cpu_s"], row["cpu_s"])
        report.table(
            f"{fit.name}: ours against {label}, per-voxel relative L2 over {voxels} voxels", agreements,
            [Column("backend", "backend"), Column("tissue", "tissue"), Column("within", f"≤ {TOLERANCE:g}", ".5f"),
             Column("median", "median", ".2e"), Column("p999", "p99.9", ".2e"), Column("max", "max", ".2e")])
    for row in rows:
        row["voxels_per_s"] = row["voxels"] / row["seconds"]
    return rows


def _central_crop(mask: np.ndarray, voxels: int) -> np.ndarray:
    """The mask's voxels in the grid's central cube of about ``voxels`` voxels."""
    side = math.ceil(voxels ** (1 / 3))
    crop = np.zeros_like(mask)
    crop[tuple(slice(max(0, (n - side) // 2), (n - side) // 2 + side) for n in mask.shape)] = True
    return crop & mask


def _dipy_basis_to_mrtrix(lmax: int) -> np.ndarray:
    """T with mrtrix coefficients = dipy coefficients @ T, for DIPY's default real SH basis
    (descoteaux07, as its CSD models use it), from both bases' values on 2,000 directions."""
    from dipy.core.geometry import cart2sphere
    from dipy.reconst import shm

    from gpu.sh_basis import real_sh_matrix

    directions = np.random.default_rng(0).standard_normal((2000, 3))
    directions /= np.linalg.norm(directions, axis=1)[:, None]
    _, theta, phi = cart2sphere(*directions.T)
    m, l = shm.sph_harm_ind_list(lmax)
    theirs = shm.real_sh_descoteaux_from_index(m, l, theta[:, None], phi[:, None])
    return np.linalg.lstsq(real_sh_matrix(lmax, directions), theirs, rcond=None)[0].T


def dipy_comparison(fits: list[Fit], voxels: int, report: Report) -> None:
    """DIPY's multi-shell CSD (``MultiShellDeconvModel``, its QP solved by cvxpy) and CSD
    (``ConstrainedSphericalDeconvModel``, its own defaults: τ = 0.1, λ = 1) on a central crop
    of the mask, given the same responses, one voxel after another as DIPY fits them, beside
    ours (CPU backend) on the same voxels: seconds and the per-voxel relative L2 of DIPY's
    FODs against ours (which equal dwi2fod's to ~1e-7), DIPY's SH basis converted to MRtrix3's."""
    import dipy
    from dipy.core.gradients import gradient_table
    from dipy.reconst.csdeconv import AxSymShResponse, ConstrainedSphericalDeconvModel
    from dipy.reconst.mcsd import MultiShellDeconvModel, MultiShellResponse, have_cvxpy

    rows = []
    for fit in fits:
        crop = _central_crop(fit.mask, voxels)
        gtab = gradient_table(fit.bvals, bvecs=fit.bvecs)
        if fit.name == "csd":
            response = fit.responses[0].ravel()
            model = ConstrainedSphericalDeconvModel(gtab, AxSymShResponse(1.0, response), sh_order_max=8)
        elif not have_cvxpy:
            Report.progress("DIPY's multi-shell CSD needs cvxpy (pip install cvxpy): left out")
            continue
        else:
            wm, gm, csf = fit.responses
            shells = np.array([0.0, *sorted(set(fit.bvals[fit.bvals > 0]))])
            model = MultiShellDeconvModel(gtab, MultiShellResponse(np.column_stack([csf[:, 0], gm[:, 0], wm]), 8,
                                                                   shells), sh_order_max=8)
        started = time.perf_counter()
        theirs_fit = model.fit(fit.dwi, mask=crop)
        dipy_seconds = time.perf_counter() - started
        result = []
        ours_seconds = time_host(lambda: result.append(fit.ours(fit.dwi, fit.bvals, fit.bvecs, fit.responses, crop,
                                                                "cpu")), repeats=3).best_wall
        ours = result[-1]
        to_mrtrix = _dipy_basis_to_mrtrix(8)
        if fit.name == "csd":
            theirs = [theirs_fit.shm_coeff @ to_mrtrix]
        else:
            coeffs = theirs_fit.all_shm_coeff
            theirs = [coeffs[..., 2:] @ to_mrtrix, coeffs[..., 1:2], coeffs[..., 0:1]]
        n = int(crop.sum())
        for tissue, values in zip(fit.tissues, agreement(ours, theirs, crop)):
            rows.append({"fit": fit.name, "tissue": tissue, "voxels": n, "dipy_s": dipy_seconds, "ours_s": ours_seconds,
                         "ratio": ratio(dipy_seconds, ours_seconds), **values})
        Report.progress(f"DIPY {fit.name} on {n} voxels: {dipy_seconds:.2f} s, ours (cpu) {ours_seconds:.3f} s")
    if rows:
        report.table(
            f"DIPY {dipy.__version__} (one voxel after another, one core) against ours (CPU backend, "
            f"{len(os.sched_getaffinity(0))} threads) on a central crop of the mask; per-voxel relative L2 of DIPY's "
            "FOD against ours", rows,
            [Column("fit", "fit"), Column("tissue", "tissue"), Column("voxels", "voxels", "d"),
             Column("dipy_s", "DIPY s", ".2f"), Column("ours_s", "ours s", ".3f"),
             Column("ratio", "DIPY ÷ ours", ".1f"), Column("median", "rel L2 median", ".2e"),
             Column("p999", "p99.9", ".2e"), Column("max", "max", ".2e")],
            note="the same model, other settings: DIPY's CSD thresholds at τ = 0.1 of the mean FOD amplitude on its "
                 "default sphere, dwi2fod csd at 0 on 300 directions; DIPY's multi-shell fit constrains the FOD on its "
                 "default hemisphere, dwi2fod msmt_csd on 300 directions")


def solver_only(args: argparse.Namespace, report: Report, phantom: dict, mask: np.ndarray, bvals: np.ndarray,
                bvecs: np.ndarray, responses: list[np.ndarray]) -> None:
    """The CUDA solve alone on the mask's voxels, and a sample of them against the CPU backend."""
    from gpu.fod import backend_cpu, backend_cuda
    from gpu.fod.csd_problem import csd_problem
    from gpu.fod.msmt_problem import msmt_problem

    if not cuda_available():
        raise SystemExit("--solver-only times the CUDA backend: no usable GPU here")
    signals = phantom["dwi"][mask].astype(np.float64)
    fits = [("msmt_csd", msmt_problem(bvals, bvecs, responses), signals)]
    if args.csd:
        problem = csd_problem(bvals, bvecs, responses[0][-1])
        fits.append(("csd", problem, signals[:, problem.volumes]))
    sample = np.sort(np.random.default_rng(args.seed).choice(len(signals), min(args.check_voxels, len(signals)),
                                                             replace=False))
    rows = []
    for name, problem, data in fits:
        solve, check = ((backend_cuda.msmt_csd_cuda, backend_cpu.msmt_csd_cpu) if name == "msmt_csd" else
                        (backend_cuda.csd_cuda, backend_cpu.csd_cpu))
        result = []
        seconds = gpu_time(lambda: result.append(solve(problem, data)), repeats=args.repeats)[0]
        x, niter = result[-1]
        x_cpu, niter_cpu = check(problem, data[sample])
        scale = np.linalg.norm(x_cpu, axis=1)
        scale[scale == 0] = np.inf
        error = np.linalg.norm(x[sample] - x_cpu, axis=1) / scale
        rows.append({"fit": name, "voxels": len(data), "volumes": data.shape[1], "seconds": seconds,
                     "voxels_per_s": len(data) / seconds, "niter": float(niter.mean()),
                     "same_niter": float((niter[sample] == niter_cpu).mean()), "max_error": float(error.max())})
        Report.progress(f"{name}: {seconds:.4f} s, {len(data) / seconds:.3g} voxels/s")
    report.table(
        f"CUDA solve alone, {'×'.join(map(str, args.shape))} grid; CUDA events, mean of {args.repeats} after a "
        f"warm-up; {len(sample)} voxels against the CPU backend", rows,
        [Column("fit", "fit"), Column("voxels", "voxels", "d"), Column("volumes", "volumes", "d"),
         Column("seconds", "GPU s", ".4f"), Column("voxels_per_s", "voxels/s", ".3g"),
         Column("niter", "mean iterations", ".1f"), Column("same_niter", "same iterations as CPU", ".5f"),
         Column("max_error", "max relative L2 vs CPU", ".2e")])


_COHORT_AFFINE = np.diag([2.0, 2.0, 2.0, 1.0])


def _write_cohort_phantom(path: Path, seed: int, phantom_args: dict) -> Path:
    import nibabel

    from worker.io.nifti import save_nifti_atomic

    dwi = dwi_phantom(seed=seed, **phantom_args)["dwi"]
    return save_nifti_atomic(nibabel.Nifti1Image(dwi.astype(np.float32), _COHORT_AFFINE), path, threads=1)


def write_dwi_cohort(folder: Path, subjects: int, distinct: int, phantom_args: dict, mask: np.ndarray) -> list[Path]:
    """``subjects`` DWIs ``sub-NNN.nii.gz`` in ``folder``, ``distinct`` of them phantoms
    (:func:`gpu.fod.dwi_phantom` with ``phantom_args``, seeds 1000 + i, one process each),
    the others links to them; each with its ``.bval``, ``.bvec`` (the phantom's directions as
    ``-fslgrad`` reads them for the image's affine) and ``_mask.nii.gz`` beside it."""
    import nibabel
    from concurrent.futures import ProcessPoolExecutor

    from worker.io.gradients import write_fsl_gradients
    from worker.io.nifti import save_nifti_atomic

    folder.mkdir(parents=True, exist_ok=True)
    names = [folder / f"sub-{index:03d}" for index in range(subjects)]
    written = names[: min(distinct, subjects)]
    with ProcessPoolExecutor(min(len(written), len(os.sched_getaffinity(0)))) as pool:
        list(pool.map(_write_cohort_phantom, [Path(f"{name}.nii.gz") for name in written],
                      [1000 + index for index in range(len(written))], [phantom_args] * len(written)))
    for index, name in enumerate(names):
        if index >= len(written):
            link = Path(f"{name}.nii.gz")
            link.unlink(missing_ok=True)
            link.symlink_to(f"{written[index % len(written)].name}.nii.gz")
        write_fsl_gradients(Path(f"{name}.bvec"), Path(f"{name}.bval"),
                            np.column_stack([phantom_args["bvecs"], phantom_args["bvals"]]), _COHORT_AFFINE)
        save_nifti_atomic(nibabel.Nifti1Image(mask.astype(np.uint8), _COHORT_AFFINE), Path(f"{name}_mask.nii.gz"))
    return [Path(f"{name}.nii.gz") for name in names]


def cohort(args: argparse.Namespace, report: Report, shape: tuple[int, int, int], bvals: np.ndarray,
           bvecs: np.ndarray, mask: np.ndarray, responses: list[np.ndarray]) -> None:
    """The cohort batch (module docstring), once per ``--gpus`` value."""
    from bench import gpu_utilization
    from bench.batch import run_local
    from worker.batch import default_processes, fod_items
    from worker.params.fod import FodParams

    with tempfile.TemporaryDirectory() as tmp:
        folder = args.workdir or Path(tmp)
        started = time.perf_counter()
        inputs = write_dwi_cohort(folder / "dwi", args.cohort, args.distinct,
                                  {"shape": shape, "bvals": bvals, "bvecs": bvecs, "snr": args.snr}, mask)
        shells = [0.0, *sorted(set(bvals[bvals > 0]))]
        group = [folder / f"group_{tissue}.txt" for tissue in TISSUES]
        for path, response in zip(group, responses):
            write_response(path, response, shells)
        Report.progress(f"{args.cohort} subjects ({min(args.distinct, args.cohort)} distinct), "
                        f"{(folder / 'dwi' / 'sub-000.nii.gz').stat().st_size / 1e6:.0f} MB .nii.gz each, written in "
                        f"{time.perf_counter() - started:.0f} s; {len(os.sched_getaffinity(0))} cores")
        params = FodParams(backend="cuda" if "cuda" in args.backends and cuda_available() else "cpu",
                           peaks=args.peaks)
        rows = []
        for gpus in args.gpus:
            devices = gpus.split(",")
            processes = args.processes_per_gpu or default_processes(len(devices), "fod")
            out = folder / f"out-{gpus}"
            out.mkdir(parents=True, exist_ok=True)
            items = fod_items(inputs, out, () if args.estimate_responses else group)
            result = run_local(items, params, devices, processes, folder / f"nvidia-smi-{gpus}.csv")
            utilization, per_gpu = gpu_utilization.describe_utilization(result["gpu_utilization"], devices)
            rows.append({"run": f"{len(devices)} GPU(s) ({gpus}), {processes} process(es) each",
                         "wall_s": result["wall"], "per_s": result["rates"][0] / 3600,
                         "gpu_util": utilization, "per_gpu": per_gpu,
                         "cores": result["cpu"] / result["wall"], **result["stages"]})
            rows[-1]["speedup"] = rows[-1]["per_s"] / rows[0]["per_s"]
            Report.progress(f"{rows[-1]['run']}: {result['wall']:.1f} s")
            shutil.rmtree(out, ignore_errors=True)
    report.table(
        f"Cohort batch, DWI to {'responses, ' if args.estimate_responses else ''}FODs"
        f"{' and peaks' if args.peaks else ''}: {args.cohort} subjects "
        f"{'×'.join(map(str, shape))} × {bvals.size} volumes ({int(mask.sum())} mask voxels), .nii.gz, backend "
        f"{params.backend}", rows,
        [Column("run", "run"), Column("wall_s", "wall s", ".1f"), Column("per_s", "subjects/s", ".2f"),
         Column("speedup", "÷ first run", ".2f"),
         Column("gpu_util", "GPU util"), Column("per_gpu", "per GPU"), Column("cores", "cores", ".1f"),
         Column("read", "read s", ".2f"), Column("compute", "fit s", ".2f")]
        + ([Column("estimate", "of it estimating s", ".2f")] if args.estimate_responses else [])
        + [Column("write", "write s", ".2f")],
        note="subjects/s: over the whole run; GPU util: nvidia-smi's utilization.gpu from the 10th percentile "
             "subject's end to the last's; read/fit/write: mean seconds per subject of each stage (fit includes the "
             "responses' estimation with --estimate-responses, write the peaks with --peaks)")


def response_estimation(args: argparse.Namespace, report: Report, shape: tuple[int, int, int], bvals: np.ndarray,
                        bvecs: np.ndarray, mask: np.ndarray, backends: list[str]) -> None:
    """``--responses``: the module docstring's response estimation rows."""
    from worker.jobs.fod.response import run_response
    from worker.params.fod import ResponseParams

    peer = shutil.which("dwi2response")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.workdir or Path(tmp)
        [dwi] = write_dwi_cohort(folder / "dwi", 1, 1, {"shape": shape, "bvals": bvals, "bvecs": bvecs,
                                                       "snr": args.snr}, mask)
        inputs = {"bval": dwi.with_suffix("").with_suffix(".bval"), "bvec": dwi.with_suffix("").with_suffix(".bvec"),
                  "mask": Path(str(dwi).replace(".nii.gz", "_mask.nii.gz"))}
        for algorithm in ("dhollander", "tournier"):
            theirs, peer_seconds, first = None, None, None
            if peer is not None:
                prefix = folder / f"theirs_{algorithm}"
                outputs = [f"{prefix}_{t}.txt" for t in (TISSUES if algorithm == "dhollander" else ("wm",))]
                command = [peer, algorithm, str(dwi), *outputs, "-fslgrad", str(inputs["bvec"]), str(inputs["bval"]),
                           "-mask", str(inputs["mask"]), "-scratch", str(folder), "-force", "-quiet",
                           "-nthreads", str(args.nthreads)]
                runs = [child_seconds(command) for _ in range(args.peer_repeats)]
                cpu, peer_seconds = min(runs, key=lambda run: run[1])
                theirs = read_response(outputs[0])[0]
                rows.append({"algorithm": algorithm, "side": f"dwi2response ({args.nthreads} threads)",
                             "seconds": peer_seconds, "cpu_s": cpu, "ratio": 1.0})
            for backend in backends:
                out = folder / f"ours_{algorithm}_{backend}"
                out.mkdir(exist_ok=True)
                sidecars = []
                timing = time_host(lambda: sidecars.append(run_response(
                    dwi, out / "r", ResponseParams(algorithm=algorithm, backend=backend), **inputs)), args.repeats)
                ours = read_response(out / "r_wm.txt")[0]
                row = {"algorithm": algorithm, "side": f"fibertensor response ({backend})", "seconds": timing.best_wall,
                       "estimate_s": min(s["seconds"]["estimate"] for s in sidecars[1:]),
                       "cpu_s": min(timing.cpu), "ratio": ratio(peer_seconds, timing.best_wall)}
                if theirs is not None:
                    row["l0_rel"] = float(np.max(np.abs(ours[:, 0] - theirs[:, 0]) / np.abs(theirs[:, 0])))
                if first is None:
                    first = ours
                else:
                    row["l0_backends"] = float(np.max(np.abs(ours[:, 0] - first[:, 0]) / np.abs(first[:, 0])))
                rows.append(row)
    report.table(f"Response estimation, {shape[0]}×{shape[1]}×{shape[2]} phantom, {int(mask.sum())} mask voxels, "
                 f"{bvals.size} volumes; file to file", rows,
                 [Column("algorithm", "algorithm"), Column("side", "side"), Column("seconds", "wall s", ".2f"),
                  Column("estimate_s", "estimation s", ".2f"), Column("cpu_s", "CPU s", ".2f"),
                  Column("ratio", "dwi2response ÷ ours", ".2f"), Column("l0_rel", "WM l=0 vs dwi2response", ".2e"),
                  Column("l0_backends", f"WM l=0 vs {backends[0]}", ".2e")],
                 note="ours best of --repeats after a warm-up; estimation s: the job's own timing without the read")


# Runs `fibertensor` with the slab threshold (worker.jobs.fod.plan.FIT_IN_MEMORY_BYTES) set.
_WITH_SLAB_THRESHOLD = ("import sys, worker.jobs.fod.plan as plan; plan.FIT_IN_MEMORY_BYTES = int(sys.argv[1]); "
                        "from service.cli import run; sys.argv = ['fibertensor', *sys.argv[2:]]; run()")


def _peak_rss_run(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, peak resident GB) of one child process."""
    import subprocess

    started = time.perf_counter()
    child = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise SystemExit(f"the fod run exited with {child.returncode}: {' '.join(command[3:])}")
    return time.perf_counter() - started, usage.ru_maxrss / 2**20


def slab_fit(args: argparse.Namespace, report: Report, shape: tuple[int, int, int], bvals: np.ndarray,
             bvecs: np.ndarray, mask: np.ndarray, responses: list[np.ndarray], backend: str) -> None:
    """``--slabs``: the module docstring's rows."""
    import json

    from worker.provenance import file_sha256

    with tempfile.TemporaryDirectory() as tmp:
        folder = args.workdir or Path(tmp)
        [dwi] = write_dwi_cohort(folder / "dwi", 1, 1, {"shape": shape, "bvals": bvals, "bvecs": bvecs,
                                                       "snr": args.snr}, mask)
        shells = [0.0, *sorted(set(bvals[bvals > 0]))]
        group = [folder / f"group_{tissue}.txt" for tissue in TISSUES]
        for path, response in zip(group, responses):
            write_response(path, response, shells)
        stem = str(dwi).removesuffix(".nii.gz")
        modes = {"slabs": (0, {}), "whole": (1 << 62, {"FIBERTENSOR_MAX_JOB_MEMORY_BYTES": str(1 << 40)})}
        rows, digests = [], {}
        for round_ in range(args.repeats + 1):
            for mode, (threshold, variables) in modes.items():
                out = folder / mode
                shutil.rmtree(out, ignore_errors=True)
                out.mkdir()
                command = [sys.executable, "-c", _WITH_SLAB_THRESHOLD, str(threshold), "fod", str(dwi),
                           str(out / "sub"), "--bval", f"{stem}.bval", "--bvec", f"{stem}.bvec", "--mask",
                           f"{stem}_mask.nii.gz", "--response", *map(str, group), "--backend", backend, "--quiet"]
                wall, rss = _peak_rss_run(command, child_environment(**variables))
                seconds = json.loads((out / "sub_fod.json").read_text())["seconds"]
                digests[mode] = file_sha256(out / "sub_wmfod.nii.gz")
                if round_:
                    rows.append({"mode": mode, "round": round_, "wall": wall, "read": seconds["read"],
                                 "fit": seconds["fit"], "rss": rss})
        same = digests["slabs"] == digests["whole"]
        for row in rows:
            row["same"] = "yes" if same else "NO"
    report.table(f"A fresh fibertensor fod ({backend}) in slabs from a memory map and whole, {shape[0]}×{shape[1]}×"
                 f"{shape[2]}, {bvals.size} volumes, {int(mask.sum())} mask voxels, .nii.gz", rows,
                 [Column("mode", "fit"), Column("round", "round", "d"), Column("wall", "wall s", ".2f"),
                  Column("read", "read s", ".2f"), Column("fit", "fit s", ".2f"), Column("rss", "peak RSS GB", ".2f"),
                  Column("same", "same WM FOD bytes")],
                 note="slabs forced (threshold 0); whole with the threshold and FIBERTENSOR_MAX_JOB_MEMORY_BYTES "
                      "raised; peak RSS of the slab run includes the mapped files' pages")


def run(args: argparse.Namespace, report: Report) -> None:
    backends = [b for b in args.backends if b == "cpu" or cuda_available()]
    if backends != args.backends:
        Report.progress("no usable GPU: the cuda backend is left out")
    if args.repeats < 1 or args.peer_repeats < 1:
        raise SystemExit("--repeats and --peer-repeats must be at least 1")
    exe = _dwi2fod(args)
    shape = tuple(args.shape)
    bvals, bvecs = shell_scheme(args.b0, args.shells, seed=args.seed)
    mask = ellipsoid_mask(shape) if args.mask == "ellipsoid" else np.ones(shape, bool)
    responses = tissue_responses([0.0, *sorted(b for b, _ in args.shells)], lmax=8)
    if args.cohort:
        cohort(args, report, shape, bvals, bvecs, mask, responses)
        return
    if args.responses:
        response_estimation(args, report, shape, bvals, bvecs, mask, backends)
        return
    if args.slabs:
        slab_fit(args, report, shape, bvals, bvecs, mask, responses, backends[-1])
        return
    started = time.perf_counter()
    phantom = dwi_phantom(shape, bvals, bvecs, snr=args.snr, seed=args.seed)
    Report.progress(f"phantom {shape}, {bvals.size} volumes (b=0 ×{args.b0}, "
                    + ", ".join(f"{b:g} ×{n}" for b, n in args.shells)
                    + f"), SNR {args.snr:g}: {int(mask.sum())} of {math.prod(shape)} voxels in the mask, "
                    f"made in {time.perf_counter() - started:.1f} s")
    if args.solver_only:
        solver_only(args, report, phantom, mask, bvals, bvecs, responses)
        return
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.workdir or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        fits = [Fit("msmt_csd", folder, phantom["dwi"], bvals, bvecs, responses, TISSUES, mask)]
        if args.csd:
            single = (bvals == 0) | (bvals == bvals.max())
            fits.append(Fit("csd", folder, phantom["dwi"][..., single], bvals[single], bvecs[single],
                            [responses[0][-1:]], ("wm",), mask))
        for fit in fits:
            rows += _measure(fit, args, backends, exe, report)
        if args.dipy_voxels > 0:
            dipy_comparison(fits, args.dipy_voxels, report)
    report.table(
        f"From DWI to FODs, {shape[0]}×{shape[1]}×{shape[2]} grid; ours best of {args.repeats}, "
        f"dwi2fod best of {args.peer_repeats}", rows,
        [Column("fit", "fit"), Column("method", "method"), Column("voxels", "voxels", "d"),
         Column("seconds", "wall s", ".3f"), Column("cpu_s", "CPU s", ".2f"), Column("gpu_s", "GPU s", ".4f"),
         Column("voxels_per_s", "voxels/s", ".3g"), Column("ratio", "dwi2fod ÷ ours, wall", ".2f"),
         Column("cpu_ratio", "CPU s", ".2f"), Column("within", f"voxels ≤ {TOLERANCE:g}", ".5f")],
        note=f"voxels ≤ {TOLERANCE:g}: the worst tissue's fraction of voxels whose relative L2 against dwi2fod "
             "is at most that")


def main() -> None:
    run_benchmark(__doc__, add_arguments, run)


if __name__ == "__main__":
    main()
