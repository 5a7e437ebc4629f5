"""Reading and writing a whole-brain FOD: the job's NIfTI read path against the one it
replaced (nibabel on an ISA-L-inflated copy of the file) and ISA-L's inflate alone, and the
read with the input's sha256 taken in it against a second read of the file on a thread
beside it (how jobs hashed their inputs before), then the writes of peaks-sized outputs on
1 and 4 compression threads.

Prints the best wall and CPU (all threads of the process) seconds of each way, and each
"before" way's wall time over ours. On a loaded machine compare the CPU column: wall time
there measures the neighbours.
"""

from __future__ import annotations

import argparse
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from bench.harness import Column, Report, ratio, time_host
from bench.peaks.volume import add_volume_options, make_phantom

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_volume_options(parser, repeats=5)


def nibabel_on_inflated_copy(path: Path) -> np.ndarray:
    """The read path before: inflate the whole file into bytes, parse it with nibabel."""
    import isal.igzip
    import nibabel as nib

    image = nib.Nifti1Image.from_bytes(isal.igzip.decompress(path.read_bytes()))
    return np.asarray(image.get_fdata(dtype=np.float32), dtype=np.float32)


def read_then_hash_beside(info) -> tuple[np.ndarray, str]:
    """The read and sha256 before: the file hashed by a second read of it on a thread of its
    own while the reading thread inflates it."""
    from worker.io.nifti import load_nifti_data
    from worker.provenance import file_sha256

    with ThreadPoolExecutor(max_workers=1) as hashing:
        sha256 = hashing.submit(file_sha256, info.path)
        return load_nifti_data(info), sha256.result()


def run(args: argparse.Namespace, report: Report) -> None:
    import nibabel as nib
    from isal import isal_zlib

    from worker.io.images import load_image_data_with_sha256
    from worker.io.nifti import load_nifti_data, read_nifti_header, save_nifti_atomic

    sh = make_phantom(args)["sh"]
    image = nib.Nifti1Image(sh, np.diag([2.0, 2.0, 2.0, 1.0]))
    rows = []

    def timed(name: str, function, before: dict | None = None) -> dict:
        timing = time_host(function, args.repeats, warmup=0)
        rows.append({"step": name, "wall_s": timing.best_wall, "cpu_s": timing.best_cpu,
                     "same": None if before is None else before.get("same")})
        if before is not None:
            before["x_ours"] = ratio(before["wall_s"], timing.best_wall)
        return rows[-1]

    with tempfile.TemporaryDirectory() as folder:
        gz, plain = Path(folder) / "fod.nii.gz", Path(folder) / "fod.nii"
        save_nifti_atomic(image, gz)
        nib.save(image, plain)
        compressed = gz.read_bytes()
        info, plain_info = read_nifti_header(gz, "FOD"), read_nifti_header(plain, "FOD")
        before = timed("read .nii.gz, before (nibabel on inflated bytes)", lambda: nibabel_on_inflated_copy(gz))
        before["same"] = bool(np.array_equal(load_nifti_data(info), nibabel_on_inflated_copy(gz)))
        timed("read .nii.gz, load_nifti_data", lambda: load_nifti_data(info), before)
        timed("  ISA-L inflate alone (bytes in memory)", lambda: isal_zlib.decompress(compressed, wbits=31))
        timed("read .nii, load_nifti_data", lambda: load_nifti_data(plain_info))
        for label, checked in ((".nii.gz", info), (".nii", plain_info)):
            before = timed(f"read {label} + sha256, before (file hashed beside)",
                           lambda: read_then_hash_beside(checked))
            before["same"] = load_image_data_with_sha256(checked)[1][checked.path.name] == \
                read_then_hash_beside(checked)[1]
            timed(f"read {label} + sha256 in the same read", lambda: load_image_data_with_sha256(checked), before)
        k = 3
        for name, data in {"peaks": sh[..., : 3 * k], "amplitudes": sh[..., :k]}.items():
            out = nib.Nifti1Image(np.asfortranarray(data), image.affine)
            for threads in (1, 4):
                timed(f"write {name} ({data.nbytes / 1e6:.0f} MB), {threads} thread(s)",
                      lambda: save_nifti_atomic(out, Path(folder) / "out.nii.gz", threads))
    report.table(f"{'x'.join(map(str, args.shape))} lmax {args.lmax}: {sh.nbytes / 1e6:.1f} MB float32, .nii.gz "
                 f"{len(compressed) / 1e6:.1f} MB; best of {args.repeats}", rows,
                 [Column("step", "step"), Column("wall_s", "wall s", ".3f"), Column("cpu_s", "cpu s", ".3f"),
                  Column("x_ours", "x ours", ".2f"), Column("same", "same result")],
                 note="x ours: a 'before' way's wall seconds over the way that replaced it (the next row); same "
                      "result: it gives the same array, or the same sha256, as ours")
