"""Fixels benchmark: our ``fixels`` job (CPU, and CUDA where a GPU is there) against MRtrix3's
``fod2fixel -afd -peak_amp -disp`` with all host cores, file to file, on two FODs.

    python3 -m bench.fixels [--shape X Y Z] [--lmax 8] [--data phantom csd] [--repeats 3] [--json PATH]

The FODs, each written as ``.mif``: the phantom FOD (:func:`gpu.peaks.phantom.fod_phantom`,
1–3 fibres a voxel, every voxel), and a CSD FOD (:func:`csd_fod`: the CSD fit of DWI
simulated by :func:`gpu.fod.dwi_phantom` at b = 0 and 3000, SNR 20, in its ellipsoid mask,
with the noise lobes real data has). "ours" is
:func:`worker.jobs.fixels.run_fixels` in this process (read, segment, write the directory
and sidecar; numba's compile or cache load is in the untimed warm-up call); "fod2fixel" is
the command with ``-nthreads`` = the host's cores; "fibertensor fixels" is our CLI as a fresh
process, as the peer runs (start-up, imports and the FMLS tables included; its CPU row says
whether the loop ran from its ahead-of-time build, which ``fibertensor warmup --backend cpu
--family fixels`` makes, or from numba's code); "FMLS kernels" are
the three CUDA kernels alone on every voxel of the phantom, between CUDA events after a
warm-up launch (the mean of ``--repeats``). Other seconds are the best of ``--repeats``.
Agreement, over the voxels: the share with the same fixel count, and over the fixels of
those voxels, matched in order, the relative differences of afd, peak_amp and disp (median,
99th percentile) and the angle between directions (99th percentile, degrees).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from bench.harness import Column, Report, bench_parser, child_environment, gpu_time, ratio, time_host

__all__ = ["read_fixels", "agreement", "kernel_seconds", "csd_fod", "main"]

QUANTITIES = ("afd", "peak_amp", "disp")


def read_fixels(folder: Path) -> dict[str, np.ndarray]:
    """index (X, Y, Z, 2), directions (N, 3) and each quantity (N,) of a ``.mif`` fixel
    directory on an identity-transform grid."""
    from worker.io.images import load_image_data, read_image_header

    def load(name: str) -> np.ndarray:
        return load_image_data(read_image_header(folder / f"{name}.mif", name), None)

    fixels = {"index": load("index").astype(np.int64), "directions": load("directions").reshape(-1, 3)}
    fixels.update({name: load(name).reshape(-1) for name in QUANTITIES})
    return fixels


def agreement(ours: dict[str, np.ndarray], theirs: dict[str, np.ndarray]) -> dict[str, float]:
    """Share of voxels with the same fixel count (%), and over their fixels the relative
    differences of each quantity (median, p99) and the direction angle's p99 (degrees)."""
    count_ours, count_theirs = ours["index"][..., 0], theirs["index"][..., 0]
    same = count_ours == count_theirs
    rows_ours, rows_theirs = [], []
    for voxel in zip(*np.nonzero(same & (count_theirs > 0))):
        n = int(count_theirs[voxel])
        rows_ours.append(np.arange(n) + ours["index"][voxel][1])
        rows_theirs.append(np.arange(n) + theirs["index"][voxel][1])
    a, b = np.concatenate(rows_ours), np.concatenate(rows_theirs)
    out = {"count_equal_pct": 100.0 * float(same.mean()), "fixels": int(count_theirs.sum())}
    for name in QUANTITIES:
        reference = theirs[name][b].astype(np.float64)
        rel = np.abs(ours[name][a].astype(np.float64) - reference) / np.abs(reference)
        out[f"{name}_median"], out[f"{name}_p99"] = float(np.median(rel)), float(np.percentile(rel, 99))
    da, db = ours["directions"][a].astype(np.float64), theirs["directions"][b].astype(np.float64)
    angle = np.degrees(np.arctan2(np.linalg.norm(np.cross(da, db), axis=1), np.abs(np.sum(da * db, axis=1))))
    out["direction_p99_deg"] = float(np.percentile(angle, 99))
    return out


def kernel_seconds(sh: np.ndarray, repeats: int) -> float:
    """GPU seconds of one launch of the FMLS kernels (sample, grow, refine a thread a lobe, write) on
    every voxel of ``sh`` (..., n_coeffs) with the default options, inputs and outputs already
    on the device."""
    from gpu.fixels.backend_cuda import fmls_kernels, launch_fmls, lobe_scratch
    from gpu.fixels.fmls_tables import fmls_tables
    from gpu.fixels.segment import FIRST_CAPACITY, FmlsOptions
    from gpu.sh_basis import lmax_from_ncoeffs

    coeffs = np.ascontiguousarray(sh.reshape(-1, sh.shape[-1]), np.float64)
    n = coeffs.shape[0]
    tables = fmls_tables(lmax_from_ncoeffs(coeffs.shape[1]))
    integral, peak = FmlsOptions().thresholds
    kernels = fmls_kernels()
    api = kernels.api
    d_coeffs = api.to_device(coeffs)
    outputs = (api.device_array(n, np.int32), api.device_array((n, FIRST_CAPACITY, 3), np.float32),
               api.device_array((n, FIRST_CAPACITY), np.float32), api.device_array((n, FIRST_CAPACITY), np.float32))
    scratch = lobe_scratch(api, n)
    return gpu_time(lambda: launch_fmls(kernels, d_coeffs, tables, integral, peak, 1.0, 0, False, *outputs, scratch),
                    repeats)[0]


def csd_fod(shape: tuple[int, int, int], seed: int = 1) -> np.ndarray:
    """The WM FOD (X, Y, Z, 45) float32 that CSD (``dwi2fod csd``'s problem, our solver)
    fits to the phantom's DWI (:func:`gpu.fod.dwi_phantom`: 1–3 fibres, grey matter and CSF
    in partial volume) simulated at b = 0 (×5) and 3000 (×60), SNR 20, inside its ellipsoid
    mask, given its exact WM response: noisy lobes, as in real data."""
    from bench.fod import ellipsoid_mask
    from gpu.fod import csd, dwi_phantom, shell_scheme, tissue_responses

    bvals, bvecs = shell_scheme(5, [(3000, 60)], seed=seed)
    dwi = dwi_phantom(shape, bvals, bvecs, snr=20.0, seed=seed)["dwi"]
    response = tissue_responses([0.0, 3000.0], lmax=8)[0][-1]
    return csd(dwi, bvals, bvecs, response, mask=ellipsoid_mask(shape), backend="auto")


def _data_set_rows(name: str, sh: np.ndarray, folder: Path, backends: list[str], repeats: int) -> list[dict]:
    """The table's rows for FOD ``sh``: fod2fixel, ours in process and as a fresh process on
    each backend, and the kernels alone."""
    from gpu.fixels.fmls import build_present
    from gpu.fixels.fmls_tables import fmls_tables
    from worker.io.images import write_image
    from worker.jobs.fixels import run_fixels
    from worker.params.fixels import FixelsParams

    fod = folder / f"{name}.mif"
    write_image(fod, sh, np.eye(4))
    exe = shutil.which("fod2fixel")
    cores = len(os.sched_getaffinity(0))
    theirs, peer_seconds = None, None
    if exe is not None:
        def peer() -> None:
            shutil.rmtree(folder / "theirs", ignore_errors=True)
            subprocess.run([exe, "-quiet", "-force", "-nthreads", str(cores), str(fod), str(folder / "theirs"),
                            "-afd", "afd.mif", "-peak_amp", "peak_amp.mif", "-disp", "disp.mif"], check=True)

        peer_seconds = time_host(peer, repeats).best_wall
        theirs = read_fixels(folder / "theirs")
    rows = []
    for backend in backends:
        out = folder / f"ours_{backend}"

        def ours() -> None:
            shutil.rmtree(out, ignore_errors=True)
            run_fixels(fod, out, FixelsParams(backend=backend))

        seconds = time_host(ours, repeats).best_wall
        row = {"side": f"ours ({backend})", "seconds": seconds, "ratio": ratio(peer_seconds, seconds)}
        if theirs is not None:
            row.update(agreement(read_fixels(out), theirs))
        rows.append(row)

        def fresh() -> None:
            shutil.rmtree(out, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "service", "fixels", str(fod), str(out), "--backend", backend,
                            "--quiet"], check=True, env=child_environment())

        seconds = time_host(fresh, repeats).best_wall
        # a CPU run takes the loop's ahead-of-time build where fibertensor warmup made one
        how = f"cpu, {'build' if build_present(fmls_tables(8)) else 'numba'}" if backend == "cpu" else backend
        rows.append({"side": f"fibertensor fixels ({how})", "seconds": seconds, "ratio": ratio(peer_seconds, seconds)})
        if backend == "cuda":
            seconds = kernel_seconds(sh, repeats)
            rows.append({"side": "FMLS kernels (cuda, GPU time)", "seconds": seconds,
                         "ratio": ratio(peer_seconds, seconds)})
    if peer_seconds is not None:
        rows.append({"side": f"fod2fixel ({cores} threads)", "seconds": peer_seconds, "ratio": 1.0,
                     "fixels": int(theirs["index"][..., 0].sum())})
    return [{"data": name, **row} for row in rows]


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__.split("\n\n")[0], formatter_class=__import__("argparse").RawDescriptionHelpFormatter)
    parser.add_argument("--shape", type=int, nargs=3, default=(32, 32, 16), metavar=("X", "Y", "Z"),
                        help="phantom grid (default 32 32 16)")
    parser.add_argument("--lmax", type=int, default=8, help="SH degree of the phantom FOD (default 8)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of each side (default 3)")
    parser.add_argument("--data", nargs="+", choices=("phantom", "csd"), default=("phantom", "csd"),
                        help="the FODs: the phantom FOD, and a CSD fit to the simulated DWI (lmax 8) (default both)")
    args = parser.parse_args(argv)

    from gpu.cuda.backend import resolve_backend
    from gpu.peaks.phantom import fod_phantom

    report = Report(args.json)
    backends = ["cpu"] + (["cuda"] if resolve_backend("auto") == "cuda" else [])
    shape = tuple(args.shape)
    data = {"phantom": lambda: fod_phantom(shape, args.lmax, seed=1)["sh"].astype(np.float32),
            "csd": lambda: csd_fod(shape)}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.data:
            rows += _data_set_rows(name, data[name](), Path(tmp), backends, args.repeats)
    report.table(
        f"Fixels: {shape[0]}×{shape[1]}×{shape[2]} grid ({int(np.prod(shape))} voxels), file to file",
        rows,
        [Column("data", "FOD"), Column("side", "side"), Column("seconds", "s", ".3f"),
         Column("ratio", "fod2fixel/ours", ".2f"), Column("fixels", "fixels", "d"),
         Column("count_equal_pct", "count equal %", ".2f"),
         *(Column(f"{name}_{stat}", f"{name} {stat}", ".1e") for name in QUANTITIES for stat in ("median", "p99")),
         Column("direction_p99_deg", "dir p99 °", ".1e")],
        note="FOD: phantom = the phantom FOD at --lmax; csd = CSD (lmax 8) of the simulated DWI, SNR 20, in its "
             "ellipsoid mask; relative differences |ours − fod2fixel| / |fod2fixel| over the fixels of voxels with "
             "equal counts",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
