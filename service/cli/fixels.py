"""``fibertensor fixels``: an SH FOD volume → an MRtrix3 fixel directory, as ``fod2fixel``.

Calls the function the ``fixels`` job runs (:func:`worker.jobs.fixels.run_fixels`), locally,
without the service.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from service.cli import CommandError
from service.cli.model_options import add_model_options, params_from_args
from service.cli.progress_bar import percent_bar
from worker.params.fixels import FixelsParams

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    fixels = subparsers.add_parser(
        "fixels",
        help="fixels of an SH FOD volume as MRtrix3 fod2fixel (FMLS; AFD, peak amplitude, dispersion)",
        description="Segment each voxel's FOD into lobes (FMLS, as MRtrix3 fod2fixel) and write the fixel directory "
        "OUT_DIR: index, directions, afd (lobe integral), peak_amp and disp, in the input's image format, and the "
        "sidecar OUT_DIR.json.",
    )
    fixels.add_argument("input", type=Path, metavar="FOD",
                        help="4D image of even-order SH coefficients in MRtrix3's basis (.nii, .nii.gz, .mif, .mif.gz)")
    fixels.add_argument("out_dir", type=Path, metavar="OUT_DIR", help="fixel directory to write (must not exist or "
                        "be empty)")
    fixels.add_argument("--mask", type=Path, help="3D mask image on the same grid (NIfTI or MRtrix)")
    add_model_options(fixels, FixelsParams)
    fixels.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    fixels.set_defaults(func=_fixels)


def _fixels(args: argparse.Namespace) -> int:
    params = params_from_args(FixelsParams, args)
    if params.backend != "cpu":
        from gpu.cuda.device import start_cuda_context

        start_cuda_context()  # while the imports and the read below run, as fibertensor peaks does
    from service.cli.input_checks import check_inputs, input_problem
    from service.cli.output_checks import check_output_folder
    from worker.errors import InputError
    from worker.jobs.fixels import JOB_KINDS, run_fixels

    inputs = {"fod": args.input, "mask": args.mask}
    (kind,) = JOB_KINDS
    check_inputs(kind, inputs, params, read_through=False)
    out_dir = args.out_dir
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise CommandError(f"{out_dir} exists and is not an empty folder; remove it or choose another OUT_DIR")
    check_output_folder(out_dir.parent, "OUT_DIR")
    try:
        with percent_bar("fixels", args.quiet) as progress:
            sidecar = run_fixels(args.input, out_dir, params, mask=args.mask, progress=progress,
                                 inflate_threads=len(os.sched_getaffinity(0)))
    except InputError as exc:
        raise CommandError(input_problem(exc, inputs)) from None
    except (ValueError, RuntimeError) as exc:
        raise CommandError(str(exc)) from None
    for warning in sidecar["warnings"]:
        print(f"fibertensor: warning: {warning}", file=sys.stderr)
    if not args.quiet:
        print(f"{sidecar['fixels']} fixels in {sidecar['voxels_with_fixels']} voxels (at most "
              f"{sidecar['most_fixels_in_a_voxel']} in one), backend {sidecar['backend']}, "
              f"{sidecar['seconds']['total']:.2f} s; wrote {out_dir} ({sidecar['outputs']['format']}) and "
              f"{out_dir.name}.json")
    return 0
