"""The ``fibertensor`` command line.

Each sub-command lives in its own module with a ``register(subparsers)`` function that
adds its parser and sets ``func`` (called with the parsed namespace, returns an exit code).
Only the chosen sub-command's module is imported: the modules import job families (numba,
scipy, nibabel: most of a second), which ``fibertensor --help`` has no use for.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import logging
import os
import sys
from collections.abc import Collection

__all__ = ["main", "run", "build_parser", "COMMANDS"]

# Sub-command → (module that registers it, one-line help). The top-level listing is built from
# this table without importing the modules; a test checks it against what the modules register.
COMMANDS: dict[str, tuple[str, str]] = {
    "peaks": ("service.cli.peaks", "fiber directions of an SH FOD volume (SS-HOPM, GPU or CPU)"),
    "fixels": ("service.cli.fixels", "fixels of an SH FOD volume as MRtrix3 fod2fixel (FMLS; AFD, peak amplitude, dispersion)"),
    "mask": ("service.cli.mask", "brain mask of a DWI as MRtrix3 dwi2mask"),
    "response": ("service.cli.response", "response functions of a DWI as MRtrix3 dwi2response (dhollander or tournier)"),
    "fod": ("service.cli.fod", "FODs of a DWI by constrained spherical deconvolution as MRtrix3 dwi2fod (msmt_csd or csd)"),
    "mtnormalise": ("service.cli.mtnormalise",
                    "intensity normalisation of a multi-tissue fit's WM FOD, GM and CSF as MRtrix3 mtnormalise"),
    "sample": ("service.cli.sample", "write a small phantom with known truth: an FOD volume, or a multi-shell DWI (--dwi)"),
    "serve": ("service.cli.server", "run the REST API and a worker on this machine"),
    "worker": ("service.cli.server", "run a job worker (one per GPU)"),
    "submit": ("service.cli.client", "submit jobs to a fibertensor service"),
    "jobs": ("service.cli.client", "list, wait for, download or cancel jobs on a fibertensor service"),
    "compress": ("service.cli.compress",
                 "compress a NIfTI volume to an error target (--tol, --abs or --psnr) into an .npz archive"),
    "decompress": ("service.cli.compress", "restore a NIfTI volume from a compress archive"),
    "conv": ("service.cli.conv", "apply a CP- or Tucker-factorized conv layer to an input (GPU or CPU)"),
    "decompose": ("service.cli.conv",
                  "factorize a dense conv kernel: CP by ALS or Tucker-2 by truncated HOSVD"),
    "warmup": ("service.cli.warmup", "compile the kernels into numba's cache, so no job waits for a compile"),
    "bids": ("service.cli.bids",
             "FODs, fiber peaks, fODF metrics and fixels of a BIDS dataset's DWIs or FODs (BIDS App)"),
    "batch": ("service.cli.batch", "run a job on many inputs as one pipeline (reading, computing and writing overlap)"),
}


# Commands whose work runs in compiled loops, kernels, or numpy passes on the process's own
# threads, not in numpy's BLAS: one BLAS thread, unless the user chose. OpenBLAS starts a
# spinning thread per core as numpy loads, which on a 16-core host cost a small job a seventh
# of its wall time, and its threaded products called from every core at once queue for one
# another (docs/decisions/blas-threads.md; a batch gives its worker processes their share of
# the cores: worker.batch).
ONE_BLAS_THREAD = ("peaks", "fod", "response", "mask", "mtnormalise", "fixels")
# Commands that serve until stopped, where an installed pydantic plugin (observability) may be
# wanted. Every other command is one run, and pydantic's search of every installed
# distribution's entry points for plugins, on its first model, cost a small peaks job a tenth
# of its wall time (docs/decisions/pydantic-plugins.md).
LONG_RUNNING = ("serve", "worker")


class CommandError(Exception):
    """A user-facing failure: printed as one line ``fibertensor: error: ...``, exit code 2."""


class _PrintVersion(argparse.Action):
    """``--version``: the installed package's version, looked up only when asked for."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: object):
        super().__init__(option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, nargs=0,
                         help="print fibertensor's version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        from worker.provenance import generated_by

        print(f"fibertensor {generated_by()['Version']}")
        parser.exit()


def build_parser(commands: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The parser with every sub-command's full parser, or only those of ``commands``: their
    modules alone are imported, every other sub-command is a placeholder that carries its
    name and help."""
    parser = argparse.ArgumentParser(
        prog="fibertensor",
        description="Diffusion-MRI jobs on the GPU (or CPU): response functions and FODs from DWIs, fiber peaks, "
        "fODF metrics and fixels from FODs, factorized conv, compression.",
    )
    parser.add_argument("--version", action=_PrintVersion)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    chosen = {module for name, (module, _) in COMMANDS.items() if commands is None or name in commands}
    for name, (module, text) in COMMANDS.items():
        if name in sub.choices:
            continue
        if module in chosen:
            importlib.import_module(module).register(sub)
        else:
            sub.add_parser(name, help=text)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # The top-level parser has no options but -h and --version, so the first other word names
    # the command.
    command = next((word for word in argv if not word.startswith("-")), None)
    if command in ONE_BLAS_THREAD and "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    if command not in LONG_RUNNING:
        os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    args = build_parser([command] if command else []).parse_args(argv)
    from worker.io.mif import command_history_entry, recording_command
    from worker.provenance import generated_by

    try:
        # the .mif images this command writes record it, as MRtrix3's own commands do
        with recording_command(command_history_entry("fibertensor", argv, generated_by()["Version"])):
            return int(args.func(args) or 0)
    except CommandError as exc:
        print(f"fibertensor: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 141  # its output piped into a reader that stopped (``| head``): quietly, as on SIGPIPE
    except OSError as exc:
        # a file the command could not read or write once running (a full disk, a folder
        # removed): what and where, not a traceback
        print(f"fibertensor: error: {_os_problem(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("fibertensor: interrupted", file=sys.stderr)
        return 130


def _os_problem(exc: OSError) -> str:
    where = f": {exc.filename}" if exc.filename else ""
    fix = "; free space there or write elsewhere" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else ""
    return f"{exc.strerror or exc}{where}{fix}"


def run() -> None:
    """The ``fibertensor`` entry point: :func:`main`, then exit at once. The command is done
    and its files are written (atomically, closed): the interpreter's teardown and the CUDA
    driver's (destroying a context and its memory) would only add to its wall time. The output streams and logging are flushed first, as an orderly exit would."""
    code = main()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError):  # a closed pipe (``| head``) is no error of ours
            stream.flush()
    os._exit(code)
