"""On a GPU: the host CPU the CUDA peaks path spends on an input in page-locked memory
(``pinned_empty`` of the project's CUDA driver binding) against the same input in pageable
memory (the peer), in one run: the read of a dwi2fod-layout .mif into each, the copy of it
to the GPU (with its GPU time between CUDA events), and ``sshopm_peaks`` on it (whose
result arrays are filled on the device and come back page-locked either way).

Makes a phantom FOD (with relative noise 0.1), writes it as a .mif with strides 2,3,4,1,
and prints the best wall and CPU (all threads of the process) seconds of each step, and
whether both inputs give the same peaks bit for bit.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

from bench.harness import Column, Report, gpu_time, ratio, time_host
from bench.peaks.volume import add_volume_options, make_phantom

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_volume_options(parser, repeats=5)


def run(args: argparse.Namespace, report: Report) -> None:
    from gpu.cuda import device_arrays
    from gpu.cuda.host_memory import pinned_empty, pinned_pool
    from gpu.peaks.search import prepare_peaks, sshopm_peaks
    from worker.io.images import load_image_data, read_image_header
    from worker.io.mif import write_mif

    prepare_peaks(args.lmax, backend="cuda")  # the CUDA context: page-locked memory from here on
    sh = make_phantom(args, relative_noise=0.1, seed=4)["sh"].astype(np.float32)
    rows, results = [], {}
    with tempfile.TemporaryDirectory() as folder:
        path = write_mif(Path(folder) / "fod.mif", sh, np.diag([2.0, 2.0, 2.0, 1.0]), layout=(2, 3, 4, 1))
        info = read_image_header(path, "fod")
        inputs = {"pageable": (np.empty, load_image_data(info)),
                  "page-locked": (pinned_empty, load_image_data(info, empty=pinned_empty))}
        for memory, (empty, values) in inputs.items():
            def row(step: str, function, **extra) -> None:
                timing = time_host(function, args.repeats)
                rows.append({"memory": memory, "step": step, "wall_s": timing.best_wall, "cpu_s": timing.best_cpu,
                             **extra})

            row("read .mif", lambda: load_image_data(info, empty=empty))
            flat = values.ravel(order="K")  # the file's bytes in memory order: what the engine copies

            def copy() -> None:
                device_arrays.to_device(flat)

            row("copy to the GPU", lambda: (copy(), device_arrays.synchronize()), gpu_ms=1e3 * gpu_time(copy, args.repeats)[0])

            def peaks() -> None:
                results[memory] = sshopm_peaks(values, backend="cuda")

            row("sshopm_peaks", peaks)
    same = all(np.array_equal(getattr(results["pageable"], field), getattr(results["page-locked"], field),
                              equal_nan=True) for field in ("directions", "amplitudes", "count"))
    pageable = {row["step"]: row for row in rows if row["memory"] == "pageable"}
    for row in rows:
        row["cpu_x_ours"] = ratio(pageable[row["step"]]["cpu_s"], row["cpu_s"])
        row["same_peaks"] = same
    report.table(f"{'x'.join(map(str, args.shape))} lmax {args.lmax}: {sh.nbytes / 1e6:.1f} MB float32; page-locked "
                 f"blocks allocated {pinned_pool.allocated}, reused {pinned_pool.reused}; "
                 f"best of {args.repeats}", rows,
                 [Column("step", "step"), Column("memory", "memory"), Column("wall_s", "wall s", ".4f"),
                  Column("cpu_s", "cpu s", ".4f"), Column("gpu_ms", "GPU ms", ".3f"),
                  Column("cpu_x_ours", "pageable CPU / this", ".2f"), Column("same_peaks", "same peaks")])
