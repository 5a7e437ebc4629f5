"""The host CPU of each stage of one peaks job on an MRtrix ``.mif`` subject in ``dwi2fod``'s
layout (each voxel's coefficients together, x fastest: ``mrconvert -strides 2,3,4,1``), the
input of the local cohort batch: the read (with the input's sha256), the finite-value pass,
the peaks image, each output's write (``.mif``, as the input is), the fODF metrics, the QC
picture and the sidecar, each stage alone in this thread, and the whole writing stage on
its threads.

Makes the phantom FOD (lmax 8, a few voxels NaN or infinite), writes it as NIfTI and
converts it with ``mrconvert -strides 2,3,4,1``, then computes its peaks once with the CPU
backend (the CUDA backend returns them in the same voxel-major layout). ``--cache DIR``
keeps the image and the peaks for the next run. Prints the process CPU
(``time.process_time``, all threads) of each stage's first call and the median of
``--repeats``. The outputs go to new files in the temporary folder: on a disk, the
kernel's writeback of the earlier stages' files slows the later writes, hence
``TMPDIR=/dev/shm`` (a job's write into the page cache, without the disk).
"""

from __future__ import annotations

import argparse
import itertools
import pickle
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from bench.harness import Column, Report, time_host
from bench.peaks.volume import add_volume_options, make_phantom

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_volume_options(parser, repeats=5)
    parser.add_argument("--cache", type=Path, help="folder keeping the subject and its peaks between runs")


def subject(folder: Path, args: argparse.Namespace) -> tuple[Path, object]:
    """The ``.mif`` subject in ``folder`` and its peaks, made (and kept there) if missing."""
    import nibabel as nib

    from worker.jobs.peaks import compute_peaks, plan_peaks, read_peaks_inputs
    from worker.params.peaks import PeaksParams

    mif, peaks = folder / "fod.mif", folder / "peaks.pkl"
    if not mif.exists():
        sh = make_phantom(args, seed=0)["sh"].astype(np.float32)
        sh[:4, 2, 3, 3] = np.nan  # a few voxels the finite pass must find
        sh[5, 5, 5, :] = np.inf
        nib.save(nib.Nifti1Image(sh, np.diag([2.0, 2.0, 2.0, 1.0])), folder / "fod.nii")
        subprocess.run(["mrconvert", "-quiet", "-force", "-strides", "2,3,4,1", folder / "fod.nii", mif], check=True)
        peaks.unlink(missing_ok=True)
    if not peaks.exists():
        plan = plan_peaks(mif, None, PeaksParams(backend="cpu"))
        result = compute_peaks(plan, read_peaks_inputs(plan))
        peaks.write_bytes(pickle.dumps(result, protocol=5))  # keeps the arrays' strides
    return mif, pickle.loads(peaks.read_bytes())


def run(args: argparse.Namespace, report: Report) -> None:
    from gpu.peaks.search import finite_voxels
    from worker.io.atomic import write_json_atomic
    from worker.io.images import load_image_data_with_sha256, read_image_header, save_image
    from worker.jobs.peaks import PeaksOutputs, plan_peaks, read_peaks_inputs, write_peaks_outputs
    from worker.jobs.peaks.arrays import fodf_metrics_of, peaks_image
    from worker.params.peaks import PeaksParams
    from worker.qc_picture import write_peaks_qc_png

    with tempfile.TemporaryDirectory() as scratch:
        folder = args.cache or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        fod, result = subject(folder, args)
        out = Path(scratch) / "out"
        out.mkdir()
        info = read_image_header(fod, "FOD")
        sh, _ = load_image_data_with_sha256(info)
        params = PeaksParams()
        maps = fodf_metrics_of(sh, result)  # compiles or loads them before timing
        image = peaks_image(result.directions, result.amplitudes)
        amplitudes, count = result.amplitudes.astype(np.float32, copy=False), result.count.astype(np.uint8, copy=False)
        title = f"{fod.name}: lmax {args.lmax}, K = 3 peaks, mrtrix basis"
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
        rows = []
        for name, stage in stages.items():
            timing = time_host(stage, args.repeats, warmup=0)
            rows.append({"stage": name, "first_cpu_ms": 1e3 * timing.cpu[0], "median_cpu_ms": 1e3 * timing.median_cpu})
        report.table(f"{fod.name}: {info.shape} float32, strides {sh.strides}; peaks' strides "
                     f"{result.directions.strides}; process CPU ms, first call and median of {args.repeats}", rows,
                     [Column("stage", "stage"), Column("first_cpu_ms", "first", ".1f"),
                      Column("median_cpu_ms", "median", ".1f")])
