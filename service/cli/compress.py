"""``fibertensor compress`` and ``fibertensor decompress``: Tucker compression of NIfTI volumes.

Both call the functions the ``compress``/``decompress`` jobs run
(:mod:`worker.jobs.compress`), locally, without the service.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from service.cli import CommandError
from service.cli.input_checks import check_inputs, input_problem
from service.cli.model_options import add_model_options, params_from_args
from service.cli.output_checks import check_output_folder
from worker.errors import InputError
from worker.job_kinds import kind_named
from worker.params.compress import CompressParams, DecompressParams

__all__ = ["register"]


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "compress",
        help="compress a NIfTI volume to an error target (--tol, --abs or --psnr) into an .npz archive",
        description="A Tucker decomposition (ST-HOSVD, core by an FP16/FP32/FP64 tensor-times-matrix chain "
        "with Kronecker-product scaling), its core and factors quantised and entropy-coded, and the residual "
        "coded so that the result meets one target: relative Frobenius error (--tol), largest absolute error "
        "(--abs, guaranteed) or PSNR (--psnr). Prints the compression ratio, the three errors measured on the "
        "result, the TTMc bound and phase times; --report-dwi adds what the error does to DTI and CSD peaks.",
    )
    p.add_argument("input", help="3D–5D NIfTI volume (.nii or .nii.gz)")
    p.add_argument("output", help="archive to write (.npz)")
    add_model_options(p, CompressParams)
    p.add_argument("--bval", help="FSL b-values file of the DWI (with --bvec), for --report-dwi")
    p.add_argument("--bvec", help="FSL b-vectors file of the DWI (with --bval), for --report-dwi")
    p.set_defaults(func=_compress)

    d = subparsers.add_parser(
        "decompress",
        help="restore a NIfTI volume from a compress archive",
        description="Rebuilds the volume from the Tucker archive with its original header and affine.",
    )
    d.add_argument("input", help="archive written by 'fibertensor compress' (.npz)")
    d.add_argument("output", help="NIfTI volume to write (.nii or .nii.gz)")
    d.set_defaults(func=_decompress)


def _compress(args: argparse.Namespace) -> int:
    from worker.jobs.compress import JOB_KINDS, compress_file

    params = params_from_args(CompressParams, args)
    if not args.output.endswith(".npz"):
        raise CommandError(f"output must end in .npz, got {args.output}")
    inputs = {"volume": args.input, **{k: getattr(args, k) for k in ("bval", "bvec") if getattr(args, k)}}
    check_inputs(kind_named(JOB_KINDS, "compress"), inputs, params, read_through=False)
    check_output_folder(Path(args.output).parent, "output")
    try:
        report = compress_file(args.input, args.output, params, bval=args.bval, bvec=args.bvec)
    except InputError as exc:
        raise CommandError(input_problem(exc, inputs)) from None
    except (RuntimeError, FileNotFoundError) as exc:
        raise CommandError(str(exc)) from None
    ttmc = report["ttmc"]
    mode, value = params.target
    print(f"{args.output}: ranks {'x'.join(map(str, report['ranks']))} of shape {'x'.join(map(str, report['shape']))}")
    print(f"  compression ratio   {report['compression_ratio']:.2f}  ({report['archive_bytes']} bytes; core "
          f"{report['bytes']['core']}, factors {report['bytes']['factors']}, residual {report['bytes']['residual']})")
    print(f"  target              {mode} {value:g}")
    print(f"  relative error      {report['relative_error']:.3e}")
    print(f"  max error           {report['max_error']:.4g}")
    print(f"  PSNR                {report['psnr']:.2f} dB")
    print(f"  TTMc bound          {report['bound']:.3e}  relative, {ttmc['precision']} {report['scaling']} scaling, "
          f"order {ttmc['order']}, core computed in {report['core_precision']}")
    times = ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in report["times"].items())
    phases = ", ".join(f"{k} {v * 1e3:.2f}" for k, v in ttmc["times"].items())
    print(f"  times               {times}")
    print(f"  TTMc phases (ms)    {phases}  [{ttmc['backend']}, gemm {ttmc['gemm']}]")
    if "dwi" in report:
        dwi = report["dwi"]
        print(f"  DWI                 FA median |diff| {dwi['fa_median_abs_diff']:.4f}, MD median |diff| "
              f"{dwi['md_median_abs_diff']:.3e} mm2/s, fibre count agreement {dwi['fibre_count_agreement']:.3f}, "
              f"peak angle p95 {dwi['peak_angle_p95']:.2f} deg ({dwi['voxels']} voxels)")
    return 0


def _decompress(args: argparse.Namespace) -> int:
    from worker.jobs.compress import JOB_KINDS, decompress_file

    if not (args.output.endswith(".nii") or args.output.endswith(".nii.gz")):
        raise CommandError(f"output must end in .nii or .nii.gz, got {args.output}")
    check_inputs(kind_named(JOB_KINDS, "decompress"), {"archive": args.input}, DecompressParams())
    check_output_folder(Path(args.output).parent, "output")
    try:
        report = decompress_file(args.input, args.output)
    except (InputError, FileNotFoundError) as exc:
        raise CommandError(getattr(exc, "detail", str(exc))) from None
    errors = (f"relative error {report['relative_error']:.3e}, max error {report['max_error']:.4g}, "
              f"PSNR {report['psnr']:.2f} dB" if report.get("max_error") is not None
              else f"relative error {report['relative_error']:.3e}")
    print(f"{args.output}: shape {'x'.join(map(str, report['shape']))}, {report['dtype']}, archive version "
          f"{report['version']}, {errors} at compression")
    return 0
