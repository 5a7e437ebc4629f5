"""``fibertensor warmup``: compile the kernels into numba's on-disk cache before any job.

Each generated kernel compiles on its first use, for seconds to a minute (the SS-HOPM
kernels: one set per lmax); the worker image runs this at build time
(docker/Dockerfile.worker) so that no job waits for it. numba keys its cache on the CPU
model (``NUMBA_CPU_NAME``) or the GPU's compute capability, and on ``NUMBA_CACHE_DIR``:
warm up where, and with the settings with which, the jobs run. A warm cache makes this a
quick check (docs/decisions/kernel-warmup.md).
"""

from __future__ import annotations

import argparse
import warnings

from service.cli import CommandError

__all__ = ["register"]

FAMILIES = ("peaks", "fod", "fixels", "conv", "compress")


def register(subparsers: argparse._SubParsersAction) -> None:
    warmup = subparsers.add_parser(
        "warmup",
        help="compile the kernels into numba's cache, so no job waits for a compile",
        description="Compile every kernel the chosen backend uses (peaks: every lmax) into numba's "
        "on-disk cache (NUMBA_CACHE_DIR). Prints what it compiled and how long it took.",
    )
    warmup.add_argument("--backend", choices=["auto", "cpu", "cuda"], default="auto",
                        help="kernels of this backend (default auto: cuda with a GPU, else cpu)")
    warmup.add_argument("--family", choices=[*FAMILIES, "all"], nargs="+", default=["all"],
                        help="job families whose kernels to compile (default all)")
    warmup.add_argument("--lmax", type=int, nargs="+", choices=[2, 4, 6, 8, 10, 12],
                        help="peaks: only these SH orders (default every supported one)")
    warmup.add_argument("--ahead-of-time", action=argparse.BooleanOptionalAction, default=True,
                        help="peaks, fod and fixels: also build compiled functions into a Python extension module "
                        "(and, for peaks, save the QC picture's glyphs), so that later jobs start without loading "
                        "numba and Pillow: with the cpu backend a small job's functions (peaks, the CSD and MSMT-CSD "
                        "fits, FMLS segmentation), with cuda the peaks output writers' and the FMLS loop the GPU "
                        "hands voxels back to (the build needs a C compiler and the Python headers; default on)")
    warmup.add_argument("--quiet", action="store_true", help="print nothing")
    warmup.set_defaults(func=_warmup)


def _warmup(args: argparse.Namespace) -> int:
    from gpu.cuda.backend import resolve_backend
    from gpu.cuda.compile_notice import compiling_on_purpose

    try:
        backend = resolve_backend(args.backend)
    except RuntimeError as exc:
        raise CommandError(str(exc)) from None

    def log(message: str) -> None:
        if not args.quiet:
            print(message, flush=True)

    families = FAMILIES if "all" in args.family else tuple(dict.fromkeys(args.family))
    with compiling_on_purpose(), warnings.catch_warnings():
        # the warm-up's few voxels make small grids on purpose: numba's advice is not for the user
        warnings.filterwarnings("ignore", message=r".*Grid size \d+ will likely result in GPU under-utilization")
        for family in families:
            if family == "peaks":
                from gpu.peaks.warmup import warm_up_peaks

                warm_up_peaks(backend, **({"lmaxes": tuple(args.lmax)} if args.lmax else {}), log=log)
                from worker.jobs.peaks import warm_up_pam5_writer, warm_up_writers

                log(f"peaks writers: QC picture rasterizer, fODF metrics (cpu): {warm_up_writers():.1f} s")
                pam5 = warm_up_pam5_writer()
                log("peaks .pam5 writer: skipped, DIPY is not installed" if pam5 is None
                    else f"peaks .pam5 writer (cpu): {pam5:.1f} s")
                if args.ahead_of_time:
                    _build_peaks_ahead_of_time(log, loops=backend == "cpu")
            elif family == "fod":
                from gpu.fod.warmup import warm_up_fod

                warm_up_fod(backend, log=log)
                if args.ahead_of_time and backend == "cpu":
                    _build_fod_ahead_of_time(log)
            elif family == "fixels":
                from gpu.fixels.warmup import warm_up_fixels

                warm_up_fixels(backend, log=log)
                if args.ahead_of_time:
                    _build_fixels_ahead_of_time(log)
            elif family == "conv":
                from gpu.conv.warmup import warm_up_conv

                warm_up_conv(backend, log=log)
            else:
                from gpu.compress.warmup import warm_up_compress

                warm_up_compress(backend, log=log)
    return 0


def _build_peaks_ahead_of_time(log, loops: bool = True) -> None:
    """The glyph store and the ahead-of-time build: with ``loops``, of a small CPU job's loops
    and the writers' passes; without, of the writers' passes alone (a GPU job's writing)."""
    import time

    from gpu.ahead_of_time import missing_build_tools
    from worker.jobs.peaks.ahead_of_time import build_peaks_ahead_of_time
    from worker.qc_picture import save_qc_glyph_store

    started = time.perf_counter()
    path = save_qc_glyph_store()
    log(f"peaks QC picture glyph store: {time.perf_counter() - started:.1f} s, {path}")
    what = "peaks ahead-of-time build" if loops else "peaks writers' ahead-of-time build"
    missing = missing_build_tools()
    if missing is not None:
        jobs = "small CPU jobs" if loops else "jobs writing fODF metrics or a QC picture"
        log(f"{what}: skipped, {missing} ({jobs} then load numba, about a second)")
        return
    started = time.perf_counter()
    path = build_peaks_ahead_of_time(loops)
    log(f"{what}{' (cpu)' if loops else ''}: {time.perf_counter() - started:.1f} s, {path}")


def _build_fod_ahead_of_time(log) -> None:
    """The ahead-of-time build of the CSD and MSMT-CSD CPU loops (a small CPU fit's)."""
    import time

    from gpu.ahead_of_time import missing_build_tools
    from gpu.fod.ahead_of_time import build_fod_ahead_of_time

    missing = missing_build_tools()
    if missing is not None:
        log(f"fod ahead-of-time build: skipped, {missing} (small CPU fits then load numba, about a second)")
        return
    started = time.perf_counter()
    path = build_fod_ahead_of_time()
    log(f"fod ahead-of-time build (cpu): {time.perf_counter() - started:.1f} s, {path}")


def _build_fixels_ahead_of_time(log) -> None:
    """The ahead-of-time build of the FMLS CPU loop (a small CPU segmentation's, and the
    voxels a GPU run hands back to the CPU)."""
    import time

    from gpu.ahead_of_time import missing_build_tools
    from gpu.fixels.ahead_of_time import build_fixels_ahead_of_time

    missing = missing_build_tools()
    if missing is not None:
        log(f"fixels ahead-of-time build: skipped, {missing} (small CPU segmentations then load numba, about a "
            "second)")
        return
    started = time.perf_counter()
    path = build_fixels_ahead_of_time()
    log(f"fixels ahead-of-time build (cpu): {time.perf_counter() - started:.1f} s, {path}")
