"""What the outputs beyond the peaks cost: fODF metric maps, the QC picture and the other
formats (MRtrix image, fixel directory, DIPY .pam5), as added seconds on the warm
file-to-file time of one peaks job (``run_peaks`` from a .nii.gz to written files), the
peer being the baseline outputs (peaks, amplitudes and count: ``--metrics none --no-qc``).

Each configuration runs ``--repeats`` times in one warm process, round-robin (a drift of
the machine touches every row alike), after a warm-up run that compiles the kernels and
warms every writer; the table shows the fastest run. "added" is the growth of the time
outside the peaks search (read + metrics + write) as a share of the baseline's total: the
extra outputs cost nothing inside the search, whose own time varies from run to run on a
shared machine. "by write" counts the writing stage alone (best run of each): the read
before it is the same code on the same file in every row, and its own spread is as large
as the budget; the verdict line uses it. "write CPU" is the processor time of the writing
stage, all threads together (``time.process_time``), which a busy machine does not inflate
as it does wall time. The input's sha256, taken by every configuration while the volume is
inflated, is timed alone.
"""

from __future__ import annotations

import argparse
import importlib.util
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.harness import Column, Report
from bench.peaks.volume import add_volume_options, make_phantom

__all__ = ["add_arguments", "run"]

BUDGET = 0.15


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_volume_options(parser)
    parser.add_argument("--backend", choices=["cpu", "cuda"], default="cpu")


def configurations(with_pam5: bool) -> dict[str, dict]:
    formats = ["nifti", "mif", "fixel"] + (["pam5"] if with_pam5 else [])
    return {
        "baseline (peaks, amplitudes, count)": {"metrics": ["none"], "qc": False},
        "+ metrics": {"qc": False},
        "+ QC picture": {"metrics": ["none"]},
        "+ metrics + QC (default)": {},
        "+ MRtrix .mif.gz copy": {"metrics": ["none"], "qc": False, "format": ["nifti", "mif"]},
        "+ fixel directory": {"metrics": ["none"], "qc": False, "format": ["nifti", "fixel"]},
        **({"+ .pam5": {"metrics": ["none"], "qc": False, "format": ["nifti", "pam5"]}} if with_pam5 else {}),
        f"all together ({', '.join(formats)})": {"format": formats},
    }


def run(args: argparse.Namespace, report: Report) -> None:
    from worker.io.images import write_image
    from worker.jobs.peaks import (PeaksOutputs, compute_peaks, plan_peaks, prepare_engine, read_peaks_inputs, run_peaks,
                                   write_peaks_outputs)
    from worker.params.peaks import PeaksParams
    from worker.provenance import file_sha256

    with_pam5 = importlib.util.find_spec("dipy") is not None
    sh = make_phantom(args)["sh"].astype(np.float32)
    configs = list(configurations(with_pam5).items())
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        fod = write_image(Path(tmp, "fod.nii.gz"), sh, np.diag([2.0, 2.0, 2.0, 1.0]))
        Report.progress(f"{fod.stat().st_size / 1e6:.0f} MB .nii.gz; backend {args.backend}")
        run_peaks(fod, PeaksOutputs.in_folder(Path(tmp, "warm-up")), PeaksParams(backend=args.backend, **configs[-1][1]))
        started = time.perf_counter()
        file_sha256(fod)
        sha256_s = time.perf_counter() - started
        runs: dict[str, list] = {name: [] for name, _ in configs}
        for repeat in range(args.repeats):
            for number, (name, options) in enumerate(configs):
                params = PeaksParams(backend=args.backend, **options)
                # run_peaks's three stages, the processor time of the last taken apart
                started = time.perf_counter()
                plan = plan_peaks(fod, None, params)
                preparing = prepare_engine(plan)
                inputs = read_peaks_inputs(plan)
                result = compute_peaks(plan, inputs, preparing)
                writing = time.process_time()
                sidecar = write_peaks_outputs(plan, inputs, result,
                                              PeaksOutputs.in_folder(Path(tmp, f"{number}-{repeat}")))
                runs[name].append((time.perf_counter() - started, sidecar["seconds"], time.process_time() - writing,
                                   sidecar["device"]))
                del inputs, result
        for name, _ in configs:
            total, seconds, _, device = min(runs[name], key=lambda run: run[0] - run[1]["peaks_total"])
            rows.append({"outputs": name, "total_s": total, "read_s": seconds["read"],
                         "peaks_s": seconds["peaks_total"], "write_s": min(run[1]["write"] for run in runs[name]),
                         "write_cpu_s": min(run[2] for run in runs[name]),
                         "outside_peaks_s": total - seconds["peaks_total"], "device": device})
    base = rows[0]
    for row in rows:
        row["added"] = (row["outside_peaks_s"] - base["outside_peaks_s"]) / base["total_s"]
        row["added_by_writing"] = (row["write_s"] - base["write_s"]) / base["total_s"]
    added = rows[-1]["added_by_writing"]
    report.record("sha256 of the input alone", {"seconds": sha256_s})
    report.table(
        f"outputs against the baseline, backend {args.backend} (device {base['device']}); fastest of {args.repeats}",
        rows,
        [Column("outputs", "outputs"), Column("total_s", "total s", ".2f"), Column("read_s", "read", ".2f"),
         Column("peaks_s", "peaks", ".2f"), Column("write_s", "write", ".2f"),
         Column("write_cpu_s", "write CPU", ".2f"), Column("added", "added", "+.1%"),
         Column("added_by_writing", "by write", "+.1%")],
        note=f"all together add {100 * added:.1f} % to the warm file-to-file time "
             f"({'within' if added <= BUDGET else 'over'} the {100 * BUDGET:.0f} % budget); sha256 of the input alone "
             f"{sha256_s:.2f} s (beside the read)" + ("" if with_pam5 else "; .pam5 left out: DIPY is not installed"))
