"""Reading and writing a whole-brain FOD: the job's NIfTI read path against the one it
replaced (nibabel on an ISA-L-inflated copy of the file) and ISA-L's inflate alone, and the
read with the input's sha256 taken in it against a second read of the file on a thread
beside it (how jobs hashed their inputs before), in one run.

    python3 bench/read_path.py [--shape 96 96 60] [--lmax 8] [--repeats 5]

Makes a phantom FOD (``gpu.peaks.fod_phantom``), writes it as .nii.gz and .nii, and prints
the best wall and CPU (all threads of the process) seconds of each way of reading it, then the writes of
peaks-sized outputs on 1 and 4 compression threads. On a loaded machine compare the CPU
column: wall time there measures the neighbours.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import isal.igzip
import nibabel as nib
import numpy as np
from isal import isal_zlib

from gpu.peaks import fod_phantom
from worker.io.images import load_image_data_with_sha256
from worker.io.nifti import load_nifti_data, read_nifti_header, save_nifti_atomic
from worker.provenance import file_sha256


def best(function, repeats: int) -> tuple[float, float]:
    """The least wall and process-CPU seconds (all threads) of ``repeats`` calls."""
    wall = cpu = float("inf")
    for _ in range(repeats):
        started, started_cpu = time.perf_counter(), time.process_time()
        function()
        wall, cpu = min(wall, time.perf_counter() - started), min(cpu, time.process_time() - started_cpu)
    return wall, cpu


def nibabel_on_inflated_copy(path: Path) -> np.ndarray:
    """The read path before: inflate the whole file into bytes, parse it with nibabel."""
    image = nib.Nifti1Image.from_bytes(isal.igzip.decompress(path.read_bytes()))
    return np.asarray(image.get_fdata(dtype=np.float32), dtype=np.float32)


def read_then_hash_beside(info) -> tuple[np.ndarray, str]:
    """The read and sha256 before: the file hashed by a second read of it on a thread of its
    own while the reading thread inflates it."""
    with ThreadPoolExecutor(max_workers=1) as hashing:
        sha256 = hashing.submit(file_sha256, info.path)
        return load_nifti_data(info), sha256.result()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", type=int, nargs=3, default=[96, 96, 60])
    parser.add_argument("--lmax", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    sh = fod_phantom(tuple(args.shape), args.lmax)["sh"]
    image = nib.Nifti1Image(sh, np.diag([2.0, 2.0, 2.0, 1.0]))
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        gz, plain = Path(folder) / "fod.nii.gz", Path(folder) / "fod.nii"
        save_nifti_atomic(image, gz)
        nib.save(image, plain)
        compressed = gz.read_bytes()
        info, plain_info = read_nifti_header(gz, "FOD"), read_nifti_header(plain, "FOD")
        assert np.array_equal(load_nifti_data(info), nibabel_on_inflated_copy(gz))
        rows.append(("read .nii.gz, before (nibabel on inflated bytes)", *best(lambda: nibabel_on_inflated_copy(gz), args.repeats)))
        rows.append(("read .nii.gz, load_nifti_data", *best(lambda: load_nifti_data(info), args.repeats)))
        rows.append(("  ISA-L inflate alone (bytes in memory)",
                     *best(lambda: isal_zlib.decompress(compressed, wbits=31), args.repeats)))
        rows.append(("read .nii, load_nifti_data", *best(lambda: load_nifti_data(plain_info), args.repeats)))
        for label, checked in ((".nii.gz", info), (".nii", plain_info)):
            assert load_image_data_with_sha256(checked)[1][checked.path.name] == read_then_hash_beside(checked)[1]
            rows.append((f"read {label} + sha256, before (file hashed beside)",
                         *best(lambda: read_then_hash_beside(checked), args.repeats)))
            rows.append((f"read {label} + sha256 in the same read",
                         *best(lambda: load_image_data_with_sha256(checked), args.repeats)))
        k = 3
        outputs = {"peaks": sh[..., : 3 * k], "amplitudes": sh[..., :k]}
        for name, data in outputs.items():
            out = nib.Nifti1Image(np.asfortranarray(data), image.affine)
            for threads in (1, 4):
                rows.append((f"write {name} ({data.nbytes / 1e6:.0f} MB), {threads} thread(s)",
                             *best(lambda: save_nifti_atomic(out, Path(folder) / "out.nii.gz", threads), args.repeats)))
    print(f"{'x'.join(map(str, args.shape))} lmax {args.lmax}: {sh.nbytes / 1e6:.1f} MB float32, "
          f".nii.gz {len(compressed) / 1e6:.1f} MB")
    print(f"{'':52s} {'wall s':>8s} {'cpu s':>8s}")
    for name, wall, cpu in rows:
        print(f"{name:52s} {wall:8.3f} {cpu:8.3f}")


if __name__ == "__main__":
    main()
