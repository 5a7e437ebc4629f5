"""``fibertensor sample``: a small phantom with known truth to try a job on."""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["register"]


def _at_least(low: float, kind=int):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a{'n integer' if kind is int else ' number'}") from None
        if not value >= low:
            raise argparse.ArgumentTypeError(f"must be at least {low:g}, not {text}")
        return value
    return parse


def register(subparsers: argparse._SubParsersAction) -> None:
    sample = subparsers.add_parser(
        "sample", help="write a small phantom with known truth: an FOD volume, or a multi-shell DWI (--dwi)",
        description="Write an FOD phantom (OUTDIR/fod.nii.gz, mask.nii.gz) for the peaks and fixels jobs or, with "
        "--dwi, a multi-shell DWI phantom (OUTDIR/dwi.nii.gz with dwi.bval and dwi.bvec, mask.nii.gz) for the "
        "response and fod jobs; with the ground truth (truth_*) and sample.json describing the files.")
    sample.add_argument("outdir", type=Path, metavar="OUTDIR", help="folder to write into (created)")
    sample.add_argument("--dwi", action="store_true",
                        help="a DWI (b = 0 ×5, 1000 ×30, 2000 ×60; WM of 1-3 crossing fibres, GM and CSF in partial "
                        "volume, Rician noise) instead of an FOD")
    sample.add_argument("--shape", type=_at_least(1), nargs=3, metavar=("X", "Y", "Z"),
                        help="grid in voxels of 2 mm (default: 24 24 12; with --dwi 40 40 20, where dhollander's "
                        "single-fibre WM, 0.5 %% of the WM, is about ten voxels)")
    sample.add_argument("--lmax", type=int, default=8, choices=[2, 4, 6, 8, 10, 12],
                        help="FOD: SH degree (default: 8)")
    sample.add_argument("--noise", type=_at_least(0.0, float), default=0.02,
                        help="FOD: standard deviation of the Gaussian noise on the SH coefficients (default: 0.02)")
    sample.add_argument("--snr", type=_at_least(1.0, float), default=20.0,
                        help="DWI: b = 0 white-matter signal over the Rician noise's sigma (default: 20)")
    sample.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    sample.set_defaults(func=_sample)


def _sample(args: argparse.Namespace) -> int:
    from service.cli.output_checks import check_output_folder
    from worker.sample import write_dwi_sample, write_sample

    check_output_folder(args.outdir, "OUTDIR")
    shape = {"shape": tuple(args.shape)} if args.shape else {}  # else each writer's own default
    if args.dwi:
        paths = write_dwi_sample(args.outdir, snr=args.snr, seed=args.seed, **shape)
        step = (f"fibertensor fod {paths['dwi']} {args.outdir / 'out'}/ --bval {paths['bval']} --bvec {paths['bvec']} "
                f"--mask {paths['mask']} --peaks")
    else:
        paths = write_sample(args.outdir, lmax=args.lmax, noise=args.noise, seed=args.seed, **shape)
        step = f"fibertensor peaks {paths['fod']} {args.outdir / 'out'}"
    print(f"wrote {', '.join(str(p) for p in paths.values())}")
    print(f"next: {step}")
    return 0
