"""``fibertensor peaks``."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from service.cli import CommandError
from service.cli.model_options import add_model_options, params_from_args
from service.cli.progress_bar import percent_bar
from worker.params.peaks import PeaksParams

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    peaks = subparsers.add_parser(
        "peaks",
        help="fiber directions of an SH FOD volume (SS-HOPM, GPU or CPU)",
        description="Find the fiber directions (FOD maxima) of a 4D NIfTI or MRtrix image of SH coefficients and "
        "write OUT_PREFIX_peaks (MRtrix3 sh2peaks layout), _amplitudes, _count (NuFO), the fODF metrics "
        "(_afd_max, _afd_total, _afd_sum, _peak_fraction, _rgb), the QC picture OUT_PREFIX_qc.png and the "
        "sidecar OUT_PREFIX.json; images in the input's format unless --format says otherwise.",
    )
    peaks.add_argument("input", type=Path, metavar="IN",
                       help="4D image of even-order SH coefficients (.nii, .nii.gz, .mif, .mif.gz, .mih)")
    peaks.add_argument("out_prefix", metavar="OUT_PREFIX",
                       help="folder and start of the output file names: out/sub-01 writes out/sub-01_peaks.nii.gz, "
                       "out/sub-01_count.nii.gz, ... and out/sub-01.json; a folder (ending in /, or one that exists) "
                       "gets peaks.nii.gz, count.nii.gz, ... and peaks.json (the folder is created)")
    peaks.add_argument("--mask", type=Path, help="3D mask image on the same grid (NIfTI or MRtrix)")
    add_model_options(peaks, PeaksParams)
    peaks.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    peaks.set_defaults(func=_peaks)


def _peaks(args: argparse.Namespace) -> int:
    params = params_from_args(PeaksParams, args)
    if params.backend != "cpu":
        from gpu.cuda.device import start_cuda_context

        start_cuda_context()  # while the imports below run
    from service.cli.input_checks import check_inputs, input_problem
    from service.cli.output_checks import check_output_folder
    from worker.errors import InputError
    from worker.jobs.peaks import JOB_KINDS, PeaksOutputs, run_peaks

    inputs = {"fod": args.input, "mask": args.mask}
    # as OUT_PREFIX of fibertensor fod: a folder when it ends in / or is one
    folder = args.out_prefix.endswith("/") or Path(args.out_prefix).is_dir()
    outputs = (PeaksOutputs.in_folder if folder else PeaksOutputs.with_prefix)(Path(args.out_prefix))
    (kind,) = JOB_KINDS  # the family's own kind: the registry would import every family
    check_inputs(kind, inputs, params, read_through=False)
    check_output_folder(outputs.folder, "OUT_PREFIX")
    try:
        # One job has the machine to itself: the volume inflates on all its cores.
        with percent_bar("peaks", args.quiet) as progress:
            sidecar = run_peaks(args.input, outputs, params, mask=args.mask, progress=progress,
                                inflate_threads=len(os.sched_getaffinity(0)))
    except InputError as exc:
        raise CommandError(input_problem(exc, inputs)) from None
    except (ValueError, RuntimeError) as exc:
        raise CommandError(str(exc)) from None
    for warning in sidecar["warnings"]:  # shown with --quiet too: they qualify the results
        print(f"fibertensor: warning: {warning}", file=sys.stderr)
    if not args.quiet:
        s = sidecar["seconds"]
        print(f"{sidecar['voxels_processed']} voxels, lmax {sidecar['lmax']}, backend {sidecar['backend']} "
              f"({sidecar['device']}): {sidecar['voxels_with_peaks']} with peaks, "
              f"{sidecar['nonfinite_voxels']} non-finite, {sidecar['starts_hit_cap']} climbs hit the iteration cap; "
              f"{s['total']:.2f} s (read {s['read']:.2f}, peaks {s['peaks_total']:.2f}, write {s['write']:.2f})")
        written = [name for names in sidecar["outputs"].values() for name in names]
        print(f"wrote {', '.join(written)} and {outputs.sidecar.name} in {outputs.folder}")
    return 0

