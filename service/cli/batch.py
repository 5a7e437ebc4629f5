"""``fibertensor batch peaks|fod|fixels``: many inputs of one job kind through one pipeline
(:mod:`worker.batch`)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from service.cli import CommandError
from service.cli.gpus import devices_from_option
from service.cli.input_checks import input_limits
from service.cli.model_options import add_model_options, params_from_args
from worker.params.fixels import FixelsParams
from worker.params.fod import FodParams
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
                       help="4D image of SH coefficients (.nii, .nii.gz, .mif, .mif.gz), or a folder of them; a "
                       "mask <name>_mask.<ext> beside an input is used as fibertensor peaks --mask")
    _add_pipeline_options(peaks)
    peaks.add_argument("--resume", action="store_true",
                       help="skip the inputs whose outputs in DIR are up to date, as make would: the sidecar "
                       "DIR/<name>.json (written last) names the input and these options, lists outputs that are "
                       "all there, and is newer than the input; a batch stopped part-way goes on where it stopped")
    add_model_options(peaks, PeaksParams)
    peaks.add_argument("--quiet", action="store_true", help="no progress bar or summary; failures are still listed")
    peaks.set_defaults(func=_batch_peaks)

    fod = kinds.add_parser(
        "fod", help="FODs of many DWIs (dwi2fod msmt_csd or csd)",
        description="FODs of every DWI, written as fibertensor fod DWI DIR/<name> writes them (DIR/<name>_wmfod, "
        "_gm, _csf, the estimated responses _wm.txt, _gm.txt, _csf.txt, and the sidecar DIR/<name>_fod.json), "
        "byte for byte the same. Beside each DWI <name>.<ext>: its gradients <name>.bval and <name>.bvec (FSL, as "
        "dcm2niix writes them), or <name>.b (MRtrix), or none for a .mif with its dw_scheme; a mask "
        "<name>_mask.<ext> if any; its responses <name>_wm.txt [_gm.txt _csf.txt] if any. With --peaks, the peaks "
        "of each WM FOD from the FOD in memory, as fibertensor fod --peaks writes them (DIR/<name>_peaks, ..., "
        "DIR/<name>_peaks.json). An input that fails is listed at the end, none of its files written, and the "
        "others are written; the exit status is then 1.")
    fod.add_argument("inputs", type=Path, nargs="+", metavar="DWI",
                     help="4D diffusion-weighted series (.nii, .nii.gz, .mif, .mif.gz), or a folder of them")
    fod.add_argument("--response", type=Path, nargs="+", metavar="RESPONSE",
                     help="response files WM [GM CSF], or WM CSF for a two-tissue fit, for every DWI (e.g. group "
                     "averages, as fixel-based analysis uses; csd takes WM alone); default: each DWI's own beside it, else estimated per DWI as "
                     "dwi2response dhollander for msmt_csd and tournier for csd")
    _add_pipeline_options(fod)
    add_model_options(fod, FodParams)
    fod.add_argument("--quiet", action="store_true", help="no progress bar or summary; failures are still listed")
    fod.set_defaults(func=_batch_fod)

    fixels = kinds.add_parser(
        "fixels", help="fixels of many SH FOD volumes (fod2fixel)",
        description="Fixels of every FOD, written as fibertensor fixels FOD DIR/<name>_fixels writes them (the "
        "fixel directory DIR/<name>_fixels and its sidecar DIR/<name>_fixels.json), byte for byte the same; a mask "
        "<name>_mask.<ext> beside an input is used. An input that fails is listed at the end and the others are "
        "written; the exit status is then 1.")
    fixels.add_argument("inputs", type=Path, nargs="+", metavar="FOD",
                        help="4D image of SH coefficients in MRtrix3's basis (.nii, .nii.gz, .mif, .mif.gz), or a "
                        "folder of them")
    _add_pipeline_options(fixels)
    add_model_options(fixels, FixelsParams)
    fixels.add_argument("--quiet", action="store_true", help="no progress bar or summary; failures are still listed")
    fixels.set_defaults(func=_batch_fixels)


def _add_pipeline_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out-dir", type=Path, required=True, metavar="DIR", help="folder for the outputs")
    parser.add_argument("--gpus", metavar="all|0,1",
                        help="the GPUs to run on, each with --processes-per-gpu worker processes, all taking "
                        "inputs from one queue: 'all' or CUDA_VISIBLE_DEVICES values (default: the backend's device)")
    parser.add_argument("--processes-per-gpu", type=int, metavar="N",
                        help="worker processes per GPU (or in all, without --gpus), each with its own reader and "
                        "writer threads, all taking inputs from one queue; one process alone cannot use more than "
                        "about five cores (default: three per four cores, for fod at most 6 per GPU; 1 without --gpus runs in this "
                        "process)")
    parser.add_argument("--readers", type=int, metavar="N", help="reader threads per process (default: from the cores)")
    parser.add_argument("--writers", type=int, metavar="N", help="writer threads per process (default: from the cores)")


def _batch_peaks(args: argparse.Namespace) -> int:
    from worker.batch import batch_items

    return _run(args, "peaks", PeaksParams, lambda params: batch_items(args.inputs, args.out_dir))


def _batch_fod(args: argparse.Namespace) -> int:
    from worker.batch import fod_items

    responses = tuple(args.response or ())
    missing = [str(path) for path in responses if not path.is_file()]
    if missing:
        raise CommandError(f"--response: {', '.join(missing)} does not exist; check the path")
    return _run(args, "fod", FodParams,
                lambda params: fod_items(args.inputs, args.out_dir, responses, algorithm=params.algorithm))


def _batch_fixels(args: argparse.Namespace) -> int:
    from worker.batch import fixels_items

    return _run(args, "fixels", FixelsParams, lambda params: fixels_items(args.inputs, args.out_dir))


def _run(args: argparse.Namespace, kind: str, model, find_items) -> int:
    """Run the batch of ``kind``: its parameters from the options, its items from
    ``find_items(params)``, the pipeline's processes from ``--gpus`` and
    ``--processes-per-gpu``; a progress bar, a summary, and the failures listed."""
    from service.cli.output_checks import check_output_folder
    from worker.batch import default_processes, run_batch
    from worker.errors import InputError

    params = params_from_args(model, args)
    for option in ("processes_per_gpu", "readers", "writers"):
        if getattr(args, option) is not None and getattr(args, option) < 1:
            raise CommandError(f"--{option.replace('_', '-')} must be at least 1")
    try:
        items = find_items(params)
    except InputError as exc:
        raise CommandError(exc.detail) from None
    devices = devices_from_option(args.gpus)
    # docs/decisions/processes-per-gpu.md
    processes = args.processes_per_gpu or default_processes(len(devices or [None]), kind)
    # checked as the service checks, by each reader from the header: a bad FIBERTENSOR_*
    # setting stops the batch here, once
    limits = input_limits()
    check_output_folder(args.out_dir, "--out-dir")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    resume = getattr(args, "resume", False)

    bar = None
    if not args.quiet and sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(total=len(items), unit="input", desc=kind, file=sys.stderr)

    def report(item_report) -> None:
        if bar is not None:
            bar.update(1)
            if not item_report.ok:
                bar.write(f"failed: {item_report.input}: {item_report.error}", file=sys.stderr)

    started = time.perf_counter()
    try:
        reports = run_batch(items, params, devices=devices, processes=processes, readers=args.readers,
                            writers=args.writers, limits=limits, report=report, resume=resume)
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
              + (f"{skipped} up to date, skipped; " if resume else "") + f"{len(failed)} failed")
    if failed:
        print(f"fibertensor: {len(failed)} of {len(reports)} inputs failed:", file=sys.stderr)
        for r in failed:
            print(f"  {r.input}: {r.error}", file=sys.stderr)
        return 1
    return 0
