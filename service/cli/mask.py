"""``fibertensor mask``: a DWI → brain mask, as MRtrix3's ``dwi2mask``.

Calls the function the ``mask`` job runs (:func:`worker.jobs.fod.mask.run_mask`), locally,
without the service.
"""

from __future__ import annotations

import argparse
import os

from service.cli import CommandError
from service.cli.model_options import add_model_options, params_from_args
from service.cli.response import add_dwi_arguments, dwi_inputs, output_prefix, print_warnings
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
    add_dwi_arguments(mask, mask=False)
    add_model_options(mask, MaskParams)
    mask.add_argument("--quiet", action="store_true", help="no summary")
    mask.set_defaults(func=_mask)


def _mask(args: argparse.Namespace) -> int:
    params = params_from_args(MaskParams, args)
    from service.cli.input_checks import check_inputs, input_problem
    from worker.errors import InputError
    from worker.jobs.fod.mask import MASK_KIND, run_mask

    inputs = dwi_inputs(args)
    check_inputs(MASK_KIND, inputs, params, read_through=False)
    with output_prefix(args.out_prefix) as prefix:
        try:
            sidecar = run_mask(args.input, prefix, params, **{k: v for k, v in inputs.items() if k != "dwi"},
                               inflate_threads=len(os.sched_getaffinity(0)))
        except InputError as exc:
            raise CommandError(input_problem(exc, inputs)) from None
    print_warnings(sidecar)
    if not args.quiet:
        print(f"brain mask of {sidecar['voxels']} voxels from shells b = "
              f"{', '.join(f'{b:g}' for b in sidecar['shells'])}, {sidecar['seconds']['total']:.2f} s; wrote "
              f"{', '.join(sidecar['outputs'].values())}")
    return 0
