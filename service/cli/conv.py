"""``fibertensor conv cp|tucker`` and ``fibertensor decompose cp|tucker``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from service.cli import CommandError

__all__ = ["register"]


def _ranks(text: str) -> tuple[int, int]:
    try:
        d1, d2 = (int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected D1,D2 (two integers), got {text!r}") from None
    return d1, d2


def _padding(text: str):
    if text == "same":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected 'same' or an integer, got {text!r}") from None


def register(subparsers: argparse._SubParsersAction) -> None:
    conv = subparsers.add_parser(
        "conv",
        help="apply a CP- or Tucker-factorized conv layer to an input (GPU or CPU)",
        description="Convolve an (N, C, H, W) .npy or a NIfTI volume (slice by slice, 4th axis = channels) "
        "with a factorized kernel; writes OUT and OUT's stem + .json (sidecar).",
    )
    conv_sub = conv.add_subparsers(dest="family", required=True, metavar="FAMILY")
    for family, text in (("cp", "fused CP conv (Reustle et al.)"), ("tucker", "1x1 -> core conv (TDC) -> 1x1")):
        p = conv_sub.add_parser(family, help=text, description=text)
        p.add_argument("--input", type=Path, required=True, metavar="X", help=".npy (N, C, H, W) or .nii/.nii.gz")
        source = p.add_mutually_exclusive_group(required=True)
        source.add_argument("--factors", type=Path, metavar="F.npz", help="factor archive (see docs/conv.md)")
        source.add_argument("--kernel", type=Path, metavar="K.npy", help="dense (T, C, kh, kw) kernel, decomposed first")
        if family == "cp":
            p.add_argument("--rank", type=int, help="CP rank when --kernel is given")
        else:
            p.add_argument("--ranks", type=_ranks, metavar="D1,D2", help="Tucker ranks when --kernel is given")
            p.add_argument("--tiling", choices=["model", "tdc", "exhaustive"], default="model",
                           help="core tiles: fitted cost model (default), TDC's analytic rule, or exhaustive "
                                "timing on the GPU")
        p.add_argument("--out", type=Path, required=True, metavar="Y", help="output .npy, or .nii/.nii.gz for a NIfTI input")
        p.add_argument("--stride", type=int, default=1)
        p.add_argument("--padding", type=_padding, default="same", help="'same' (default, stride 1) or pixels")
        p.add_argument("--dilation", type=int, default=1)
        p.add_argument("--backend", choices=["auto", "cpu", "cuda"], default="auto")
        p.add_argument("--quiet", action="store_true", help="no summary line")
        p.set_defaults(func=_conv)

    dec = subparsers.add_parser(
        "decompose",
        help="factorize a dense conv kernel: CP by ALS or Tucker-2 by truncated HOSVD",
        description="Decompose a (T, C, kh, kw) kernel .npy into a factor archive usable by 'fibertensor conv'.",
    )
    dec_sub = dec.add_subparsers(dest="family", required=True, metavar="FAMILY")
    for family in ("cp", "tucker"):
        p = dec_sub.add_parser(family, help=f"{family.upper() if family == 'cp' else 'Tucker-2'} decomposition")
        p.add_argument("--kernel", type=Path, required=True, metavar="K.npy")
        if family == "cp":
            p.add_argument("--rank", type=int, required=True)
            p.add_argument("--seed", type=int, default=0, help="seed of the ALS start (default 0)")
            p.add_argument("--max-iter", type=int, default=1000, help="ALS sweeps at most (default 1000)")
        else:
            p.add_argument("--ranks", type=_ranks, required=True, metavar="D1,D2",
                           help="input-channel rank D1 and output-channel rank D2")
        p.add_argument("--bias", type=Path, metavar="B.npy", help="bias (T) stored with the factors")
        p.add_argument("--out", type=Path, required=True, metavar="F.npz")
        p.set_defaults(func=_decompose)


def _sidecar_path(out: Path) -> Path:
    name = out.name
    for suffix in (".nii.gz", ".nii", ".npy"):
        if name.endswith(suffix):
            return out.with_name(name[: -len(suffix)] + ".json")
    return out.with_name(name + ".json")


def _conv(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from worker.jobs.conv import CPConvParams, TuckerConvParams, run_conv
    from worker.errors import InputError

    common = dict(stride=args.stride, padding=args.padding, dilation=args.dilation, backend=args.backend)
    try:
        if args.family == "cp":
            params = CPConvParams(rank=args.rank, **common)
        else:
            d1, d2 = args.ranks if args.ranks else (None, None)
            params = TuckerConvParams(rank_in=d1, rank_out=d2, tiling=args.tiling, **common)
    except ValidationError as exc:
        problem = exc.errors()[0]
        raise CommandError(f"--{str(problem['loc'][0]).replace('_', '-')}: {problem['msg']}") from None
    for path, what in ((args.input, "input"), (args.factors, "factors"), (args.kernel, "kernel")):
        if path is not None and not path.is_file():
            raise CommandError(f"{what} file {str(path)!r} does not exist")
    try:
        sidecar = run_conv(args.family, args.input, args.out, _sidecar_path(args.out), params,
                           factors=args.factors, kernel=args.kernel)
    except InputError as exc:
        raise CommandError(exc.detail) from None
    except (ValueError, RuntimeError) as exc:
        raise CommandError(str(exc)) from None
    if not args.quiet:
        out = sidecar["output"]
        err = sidecar["layer"]["decomposition_relative_error"]
        extra = f", decomposition error {err:.3g}" if err is not None else ""
        print(f"{args.out}: {tuple(out['shape_nchw'])} on {sidecar['backend']} in "
              f"{sidecar['seconds']['conv']:.3f} s{extra}", file=sys.stderr)
    return 0


def _decompose(args: argparse.Namespace) -> int:
    import numpy as np

    from gpu.conv.decompose import cp_als, tucker2_hosvd
    from worker.io.conv_arrays import load_kernel, save_factors
    from worker.errors import InputError

    if not args.kernel.is_file():
        raise CommandError(f"kernel file {str(args.kernel)!r} does not exist")
    try:
        kernel = load_kernel(args.kernel)
        bias = None
        if args.bias is not None:
            bias = np.load(args.bias, allow_pickle=False)
            if bias.shape != (kernel.shape[0],) or not np.all(np.isfinite(bias)):
                raise CommandError(f"--bias must hold {kernel.shape[0]} finite values (one per output channel)")
        if args.family == "cp":
            d = cp_als(kernel, args.rank, max_iter=args.max_iter, seed=args.seed)
            save_factors(args.out, {"S": d.s, "H": d.h, "W": d.w, "T": d.t, "bias": bias})
            note = "" if d.converged else f" (stopped after {d.iterations} sweeps without converging)"
            print(f"{args.out}: CP rank {args.rank}, relative error {d.relative_error:.6g}, "
                  f"{d.iterations} ALS sweeps{note}")
        else:
            d = tucker2_hosvd(kernel, args.ranks)
            save_factors(args.out, {"U_in": d.u_in, "core": d.core, "U_out": d.u_out, "bias": bias})
            print(f"{args.out}: Tucker-2 ranks {args.ranks[0]},{args.ranks[1]}, relative error {d.relative_error:.6g}")
    except InputError as exc:
        raise CommandError(exc.detail) from None
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    return 0
