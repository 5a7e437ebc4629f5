"""The ``fibertensor`` command line.

Each sub-command lives in its own module with a ``register(subparsers)`` function that
adds its parser and sets ``func`` (called with the parsed namespace, returns an exit code).
"""

from __future__ import annotations

import argparse
import importlib
import sys

__all__ = ["main", "build_parser"]

_COMMAND_MODULES = (
    "service.cli.peaks",
    "service.cli.server",
    "service.cli.client",
    "service.cli.compress",
    "service.cli.conv",
    "service.cli.batch",
)


class CommandError(Exception):
    """A user-facing failure: printed as one line ``fibertensor: error: ...``, exit code 2."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fibertensor",
        description="Diffusion-MRI tensor jobs on the GPU (or CPU): fiber peaks, factorized conv, FP16 compression.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in _COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except CommandError as exc:
        print(f"fibertensor: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("fibertensor: interrupted", file=sys.stderr)
        return 130
