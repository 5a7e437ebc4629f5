"""``fibertensor batch peaks``: many FOD volumes through one pipeline (:mod:`worker.batch`)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from service.cli import CommandError
from service.cli.gpus import devices_from_option
from service.cli.input_checks import input_limits
from service.cli.model_options import add_model_options, params_from_args
from worker.params.peaks import PeaksParams

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    batch = subparsers.add_parser(
        "batch", help="run a job on many inputs as one pipeline (reading, computing and writing overlap)",
        description="Run a job on many inputs as one pipeline: the next inputs are read while one is "
        "computed and the previous results are written.")
    kinds = batch.add_subparsers(dest="batch_kind", required=True, metavar="JOB")
    peaks = kinds.add_parser(
        "peaks", help="fiber peaks of many SH FOD volumes",
        description="Fiber peaks of every input, written as fibertensor peaks IN DIR/<name> writes them "
        "(DIR/<name>_peaks, _amplitudes, _count, the fODF metrics, _qc.png, the formats asked for, and the "
        "sidecar DIR/<name>.json), byte for byte the same. An input that fails is listed at the end and the "
        "others are written; the exit status is then 1.")
    peaks.add_argument("inputs", type=Path, nargs="+", metavar="INPUT",
                       help="4D image of SH coefficients (.nii, .nii.gz, .mif, .mif.gz), or a folder of them")
    peaks.add_argument("--out-dir", type=Path, required=True, metavar="DIR", help="folder for the outputs")
    peaks.add_argument("--gpus", metavar="all|0,1",
                       help="the GPUs to run on, each with --processes-per-gpu worker processes, all taking "
                       "inputs from one queue: 'all' or CUDA_VISIBLE_DEVICES values (default: the backend's device)")
    peaks.add_argument("--processes-per-gpu", type=int, metavar="N",
                       help="worker processes per GPU (or in all, without --gpus), each with its own reader and "
                       "writer threads, all taking inputs from one queue; one process alone cannot use more than "
                       "about five cores (default: three per four cores; 1 without --gpus runs in this process)")
    peaks.add_argument("--resume", action="store_true",
                       help="skip the inputs whose outputs in DIR are up to date, as make would: the sidecar "
                       "DIR/<name>.json (written last) names the input and these options, lists outputs that are "
                       "all there, and is newer than the input; a batch stopped part-way goes on where it stopped")
    peaks.add_argument("--readers", type=int, metavar="N", help="reader threads per process (default: from the cores)")
    peaks.add_argument("--writers", type=int, metavar="N", help="writer threads per process (default: from the cores)")
    add_model_options(peaks, PeaksParams)
    peaks.add_argument("--quiet", action="store_true", help="no progress bar or summary; failures are still listed")
    peaks.set_defaults(func=_batch_peaks)


def _batch_peaks(args: argparse.Namespace) -> int:
    from worker.batch import batch_items, default_processes, run_batch
    from worker.errors import InputError

    params = params_from_args(PeaksParams, args)
    for option in ("processes_per_gpu", "readers", "writers"):
        if getattr(args, option) is not None and getattr(args, option) < 1:
            raise CommandError(f"--{option.replace('_', '-')} must be at least 1")
    try:
        items = batch_items(args.inputs, args.out_dir)
    except InputError as exc:
        raise CommandError(exc.detail) from None
    devices = devices_from_option(args.gpus)
    # docs/decisions/processes-per-gpu.md
    processes = args.processes_per_gpu or default_processes(len(devices or [None]))
    # checked as the service checks, by each reader from the header: a bad FIBERTENSOR_*
    # setting stops the batch here, once
    limits = input_limits()
    args.out_dir.mkdir(parents=True, exist_ok=True)

    bar = None
    if not args.quiet and sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(total=len(items), unit="input", desc="peaks", file=sys.stderr)

    def report(item_report) -> None:
        if bar is not None:
            bar.update(1)
            if not item_report.ok:
                bar.write(f"failed: {item_report.input}: {item_report.error}", file=sys.stderr)

    started = time.perf_counter()
    try:
        reports = run_batch(items, params, devices=devices, processes=processes, readers=args.readers,
                            writers=args.writers, limits=limits, report=report, resume=args.resume)
    finally:
        if bar is not None:
            bar.close()
    seconds = time.perf_counter() - started
    failed = [r for r in reports if not r.ok]
    if not args.quiet:
        skipped = sum(r.skipped for r in reports)
        written = len(reports) - len(failed) - skipped
        print(f"{written} of {len(reports)} inputs written to {args.out_dir} in {seconds:.1f} s "
              f"({written / seconds * 3600:.0f} per hour); "
              + (f"{skipped} up to date, skipped; " if args.resume else "") + f"{len(failed)} failed")
    if failed:
        print(f"fibertensor: {len(failed)} of {len(reports)} inputs failed:", file=sys.stderr)
        for r in failed:
            print(f"  {r.input}: {r.error}", file=sys.stderr)
        return 1
    return 0
