"""``fibertensor compress`` and ``fibertensor decompress``: Tucker compression of NIfTI volumes.

Both call the functions the ``compress``/``decompress`` jobs run
(:mod:`worker.jobs.compress`), locally, without the service.
"""

from __future__ import annotations

import argparse

from service.cli import CommandError
from service.cli.input_checks import check_inputs, input_problem
from service.cli.model_options import add_model_options, params_from_args
from worker.errors import InputError
from worker.params.compress import CompressParams, DecompressParams

__all__ = ["register"]


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "compress",
        help="Tucker-compress a NIfTI volume into an .npz archive (FP16 TTMc, error bound)",
        description="ST-HOSVD with a relative error tolerance or fixed ranks; the core is an "
        "FP16/FP32/FP64 tensor-times-matrix chain with Kronecker-product scaling. Prints the "
        "compression ratio, the achieved relative error, the TTMc bound and phase times.",
    )
    p.add_argument("input", help="3D–5D NIfTI volume (.nii or .nii.gz)")
    p.add_argument("output", help="archive to write (.npz)")
    add_model_options(p, CompressParams)
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
    from worker.jobs.compress import compress_file

    params = params_from_args(CompressParams, args)
    if not args.output.endswith(".npz"):
        raise CommandError(f"output must end in .npz, got {args.output}")
    inputs = {"volume": args.input}
    check_inputs("compress", inputs, params, read_through=False)
    try:
        report = compress_file(args.input, args.output, params)
    except InputError as exc:
        raise CommandError(input_problem(exc, inputs)) from None
    except (RuntimeError, FileNotFoundError) as exc:
        raise CommandError(str(exc)) from None
    ttmc = report["ttmc"]
    tol = "ranks fixed" if report["tolerance"] is None else f"tolerance {report['tolerance']:.3g}"
    print(f"{args.output}: ranks {'x'.join(map(str, report['ranks']))} of shape {'x'.join(map(str, report['shape']))}")
    print(f"  compression ratio   {report['compression_ratio']:.2f}")
    print(f"  relative error      {report['relative_error']:.3e}  ({tol})")
    print(f"  TTMc bound          {report['bound']:.3e}  relative, {ttmc['precision']} {report['scaling']} scaling, "
          f"order {ttmc['order']}, core stored as {report['core_precision']}")
    times = ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in report["times"].items())
    phases = ", ".join(f"{k} {v * 1e3:.2f}" for k, v in ttmc["times"].items())
    print(f"  times               {times}")
    print(f"  TTMc phases (ms)    {phases}  [{ttmc['backend']}, gemm {ttmc['gemm']}]")
    return 0


def _decompress(args: argparse.Namespace) -> int:
    from worker.jobs.compress import decompress_file

    if not (args.output.endswith(".nii") or args.output.endswith(".nii.gz")):
        raise CommandError(f"output must end in .nii or .nii.gz, got {args.output}")
    check_inputs("decompress", {"archive": args.input}, DecompressParams())
    try:
        report = decompress_file(args.input, args.output)
    except (InputError, FileNotFoundError) as exc:
        raise CommandError(getattr(exc, "detail", str(exc))) from None
    print(f"{args.output}: shape {'x'.join(map(str, report['shape']))}, {report['dtype']}, "
          f"relative error at compression {report['relative_error']:.3e}")
    return 0
