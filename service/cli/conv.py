"""``fibertensor conv cp|tucker`` and ``fibertensor decompose cp|tucker``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from service.cli import CommandError
from service.cli.input_checks import check_inputs
from service.cli.model_options import add_model_options, params_from_args
from worker.job_kinds import kind_named
from worker.params.conv import CPConvParams, CPDecomposeParams, TuckerConvParams, TuckerDecomposeParams

__all__ = ["register"]

_CONV_PARAMS = {"cp": CPConvParams, "tucker": TuckerConvParams}
_DECOMPOSE_PARAMS = {"cp": CPDecomposeParams, "tucker": TuckerDecomposeParams}


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
        p.add_argument("--out", type=Path, required=True, metavar="Y", help="output .npy, or .nii/.nii.gz for a NIfTI input")
        add_model_options(p, _CONV_PARAMS[family])
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
        add_model_options(p, _DECOMPOSE_PARAMS[family])
        p.add_argument("--bias", type=Path, metavar="B.npy", help="bias (T) stored with the factors")
        p.add_argument("--out", type=Path, required=True, metavar="F.npz")
        p.set_defaults(func=_decompose)


def _sidecar_path(out: Path) -> Path:
    name = out.name
    for suffix in (".nii.gz", ".nii", ".npy"):
        if name.endswith(suffix):
            return out.with_name(name[: -len(suffix)] + ".json")
    return out.with_name(name + ".json")


def _require_files(*pairs: tuple[Path | None, str]) -> None:
    for path, what in pairs:
        if path is not None and not path.is_file():
            raise CommandError(f"{what} file {str(path)!r} does not exist")


def _conv(args: argparse.Namespace) -> int:
    from worker.errors import InputError
    from worker.jobs.conv import JOB_KINDS, run_conv

    params = params_from_args(_CONV_PARAMS[args.family], args)
    inputs = {"input": args.input, "factors": args.factors, "kernel": args.kernel}
    check_inputs(kind_named(JOB_KINDS, f"{args.family}-conv"), inputs, params)
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
    from worker.errors import InputError
    from worker.jobs.conv import decompose_kernel_file

    params = params_from_args(_DECOMPOSE_PARAMS[args.family], args)
    _require_files((args.kernel, "kernel"), (args.bias, "bias"))
    try:
        report = decompose_kernel_file(args.kernel, args.out, params, bias_path=args.bias)
    except InputError as exc:
        raise CommandError(exc.detail) from None
    error = f"relative error {report['relative_error']:.6g}"
    if report["family"] == "cp":
        note = "" if report["converged"] else f" (stopped after {report['iterations']} sweeps without converging)"
        print(f"{args.out}: CP rank {report['rank']}, {error}, {report['iterations']} ALS sweeps{note}")
    else:
        print(f"{args.out}: Tucker-2 ranks {report['rank'][0]},{report['rank'][1]}, {error}")
    return 0
