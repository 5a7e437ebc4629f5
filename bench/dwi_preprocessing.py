"""Brain mask and intensity normalisation: ``fibertensor mask`` against MRtrix3's ``dwi2mask``
and ``fibertensor mtnormalise`` against ``mtnormalise``, each a fresh process file to file
with the peer on all host cores, on a phantom head in noise.

    python3 -m bench.dwi_preprocessing [--shape 96 96 60] [--repeats 3] [--nthreads N] [--json PATH]

The DWI: :func:`gpu.fod.dwi_phantom` (b = 0 ×5, 1000 ×30, 2000 ×60, SNR 20) in the bench's
ellipsoid, Rician-like noise alone outside it, written as ``.nii``. The compartments
normalised: the phantom's tissue fractions as the WM FOD's l = 0 term (its other 44 terms
small noise), GM and CSF, each times a smooth bias field, in ``dwi2mask``'s mask. Seconds:
the best of ``--repeats`` runs of each command after one untimed run. Agreement: voxels whose
mask differs; the largest relative difference of the normalised WM FOD's values.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.harness import Column, Report, child_environment, ratio, run_benchmark

__all__ = ["run"]


def add_arguments(parser) -> None:
    parser.add_argument("--shape", type=int, nargs=3, default=(96, 96, 60), metavar=("X", "Y", "Z"))
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of each command, after one untimed")
    parser.add_argument("--nthreads", type=int, default=len(os.sched_getaffinity(0)),
                        help="the peers' -nthreads (default: the host's cores)")
    parser.add_argument("--seed", type=int, default=0)


def _best(command: list[str], repeats: int, env=None) -> float:
    subprocess.run(command, check=True, capture_output=True, env=env)
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True, env=env)
        best = min(best, time.perf_counter() - started)
    return best


def _head(folder: Path, shape, seed: int) -> dict[str, Path]:
    from bench.fod import ellipsoid_mask
    from gpu.fod import dwi_phantom, shell_scheme
    from worker.io.gradients import write_fsl_gradients
    from worker.io.images import write_image

    bvals, bvecs = shell_scheme(5, ((1000, 30), (2000, 60)), seed=seed)
    phantom = dwi_phantom(shape, bvals, bvecs, snr=20.0, seed=seed)
    inside = ellipsoid_mask(shape)
    dwi = phantom["dwi"]
    rng = np.random.default_rng(seed)
    sigma = float(dwi[inside][:, 0].mean()) / 20
    dwi[~inside] = np.abs(rng.normal(0, sigma, ((~inside).sum(), dwi.shape[3]))).astype(np.float32)
    affine = np.diag([2.0, 2.0, 2.0, 1.0])
    paths = {"dwi": write_image(folder / "dwi.nii", dwi, affine)}
    paths["bvec"], paths["bval"] = write_fsl_gradients(folder / "dwi.bvec", folder / "dwi.bval",
                                                       np.column_stack([bvecs, bvals]), affine)
    x, y, z = np.indices(shape)
    bias = (1 + 0.2 * np.sin(x / (shape[0] / 4)) + 0.1 * z / shape[2]).astype(np.float32)
    fractions = phantom["fractions"]
    wm = rng.normal(0, 0.01, shape + (45,)).astype(np.float32)
    wm[..., 0] = 0.28209479177 * fractions[..., 0]
    for name, image in (("wmfod", wm * bias[..., None]), ("gm", 0.28209479177 * fractions[..., 1] * bias),
                        ("csf", 0.28209479177 * fractions[..., 2] * bias)):
        paths[name] = write_image(folder / f"{name}.nii", np.asarray(image, np.float32), affine)
    return paths


def run(args, report: Report) -> None:
    from worker.io.images import load_image_data, read_image_header

    def image(path):
        return load_image_data(read_image_header(path, "image"))

    shape = tuple(args.shape)
    env = child_environment()
    ours = [sys.executable, "-m", "service"]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        paths = _head(folder, shape, args.seed)
        gradients = ["-fslgrad", str(paths["bvec"]), str(paths["bval"])]
        peer_mask = ["dwi2mask", "-quiet", "-force", "-nthreads", str(args.nthreads), *gradients, str(paths["dwi"]),
                     str(folder / "theirs_mask.nii")]
        our_mask = [*ours, "mask", str(paths["dwi"]), str(folder / "ours"), "--bval", str(paths["bval"]), "--bvec",
                    str(paths["bvec"]), "--quiet"]
        rows = [{"step": "brain mask", "peer": "dwi2mask", "peer_s": _best(peer_mask, args.repeats),
                 "ours_s": _best(our_mask, args.repeats, env)}]
        mask = image(folder / "theirs_mask.nii") > 0
        rows[0]["agreement"] = f"{int(((image(folder / 'ours_mask.nii') > 0) != mask).sum())} of " \
                               f"{int(mask.sum())} voxels differ"
        tissues = ("wmfod", "gm", "csf")
        peer_norm = ["mtnormalise", "-quiet", "-force", "-nthreads", str(args.nthreads),
                     *[str(p) for t in tissues for p in (paths[t], folder / f"theirs_{t}.nii")],
                     "-mask", str(folder / "theirs_mask.nii")]
        our_norm = [*ours, "mtnormalise", *[str(paths[t]) for t in tissues], str(folder / "ours"), "--mask",
                    str(folder / "theirs_mask.nii"), "--quiet"]
        rows.append({"step": "intensity normalisation", "peer": "mtnormalise",
                     "peer_s": _best(peer_norm, args.repeats), "ours_s": _best(our_norm, args.repeats, env)})
        theirs_wm, ours_wm = image(folder / "theirs_wmfod.nii"), image(folder / "ours_wmfod.nii")
        rows[1]["agreement"] = (f"WM FOD values within {np.abs(ours_wm - theirs_wm).max() / np.abs(theirs_wm).max():.1e}"
                                " of the largest")
    for row in rows:
        row["ratio"] = ratio(row["peer_s"], row["ours_s"])
    report.table(f"DWI preprocessing, {shape[0]}×{shape[1]}×{shape[2]} phantom head in noise, 95 volumes; fresh "
                 f"processes file to file, best of {args.repeats}; peers with -nthreads {args.nthreads}", rows,
                 [Column("step", "step"), Column("peer", "peer"), Column("peer_s", "peer s", ".3f"),
                  Column("ours_s", "ours s", ".3f"), Column("ratio", "peer ÷ ours", ".2f"),
                  Column("agreement", "agreement")])


def main() -> None:
    run_benchmark(__doc__, add_arguments, run)


if __name__ == "__main__":
    main()
