"""The host CPU of each stage of one peaks job on an MRtrix ``.mif`` subject in ``dwi2fod``'s
layout (each voxel's coefficients together, x fastest: ``mrconvert -strides 2,3,4,1``), the
input of the local cohort batch: the read (with the input's sha256), the finite-value pass,
the peaks image, each output's write (``.mif``, as the input is), the fODF metrics, the QC
picture and the sidecar, each stage alone in this thread.

    TMPDIR=/dev/shm python3 bench/peaks_host_stages.py [--shape 96 96 60] [--repeats 5] [--cache DIR]

Makes the phantom FOD (``gpu.peaks.fod_phantom``, lmax 8, a few voxels NaN or infinite),
writes it as NIfTI and converts it with ``mrconvert -strides 2,3,4,1``, then computes its
peaks once with the CPU backend (the CUDA backend returns them in the same voxel-major
layout: ``gpu.peaks.search._to_spatial``). ``--cache DIR`` keeps the image and the peaks
for the next run. Prints the process CPU (``time.process_time``, all threads) of each
stage's first call and the median of ``--repeats``, in milliseconds. The outputs go to new
files in the temporary folder: on a disk, the kernel's writeback of the earlier stages'
files slows the later writes by several times, hence ``TMPDIR=/dev/shm`` (a job's write
into the page cache, without the disk).
"""

from __future__ import annotations

import argparse
import itertools
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nibabel as nib
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu.peaks.phantom import fod_phantom  # noqa: E402
from gpu.peaks.search import finite_voxels  # noqa: E402
from worker.io.atomic import write_json_atomic  # noqa: E402
from worker.io.images import load_image_data_with_sha256, read_image_header, save_image  # noqa: E402
from worker.jobs.peaks import (  # noqa: E402
    PeaksOutputs, compute_peaks, plan_peaks, read_peaks_inputs, write_peaks_outputs,
)
from worker.jobs.peaks.arrays import fodf_metrics_of, peaks_image  # noqa: E402
from worker.params.peaks import PeaksParams  # noqa: E402
from worker.qc_picture import write_peaks_qc_png  # noqa: E402


def cpu_ms(function, repeats: int) -> tuple[float, float]:
    """The first and the median process CPU milliseconds (all threads) of ``repeats`` calls."""
    times = []
    for _ in range(repeats):
        started = time.process_time()
        function()
        times.append(1e3 * (time.process_time() - started))
    return times[0], float(np.median(times))


def subject(folder: Path, shape: tuple[int, int, int]) -> tuple[Path, object]:
    """The ``.mif`` subject in ``folder`` and its peaks, made (and kept there) if missing."""
    mif, peaks = folder / "fod.mif", folder / "peaks.pkl"
    if not mif.exists():
        sh = fod_phantom(shape, 8)["sh"].astype(np.float32)
        sh[:4, 2, 3, 3] = np.nan  # a few voxels the finite pass must find
        sh[5, 5, 5, :] = np.inf
        affine = np.diag([2.0, 2.0, 2.0, 1.0])
        nib.save(nib.Nifti1Image(sh, affine), folder / "fod.nii")
        subprocess.run(["mrconvert", "-quiet", "-force", "-strides", "2,3,4,1", folder / "fod.nii", mif], check=True)
        peaks.unlink(missing_ok=True)
    if not peaks.exists():
        plan = plan_peaks(mif, None, PeaksParams(backend="cpu"))
        result = compute_peaks(plan, read_peaks_inputs(plan))
        peaks.write_bytes(pickle.dumps(result, protocol=5))  # keeps the arrays' strides
    return mif, pickle.loads(peaks.read_bytes())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", type=int, nargs=3, default=[96, 96, 60])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cache", type=Path, help="folder keeping the subject and its peaks between runs")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as scratch:
        folder = args.cache or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        fod, result = subject(folder, tuple(args.shape))
        out = Path(scratch) / "out"
        out.mkdir()
        info = read_image_header(fod, "FOD")
        sh, _ = load_image_data_with_sha256(info)
        params = PeaksParams()
        maps = fodf_metrics_of(sh, result)  # compiles or loads them before timing
        image = peaks_image(result.directions, result.amplitudes)
        amplitudes, count = result.amplitudes.astype(np.float32, copy=False), result.count.astype(np.uint8, copy=False)
        title = f"{fod.name}: lmax 8, K = 3 peaks, mrtrix basis"
        write_peaks_qc_png(out / "warm.png", result.directions, result.amplitudes, result.count, info.zooms[:3], title,
                           affine=info.affine, npeaks=3)
        plan = plan_peaks(fod, None, params)
        inputs = read_peaks_inputs(plan)
        sidecar = write_peaks_outputs(plan, inputs, result, PeaksOutputs.in_folder(out / "whole"))

        fresh = itertools.count()  # a new file each call, as a job writes

        def write(name: str, data: np.ndarray) -> None:
            save_image(info, data, out / f"{name}{next(fresh)}.mif")

        stages = {
            "read (with sha256)": lambda: load_image_data_with_sha256(info),
            "finite_voxels": lambda: finite_voxels(sh),
            "peaks_image": lambda: peaks_image(result.directions, result.amplitudes),
            "write peaks.mif": lambda: write("peaks", image),
            "write amplitudes.mif": lambda: write("amplitudes", amplitudes),
            "write count.mif": lambda: write("count", count),
            "fODF metrics (compiled)": lambda: fodf_metrics_of(sh, result),
            **{f"write {name}.mif": (lambda name=name: write(name, getattr(maps, name))) for name in params.metrics},
            "QC picture (compiled)": lambda: write_peaks_qc_png(
                out / f"qc{next(fresh)}.png", result.directions, result.amplitudes, result.count, info.zooms[:3], title,
                affine=info.affine, npeaks=3),
            "sidecar": lambda: write_json_atomic(out / f"peaks{next(fresh)}.json", sidecar),
            "write_peaks_outputs (all, threads)": lambda: write_peaks_outputs(
                plan, inputs, result, PeaksOutputs.in_folder(out / f"whole{next(fresh)}")),
        }
        print(f"{fod.name}: {info.shape} float32, strides {sh.strides}; peaks' strides "
              f"{result.directions.strides}; first and median of {args.repeats}")
        print(f"{'stage':<36} {'first':>8} {'median':>8}  (CPU ms)")
        for name, stage in stages.items():
            print(f"{name:<36} {'{:8.1f} {:8.1f}'.format(*cpu_ms(stage, args.repeats))}")


if __name__ == "__main__":
    main()
