"""On a GPU: the host CPU the CUDA peaks path spends on an input in page-locked memory
(gpu.cuda.host_memory.pinned_empty) against the same input in pageable memory, in one run: the
read of a dwi2fod-layout .mif into each, the copy of it to the GPU, and sshopm_peaks on it
(whose result arrays are filled on the device and come back page-locked either way).

    python3 bench/pinned_transfers.py [--shape 96 96 60] [--lmax 8] [--repeats 5]

Makes a phantom FOD (``gpu.peaks.fod_phantom``, 553k voxels by default: 100 MB float32),
writes it as a .mif with strides 2,3,4,1, and prints the best wall and CPU (all threads of
the process) seconds of each step, and whether both inputs give the same peaks bit for bit.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu.cuda import device_arrays  # noqa: E402
from gpu.cuda.host_memory import pinned_empty, pinned_pool  # noqa: E402
from gpu.peaks import fod_phantom  # noqa: E402
from gpu.peaks.search import _coefficients_by_voxel, prepare_peaks, sshopm_peaks  # noqa: E402
from worker.io.images import load_image_data, read_image_header  # noqa: E402
from worker.io.mif import write_mif  # noqa: E402
from read_path import best  # noqa: E402  (bench/ is this script's folder on sys.path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", type=int, nargs=3, default=[96, 96, 60])
    parser.add_argument("--lmax", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    prepared = prepare_peaks(args.lmax, backend="cuda")  # the CUDA context: page-locked memory from here on
    sh = fod_phantom(tuple(args.shape), args.lmax, relative_noise=0.1, seed=4)["sh"].astype(np.float32)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        path = write_mif(Path(folder) / "fod.mif", sh, np.diag([2.0, 2.0, 2.0, 1.0]), layout=(2, 3, 4, 1))
        info = read_image_header(path, "fod")
        inputs = {"pageable": (np.empty, load_image_data(info)),
                  "page-locked": (pinned_empty, load_image_data(info, empty=pinned_empty))}
        results = {}
        for name, (empty, values) in inputs.items():
            rows.append((f"read .mif into {name} memory", *best(lambda: load_image_data(info, empty=empty), args.repeats)))

            by_voxel, _ = _coefficients_by_voxel(values)  # the view the engine copies, in the file's layout

            def copy() -> None:
                device_arrays.to_device(by_voxel)
                device_arrays.synchronize()

            rows.append((f"  copy to the GPU from {name} memory", *best(copy, args.repeats)))

            def peaks() -> None:
                results[name] = sshopm_peaks(values, backend="cuda", prepared=prepared)

            rows.append((f"  sshopm_peaks on {name} memory", *best(peaks, args.repeats)))
    same = all(np.array_equal(getattr(results["pageable"], field), getattr(results["page-locked"], field),
                              equal_nan=True) for field in ("directions", "amplitudes", "count"))
    print(f"{'x'.join(map(str, args.shape))} lmax {args.lmax}: {sh.nbytes / 1e6:.1f} MB float32; same peaks: {same}; "
          f"page-locked blocks allocated {pinned_pool.allocated}, reused {pinned_pool.reused}")
    print(f"{'':44s} {'wall s':>8s} {'cpu s':>8s}")
    for name, wall, cpu in rows:
        print(f"{name:44s} {wall:8.4f} {cpu:8.4f}")


if __name__ == "__main__":
    main()
