"""``fibertensor fod``: a DWI → FODs by constrained spherical deconvolution, as MRtrix3's
``dwi2fod msmt_csd`` or ``dwi2fod csd``.

Calls the function the ``fod`` job runs (:func:`worker.jobs.fod.run_fod`), locally, without
the service.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from service.cli import CommandError
from service.cli.model_options import add_model_options, params_from_args
from service.cli.response import add_dwi_arguments, dwi_inputs, output_prefix, print_warnings
from worker.params.fod import FodParams

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    fod = subparsers.add_parser(
        "fod",
        help="FODs of a DWI by constrained spherical deconvolution as MRtrix3 dwi2fod (msmt_csd or csd)",
        description="Fit FODs to a DWI (dwi2fod) and write OUT_PREFIX_wmfod (and _gm, _csf for msmt_csd) in the "
        "DWI's image format, and OUT_PREFIX_fod.json. Without --response, the responses are estimated first and "
        "written: msmt_csd's as dwi2response dhollander (OUT_PREFIX_wm.txt, _gm.txt, _csf.txt), csd's as "
        "dwi2response tournier (OUT_PREFIX_wm.txt). With --peaks, the WM FOD's peaks follow, from the FOD in memory: "
        "what fibertensor peaks writes of OUT_PREFIX_wmfod (OUT_PREFIX_peaks, _amplitudes, _count, the fODF metrics, "
        "_qc.png, OUT_PREFIX_peaks.json), its options as --peaks-<option>.",
    )
    add_dwi_arguments(fod)
    fod.add_argument("--response", type=Path, nargs="+", metavar="RESPONSE",
                     help="response files WM [GM CSF] (MRtrix3 format, e.g. from fibertensor response), or WM CSF "
                     "for a two-tissue msmt_csd fit (single-shell data); csd takes WM alone")
    add_model_options(fod, FodParams)
    fod.add_argument("--quiet", action="store_true", help="no summary")
    fod.set_defaults(func=_fod)


def _fod(args: argparse.Namespace) -> int:
    params = params_from_args(FodParams, args)
    if params.backend != "cpu":
        from gpu.cuda.device import start_cuda_context

        start_cuda_context()  # while the imports and the read below run, as fibertensor peaks does
    from service.cli.input_checks import check_inputs, input_problem
    from worker.errors import InputError
    from worker.job_kinds import kind_named
    from worker.jobs.fod import JOB_KINDS, run_fod

    from worker.jobs.fod.response import TISSUES, listed_responses

    try:
        listed = listed_responses(list(args.response or []))
    except InputError as exc:
        raise CommandError(f"--response: {exc.detail}") from None
    responses = {tissue: path for tissue, path in zip(TISSUES, listed) if path is not None}
    inputs = {**dwi_inputs(args), **responses}
    check_inputs(kind_named(JOB_KINDS, "fod"), inputs, params, read_through=False)
    with output_prefix(args.out_prefix) as prefix:
        try:
            sidecar = run_fod(args.input, prefix, params, responses=responses,
                              **{k: inputs[k] for k in ("bval", "bvec", "grad", "mask")},
                              inflate_threads=len(os.sched_getaffinity(0)))
        except InputError as exc:
            raise CommandError(input_problem(exc, inputs)) from None
    print_warnings(sidecar)
    if not args.quiet:
        print(f"{params.algorithm} FODs (lmax {sidecar['lmax']['wmfod']}) in {sidecar['voxels_fitted']} voxels, "
              f"backend {sidecar['backend']}, {sidecar['seconds']['total']:.2f} s; wrote "
              f"{', '.join(sidecar['outputs'].values())}")
        if "estimated_responses" in sidecar:
            voxels = ", ".join(f"{count} {tissue.upper()}" for tissue, count in
                               sidecar["estimated_responses"]["voxels"].items())
            print(f"responses estimated from {voxels} voxels, {sidecar['seconds']['responses']:.2f} s")
        if "mtnormalise" in sidecar:
            normalised = sidecar["mtnormalise"]
            factors = ", ".join(f"{tissue.upper()} {factor:.4g}" for tissue, factor in
                                normalised["balance_factors"].items())
            print(f"normalised as mtnormalise within {normalised['mask']} ({normalised['voxels']['kept']} of "
                  f"{normalised['voxels']['mask']} voxels kept; balance factors {factors})")
        if "peaks" in sidecar:
            written = [name for names in sidecar["peaks"]["outputs"].values() for name in names]
            print(f"peaks of the WM FOD, {sidecar['seconds']['peaks']:.2f} s; wrote {', '.join(written)} and "
                  f"{sidecar['peaks']['sidecar']}")
    return 0
