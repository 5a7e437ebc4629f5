"""Fiber-peaks benchmarks, one per section (``python3 -m bench.peaks SECTION --help``)."""

from __future__ import annotations

import argparse
import importlib

from bench.harness import Report, add_json_option

# section → (module of bench.peaks, what it measures against what)
SECTIONS = {
    "kernels": ("kernels", "the peak search against MRtrix3 sh2peaks and DIPY; --file-to-file adds a job's run"),
    "startup": ("startup", "where a fresh `fibertensor peaks` process spends its time"),
    "noisy": ("noisy", "the search on clean, noisy and CSD FODs against sh2peaks"),
    "processes": ("processes", "CPU seconds of whole `fibertensor peaks` and sh2peaks processes"),
    "outputs": ("outputs", "what the outputs beyond peaks, amplitudes and count add to a job"),
    "write-timeline": ("write_timeline", "every task of the writing stage: start, end, CPU"),
    "host-stages": ("host_stages", "process CPU of each stage of a job on a dwi2fod-layout .mif"),
    "transfers": ("transfers", "page-locked against pageable input on the CUDA path (GPU)"),
    "read": ("read_path", "the NIfTI read path against the one it replaced and ISA-L alone"),
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python3 -m bench.peaks", description=__doc__.splitlines()[0])
    sections = parser.add_subparsers(dest="section", required=True, metavar="SECTION")
    modules = {}
    for section, (module_name, summary) in SECTIONS.items():
        module = modules[section] = importlib.import_module(f"bench.peaks.{module_name}")
        sub = sections.add_parser(section, help=summary, description=module.__doc__,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(sub)
        add_json_option(sub)
    args = parser.parse_args(argv)
    modules[args.section].run(args, Report(args.json))


if __name__ == "__main__":
    main()
