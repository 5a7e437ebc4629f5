"""``fibertensor compress`` and ``fibertensor decompress``: Tucker compression of NIfTI volumes.

Both call the functions the ``compress``/``decompress`` jobs run
(:mod:`worker.jobs.compress`), locally, without the service.
"""

from __future__ import annotations

import argparse

from pydantic import ValidationError

from service.cli import CommandError
from worker.jobs.compress import CompressParams, compress_file, decompress_file
from worker.errors import InputError

__all__ = ["register"]


def _ranks(text: str) -> list[int]:
    try:
        ranks = [int(v) for v in text.replace("x", ",").split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"ranks must be integers like 20,20,20,10, not {text!r}") from None
    if not ranks:
        raise argparse.ArgumentTypeError("ranks must list one integer per axis, e.g. 20,20,20,10")
    return ranks


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
    target = p.add_mutually_exclusive_group()
    target.add_argument("--tol", type=float, help="relative error ‖X−X̂‖_F/‖X‖_F to meet (default 1e-3)")
    target.add_argument("--ranks", type=_ranks, help="fixed ranks, one per axis, e.g. 20,20,20,10")
    p.add_argument("--precision", choices=("fp16", "fp32", "fp64"), default="fp16")
    p.add_argument("--scaling", choices=("kronecker", "onesided", "none"), default="kronecker")
    p.add_argument("--order", choices=("ssf", "given", "best"), default="ssf",
                   help="TTM order: smallest shared dimension first, as given, or least bound")
    p.add_argument("--hooi", type=int, default=0, metavar="SWEEPS", help="HOOI refinement sweeps (default 0)")
    p.add_argument("--on-overflow", choices=("fallback", "fail"), default="fallback",
                   help="on a non-finite TTMc result: recompute in a wider precision, or stop")
    p.add_argument("--backend", choices=("auto", "cpu", "cuda"), default="auto")
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
    try:
        params = CompressParams(
            tol=args.tol, ranks=args.ranks, precision=args.precision, scaling=args.scaling,
            order=args.order, hooi_sweeps=args.hooi, on_overflow=args.on_overflow, backend=args.backend,
        )
    except ValidationError as exc:
        raise CommandError("; ".join(e["msg"] for e in exc.errors())) from None
    if not args.output.endswith(".npz"):
        raise CommandError(f"output must end in .npz, got {args.output}")
    try:
        report = compress_file(args.input, args.output, params)
    except (InputError, RuntimeError, FileNotFoundError) as exc:
        raise CommandError(getattr(exc, "detail", str(exc))) from None
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
    if not (args.output.endswith(".nii") or args.output.endswith(".nii.gz")):
        raise CommandError(f"output must end in .nii or .nii.gz, got {args.output}")
    try:
        report = decompress_file(args.input, args.output)
    except (InputError, FileNotFoundError) as exc:
        raise CommandError(getattr(exc, "detail", str(exc))) from None
    print(f"{args.output}: shape {'x'.join(map(str, report['shape']))}, {report['dtype']}, "
          f"relative error at compression {report['relative_error']:.3e}")
    return 0
