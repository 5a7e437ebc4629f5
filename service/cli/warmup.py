"""``fibertensor warmup``: compile the kernels into numba's on-disk cache before any job.

Each generated kernel compiles on its first use, for seconds to a minute (the SS-HOPM
kernels: one set per lmax); the worker image runs this at build time
(docker/Dockerfile.worker) so that no job waits for it. numba keys its cache on the CPU
model (``NUMBA_CPU_NAME``) or the GPU's compute capability, and on ``NUMBA_CACHE_DIR``:
warm up where, and with the settings with which, the jobs run. numba compiles on one
thread, so the independent pieces run in spawned processes, one a core. A warm cache makes
this a quick check (docs/decisions/kernel-warmup.md).
"""

from __future__ import annotations

import argparse

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
    warmup.add_argument("--processes", type=int, metavar="N",
                        help="compile in N processes at once, each taking whole families or shares of one (peaks: "
                        "an lmax each; conv on cuda: a share of its kernels); default one a core, at most 8 with "
                        "cuda (each holds a CUDA context and its GPU memory); 1: all in this process, one after "
                        "another")
    warmup.add_argument("--quiet", action="store_true", help="print nothing")
    warmup.set_defaults(func=_warmup)


#: compiling processes at most with the CUDA backend: each holds a context and its GPU memory
_CUDA_PROCESSES = 8


def _warmup(args: argparse.Namespace) -> int:
    import os

    from gpu.cuda.backend import resolve_backend

    try:
        backend = resolve_backend(args.backend)
    except RuntimeError as exc:
        raise CommandError(str(exc)) from None
    if args.processes is not None and args.processes < 1:
        raise CommandError(f"--processes must be at least 1, got {args.processes}")
    cores = len(os.sched_getaffinity(0))
    processes = args.processes or (min(cores, _CUDA_PROCESSES) if backend == "cuda" else cores)
    families = FAMILIES if "all" in args.family else tuple(dict.fromkeys(args.family))
    units = _units(families, backend, tuple(args.lmax or ()), args.ahead_of_time, processes)

    def log(message: str) -> None:
        if not args.quiet:
            print(message, flush=True)

    if processes == 1 or len(units) == 1:
        for name, options in units:
            _run_unit(backend, name, options, log)
        return 0
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, wait

    # spawned, not forked: each process starts its own numba and CUDA; their lines print in
    # the units' order, as one process would print them
    with ProcessPoolExecutor(min(processes, len(units)), mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {index: pool.submit(_run_unit, backend, name, options)
                   for index, (name, options) in enumerate(units) if name != "peaks writers"}
        for index, (name, options) in enumerate(units):
            if name == "peaks writers":
                # its build takes the loops the peaks units compiled, from numba's cache
                wait([futures[i] for i, (other, _) in enumerate(units) if other == "peaks"])
                futures[index] = pool.submit(_run_unit, backend, name, options)
        try:
            for index in range(len(units)):
                for line in futures[index].result():
                    log(line)
        except BaseException:
            # a piece failed (or Ctrl-C): the pieces not started yet are dropped, not waited for
            pool.shutdown(wait=False, cancel_futures=True)
            raise
    return 0


def _units(families: tuple[str, ...], backend: str, lmaxes: tuple[int, ...], ahead_of_time: bool,
           processes: int) -> list[tuple[str, dict]]:
    """The warm-up's independent pieces, in the order their lines print: one per peaks lmax,
    the peaks writers, each other family, and conv's CUDA kernels in ``processes`` shares;
    fod brings fixels along."""
    from gpu.sh_basis import SUPPORTED_LMAX

    units: list[tuple[str, dict]] = []
    for family in families:
        if family == "peaks":
            lmaxes = lmaxes or SUPPORTED_LMAX
            units += [("peaks", {"lmax": lmax}) for lmax in lmaxes]
            units.append(("peaks writers", {"ahead_of_time": ahead_of_time, "lmaxes": lmaxes}))
        elif family == "conv":
            parts = processes if backend == "cuda" else 1
            units += [("conv", {"part": part, "parts": parts}) for part in range(parts)]
        else:
            units.append((family, {"ahead_of_time": ahead_of_time}))
    if "fod" in families and "fixels" not in families:
        # a fod job without responses estimates them, with fod2fixel's lobes: the fixels' kernels
        units.append(("fixels", {"ahead_of_time": ahead_of_time}))
    return units


def _run_unit(backend: str, name: str, options: dict, log=None) -> list[str]:
    """Warm up one piece of :func:`_units`; its lines go to ``log``, or are returned (from a
    process of the pool)."""
    import warnings

    from gpu.cuda.compile_notice import compiling_on_purpose

    lines: list[str] = []
    say = lines.append if log is None else log
    with compiling_on_purpose(), warnings.catch_warnings():
        # the warm-up's few voxels make small grids on purpose: numba's advice is not for the user
        warnings.filterwarnings("ignore", message=r".*Grid size \d+ will likely result in GPU under-utilization")
        if name == "peaks":
            from gpu.peaks.warmup import warm_up_peaks

            warm_up_peaks(backend, lmaxes=(options["lmax"],), log=say)
        elif name == "peaks writers":
            from worker.jobs.peaks import warm_up_pam5_writer, warm_up_writers

            say(f"peaks writers: QC picture rasterizer, fODF metrics (cpu): {warm_up_writers():.1f} s")
            pam5 = warm_up_pam5_writer()
            say("peaks .pam5 writer: skipped, DIPY is not installed" if pam5 is None
                else f"peaks .pam5 writer (cpu): {pam5:.1f} s")
            if options["ahead_of_time"]:
                if backend == "cpu":
                    # the build takes the loops this process has loaded: those of the peaks
                    # units, which may have run in other processes (numba's cache has them)
                    from gpu.peaks.warmup import warm_up_peaks

                    warm_up_peaks(backend, lmaxes=options["lmaxes"])
                _build_peaks_ahead_of_time(say, loops=backend == "cpu")
        elif name == "fod":
            from gpu.fod.warmup import warm_up_fod

            warm_up_fod(backend, log=say)
            if options["ahead_of_time"]:
                _build_fod_ahead_of_time(say, fallback=backend != "cpu")
        elif name == "fixels":
            from gpu.fixels.warmup import warm_up_fixels

            warm_up_fixels(backend, log=say)
            if options["ahead_of_time"]:
                _build_fixels_ahead_of_time(say)
        elif name == "conv":
            from gpu.conv.warmup import warm_up_conv

            warm_up_conv(backend, log=say, **options)
        else:
            from gpu.compress.warmup import warm_up_compress

            warm_up_compress(backend, log=say)
    return lines


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


def _build_fod_ahead_of_time(log, fallback: bool = False) -> None:
    """The ahead-of-time build of the CSD and MSMT-CSD CPU loops (a small CPU fit's); with
    ``fallback``, of the MSMT-CSD loop alone (the voxels a GPU fit hands back to the CPU)."""
    import time

    from gpu.ahead_of_time import missing_build_tools
    from gpu.fod.ahead_of_time import build_fod_ahead_of_time

    what = "fod CPU fallback's ahead-of-time build" if fallback else "fod ahead-of-time build"
    missing = missing_build_tools()
    if missing is not None:
        fits = "GPU fits handing voxels to the CPU" if fallback else "small CPU fits"
        log(f"{what}: skipped, {missing} ({fits} then load numba, about a second)")
        return
    started = time.perf_counter()
    path = build_fod_ahead_of_time(fallback)
    log(f"{what}{'' if fallback else ' (cpu)'}: {time.perf_counter() - started:.1f} s, {path}")


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
