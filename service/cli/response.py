"""``fibertensor response``: a DWI → response functions, as MRtrix3's ``dwi2response
dhollander`` (WM, GM, CSF) or ``dwi2response tournier`` (single-fibre WM).

Calls the function the ``response`` job runs (:func:`worker.jobs.fod.response.run_response`),
locally, without the service. :func:`add_dwi_arguments` and :func:`dwi_inputs` are the DWI
arguments ``fibertensor fod`` shares.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path
from typing import Iterator

from service.cli import CommandError
from service.cli.model_options import add_model_options, params_from_args
from service.cli.output_checks import check_output_folder
from worker.params.fod import ResponseParams

__all__ = ["register", "add_dwi_arguments", "dwi_inputs", "output_prefix", "print_warnings"]


def add_dwi_arguments(parser: argparse.ArgumentParser, *, mask: bool = True) -> None:
    """DWI OUT_PREFIX and the gradient options (and ``mask``: the mask option), as dwi2fod and
    dwi2response name them."""
    parser.add_argument("input", type=Path, metavar="DWI", help="4D diffusion-weighted series (.nii, .nii.gz, "
                        ".mif, .mif.gz); a .mif may carry its gradients (dw_scheme)")
    parser.add_argument("out_prefix", metavar="OUT_PREFIX", help="outputs are OUT_PREFIX_<name> (plain "
                        "<name> inside OUT_PREFIX when it is a folder or ends in /)")
    parser.add_argument("--bval", type=Path, help="FSL b-values file (with --bvec), as -fslgrad")
    parser.add_argument("--bvec", type=Path, help="FSL b-vectors file (with --bval), as -fslgrad")
    parser.add_argument("--grad", type=Path, help="MRtrix gradient table (x y z b rows), as -grad")
    if mask:
        parser.add_argument("--mask", type=Path, help="3D mask image on the DWI grid (NIfTI or MRtrix)")


def dwi_inputs(args: argparse.Namespace) -> dict[str, Path | None]:
    """The DWI's input files by job slot (the mask's where the command takes one)."""
    if (args.bval is None) != (args.bvec is None):
        raise CommandError("give --bval and --bvec together (FSL gradients), or --grad, or neither for a .mif "
                           "with a dw_scheme")
    if args.grad is not None and args.bval is not None:
        raise CommandError("give either --grad or --bval/--bvec, not both")
    inputs = {"dwi": args.input, "bval": args.bval, "bvec": args.bvec, "grad": args.grad}
    return {**inputs, "mask": args.mask} if hasattr(args, "mask") else inputs


@contextlib.contextmanager
def output_prefix(text: str) -> Iterator[Path]:
    """OUT_PREFIX as given, its folder made when it ends in ``/`` (with its missing parents),
    and those folders removed again where the command fails and they are still empty (a failed
    job leaves nothing behind); a missing parent folder refused."""
    prefix = Path(text)
    check_output_folder(prefix if text.endswith("/") else prefix.parent, "OUT_PREFIX")
    made = [folder for folder in (prefix, *prefix.parents) if not folder.exists()] if text.endswith("/") else []
    if text.endswith("/"):
        prefix.mkdir(parents=True, exist_ok=True)
    elif not prefix.is_dir() and not prefix.parent.is_dir():
        raise CommandError(f"the folder of OUT_PREFIX {str(prefix)!r} does not exist; create it first")
    try:
        yield prefix
    except BaseException:
        for folder in made:  # the deepest first
            if any(folder.iterdir()):
                break
            folder.rmdir()
        raise


def print_warnings(sidecar: dict) -> None:
    for warning in sidecar["warnings"]:
        print(f"fibertensor: warning: {warning}", file=sys.stderr)


def register(subparsers: argparse._SubParsersAction) -> None:
    response = subparsers.add_parser(
        "response",
        help="response functions of a DWI as MRtrix3 dwi2response (dhollander or tournier)",
        description="Estimate response functions from the DWI alone and write them in MRtrix3's format: "
        "dhollander (dwi2response dhollander) writes OUT_PREFIX_wm.txt, _gm.txt, _csf.txt and the voxels they came "
        "from (OUT_PREFIX_voxels, 3 volumes: CSF, GM, WM); tournier (dwi2response tournier) writes OUT_PREFIX_wm.txt "
        "of the highest shell and its single-fibre voxels (OUT_PREFIX_voxels); images in the DWI's format, and "
        "OUT_PREFIX_response.json.",
    )
    add_dwi_arguments(response)
    add_model_options(response, ResponseParams)
    response.add_argument("--quiet", action="store_true", help="no summary")
    response.set_defaults(func=_response)


def _response(args: argparse.Namespace) -> int:
    params = params_from_args(ResponseParams, args)
    from service.cli.input_checks import check_inputs, input_problem
    from worker.errors import InputError
    from worker.jobs.fod.response import RESPONSE_KIND, run_response

    inputs = dwi_inputs(args)
    check_inputs(RESPONSE_KIND, inputs, params, read_through=False)
    with output_prefix(args.out_prefix) as prefix:
        try:
            sidecar = run_response(args.input, prefix, params, **{k: v for k, v in inputs.items() if k != "dwi"},
                                   inflate_threads=len(os.sched_getaffinity(0)))
        except InputError as exc:
            raise CommandError(input_problem(exc, inputs)) from None
    print_warnings(sidecar)
    if not args.quiet:
        voxels = ", ".join(f"{count} {tissue.upper()}" for tissue, count in sidecar["voxels"].items())
        print(f"responses from {voxels} voxels, shells b = "
              f"{', '.join(f'{b:g}' for b in sidecar['shells'])}, {sidecar['seconds']['total']:.2f} s; wrote "
              f"{', '.join(sidecar['outputs'].values())}")
    return 0
