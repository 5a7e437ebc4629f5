"""``fibertensor mtnormalise``: a multi-tissue fit's compartments → the same, intensity
normalised, as MRtrix3's ``mtnormalise``.

Calls the function the ``mtnormalise`` job runs
(:func:`worker.jobs.fod.normalise.run_mtnormalise`), locally, without the service.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from service.cli import CommandError
from service.cli.model_options import add_model_options, params_from_args
from service.cli.response import output_prefix, print_warnings
from worker.params.fod import MtNormaliseParams

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    normalise = subparsers.add_parser(
        "mtnormalise",
        help="intensity normalisation of a multi-tissue fit's WM FOD, GM and CSF as MRtrix3 mtnormalise",
        description="Normalise the compartments of a multi-tissue fit (fibertensor fod's OUT_PREFIX_wmfod, _gm, "
        "_csf) as MRtrix3 mtnormalise: within the mask, their balanced sum is driven to a reference value by a "
        "smooth field, which each is divided by. Writes OUT_PREFIX_wmfod, _gm, _csf (in the inputs' formats) and "
        "OUT_PREFIX_mtnormalise.json.",
    )
    normalise.add_argument("compartments", type=Path, nargs="+", metavar="WMFOD [GM CSF]",
                           help="the WM FOD, then the GM and CSF compartments (.nii, .nii.gz, .mif, .mif.gz)")
    normalise.add_argument("out_prefix", metavar="OUT_PREFIX", help="outputs are OUT_PREFIX_<name> (plain <name> "
                           "inside OUT_PREFIX when it is a folder or ends in /)")
    normalise.add_argument("--mask", type=Path, required=True, help="brain mask on the compartments' grid "
                           "(fibertensor mask, dwi2mask)")
    add_model_options(normalise, MtNormaliseParams)
    normalise.add_argument("--quiet", action="store_true", help="no summary")
    normalise.set_defaults(func=_mtnormalise)


def _mtnormalise(args: argparse.Namespace) -> int:
    params = params_from_args(MtNormaliseParams, args)
    from service.cli.input_checks import check_inputs, input_problem
    from worker.errors import InputError
    from worker.jobs.fod.normalise import COMPARTMENTS, MTNORMALISE_KIND, run_mtnormalise

    if len(args.compartments) > len(COMPARTMENTS):
        raise CommandError(f"give at most {len(COMPARTMENTS)} compartments, the WM FOD, GM and CSF in this order, "
                           f"not {len(args.compartments)}")
    inputs = {**dict(zip(COMPARTMENTS, args.compartments)), "mask": args.mask}
    check_inputs(MTNORMALISE_KIND, inputs, params, read_through=False)
    with output_prefix(args.out_prefix) as prefix:
        try:
            sidecar = run_mtnormalise(prefix, params, **inputs)
        except InputError as exc:
            raise CommandError(input_problem(exc, inputs)) from None
    print_warnings(sidecar)
    if not args.quiet:
        factors = ", ".join(f"{role} {factor:.4g}" for role, factor in sidecar["balance_factors"].items())
        print(f"normalised on {sidecar['voxels']['kept']} of the mask's {sidecar['voxels']['mask']} voxels, balance "
              f"factors {factors}, {sidecar['seconds']['total']:.2f} s; wrote {', '.join(sidecar['outputs'].values())}")
    return 0
