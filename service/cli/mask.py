"""``fibertensor mask``: a DWI → brain mask, as MRtrix3's ``dwi2mask``.

Calls the function the ``mask`` job runs (:func:`worker.jobs.fod.mask.run_mask`), locally,
without the service.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from service.cli import CommandError
from service.cli.model_options import add_model_options, params_from_args
from service.cli.response import output_prefix, print_warnings
from worker.params.fod import MaskParams

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    mask = subparsers.add_parser(
        "mask",
        help="brain mask of a DWI as MRtrix3 dwi2mask",
        description="Make a brain mask from the DWI alone, as MRtrix3 dwi2mask (3.0) makes it: each shell's mean "
        "image (b=0 too) above its optimal threshold, their union's 3x3x3 median, largest connected component and "
        "filled holes. Writes OUT_PREFIX_mask (uint8, in the DWI's format) and OUT_PREFIX_mask.json; give it to "
        "fibertensor fod or response as --mask.",
    )
    mask.add_argument("input", type=Path, metavar="DWI", help="4D diffusion-weighted series (.nii, .nii.gz, .mif, "
                      ".mif.gz); a .mif may carry its gradients (dw_scheme)")
    mask.add_argument("out_prefix", metavar="OUT_PREFIX", help="outputs are OUT_PREFIX_<name> (plain <name> inside "
                      "OUT_PREFIX when it is a folder or ends in /)")
    mask.add_argument("--bval", type=Path, help="FSL b-values file (with --bvec), as -fslgrad")
    mask.add_argument("--bvec", type=Path, help="FSL b-vectors file (with --bval), as -fslgrad")
    mask.add_argument("--grad", type=Path, help="MRtrix gradient table (x y z b rows), as -grad")
    add_model_options(mask, MaskParams)
    mask.add_argument("--quiet", action="store_true", help="no summary")
    mask.set_defaults(func=_mask)


def _mask(args: argparse.Namespace) -> int:
    params = params_from_args(MaskParams, args)
    from service.cli.input_checks import check_inputs, input_problem
    from worker.errors import InputError
    from worker.jobs.fod.mask import MASK_KIND, run_mask

    if (args.bval is None) != (args.bvec is None):
        raise CommandError("give --bval and --bvec together (FSL gradients), or --grad, or neither for a .mif "
                           "with a dw_scheme")
    if args.grad is not None and args.bval is not None:
        raise CommandError("give either --grad or --bval/--bvec, not both")
    inputs = {"dwi": args.input, "bval": args.bval, "bvec": args.bvec, "grad": args.grad}
    check_inputs(MASK_KIND, inputs, params, read_through=False)
    with output_prefix(args.out_prefix) as prefix:
        try:
            sidecar = run_mask(args.input, prefix, params, bval=args.bval, bvec=args.bvec, grad=args.grad,
                               inflate_threads=len(os.sched_getaffinity(0)))
        except InputError as exc:
            raise CommandError(input_problem(exc, inputs)) from None
    print_warnings(sidecar)
    if not args.quiet:
        print(f"brain mask of {sidecar['voxels']} voxels from shells b = "
              f"{', '.join(f'{b:g}' for b in sidecar['shells'])}, {sidecar['seconds']['total']:.2f} s; wrote "
              f"{', '.join(sidecar['outputs'].values())}")
    return 0
