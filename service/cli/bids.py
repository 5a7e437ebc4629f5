"""``fibertensor bids BIDS_DIR OUTPUT_DIR participant``: peaks of a BIDS-derivatives
dataset of FODs (:mod:`worker.bids`), here or on a service (``--server``), or FODs, peaks
and fixels of a dataset's DWIs (:mod:`worker.bids_dwi`), as a BIDS App; ``group``: the
participants' mean responses (:mod:`worker.bids_group`)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

from service.cli import CommandError
from service.cli.gpus import devices_from_option
from service.cli.input_checks import input_limits
from service.cli.model_options import add_model_options, option_values, params_from_options
from service.cli.transfer_options import add_transfers_option
from worker.params.fixels import FixelsParams
from worker.params.fod import FodParams
from worker.params.peaks import PeaksParams

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    bids = subparsers.add_parser(
        "bids",
        help="FODs, fiber peaks, fODF metrics and fixels of a BIDS dataset's DWIs or FODs (BIDS App)",
        description="Find the FODs of a BIDS-derivatives dataset (BEP016 ..._param-fod_dwimap, or ..._desc-wmfod_...; "
        "a ..._desc-brain_mask beside them is used), run one peaks job per subject and session through the "
        "batch pipeline (fibertensor batch peaks), and write "
        "the results as a BIDS-derivatives dataset in OUTPUT_DIR, named after each FOD in its entity order "
        "(..._param-peaks_desc-peaks_dwimap, _param-nufo_desc-nufo_dwimap, _param-afdmax_desc-afdmax_dwimap, ..., "
        "each with a JSON sidecar of its own). From DWIs (raw BIDS sub-*/[ses-*/]dwi/*_dwi.nii.gz with .bval and "
        ".bvec, or QSIPrep's *_desc-preproc_dwi.nii.gz with its desc-brain_mask): one fod job per DWI first "
        "(fibertensor batch fod; responses estimated per DWI), written as ..._model-msmtcsd_param-fod_label-WM_"
        "desc-fod_dwimap (GM, CSF) and ..._model-msmtcsd_label-WM_response.txt (GM, CSF), with the peaks of each "
        "WM FOD from the FOD in memory (fibertensor batch fod --peaks), then, with --fixels, its fixel directory "
        "..._param-fixels_label-WM_desc-fixels_dwimap. The group level averages the responses the participant "
        "level estimated, as MRtrix3's responsemean, into OUTPUT_DIR/model-msmtcsd_label-WM_desc-groupmean_response.txt "
        "(GM, CSF): give them to a second participant run with --response, as fixel-based analysis does.",
    )
    bids.add_argument("bids_dir", type=Path, metavar="BIDS_DIR", help="the dataset holding the FODs")
    bids.add_argument("output_dir", type=Path, metavar="OUTPUT_DIR", help="where the derivatives dataset is written")
    bids.add_argument("analysis_level", choices=["participant", "group"],
                      help="participant: one job per subject and session; group: the mean of the responses the "
                      "participant level estimated")
    bids.add_argument("--participant-label", nargs="+", metavar="LABEL",
                      help="only these participants (01 or sub-01; default: all)")
    bids.add_argument("--session-label", nargs="+", metavar="LABEL", help="only these sessions (default: all)")
    bids.add_argument("--from", dest="source", choices=["auto", "fods", "dwi"], default="auto",
                      help="what to start from: the dataset's FODs, or its DWIs (FODs fitted first); auto: the FODs "
                      "when there are any, else the DWIs (default: auto)")
    add_model_options(bids, PeaksParams)
    # the peaks options above are those of the peaks each fod job writes from its WM FOD in memory
    add_model_options(bids.add_argument_group("FOD options (from DWIs)"), FodParams, "fod_",
                      skip={"basis", "backend", *(name for name in FodParams.model_fields if name.startswith("peaks"))})
    bids.add_argument("--response", type=Path, nargs="+", metavar="RESPONSE",
                      help="from DWIs: response files WM [GM CSF], or WM CSF for a two-tissue fit, for every DWI "
                      "(e.g. group averages, as fixel-based analysis uses); default: estimated per DWI, as dwi2response dhollander for msmt_csd and "
                      "tournier for csd")
    bids.add_argument("--fixels", action="store_true", help="from DWIs: also write each WM FOD's fixel directory "
                      "(fibertensor fixels)")
    add_model_options(bids.add_argument_group("fixels options (with --fixels)"), FixelsParams, "fixels_",
                      skip={"backend"})
    bids.add_argument("--processes", type=int, metavar="N",
                      help="worker processes (per GPU with --gpus), all taking FODs from one queue, each reading the "
                      "next FODs while one is computed and writing the previous ones, as fibertensor batch peaks "
                      "does; one process alone cannot use more than about five cores (default: three per four cores, from "
                      "DWIs at most 6 per GPU; 1 without --gpus runs in this process)")
    bids.add_argument("--gpus", metavar="all|0,1",
                      help="the GPUs to run on, each with --processes worker processes: 'all' or "
                      "CUDA_VISIBLE_DEVICES values (default: the backend's device)")
    bids.add_argument("--server", help="run the jobs on this fibertensor service (URL) instead of here")
    bids.add_argument("--api-key", default=os.environ.get("FIBERTENSOR_API_KEY"),
                      help="API key for --server (default FIBERTENSOR_API_KEY)")
    add_transfers_option(bids, applies="with --server")
    bids.add_argument("--quiet", action="store_true", help="no progress lines")
    bids.set_defaults(func=_bids)


def _bids(args: argparse.Namespace) -> int:
    from worker.bids import find_fods, run_bids_peaks
    from worker.errors import InputError

    fields = option_values(PeaksParams, args)
    params = params_from_options(PeaksParams, fields)
    if args.server and (args.processes is not None or args.gpus is not None):
        raise CommandError("--processes and --gpus say how to run the jobs here; leave them out with --server "
                           "(the service's workers run them)")
    if args.processes is not None and args.processes < 1:
        raise CommandError("--processes must be at least 1")
    log = (lambda message: None) if args.quiet else (lambda message: print(message, file=sys.stderr))
    try:
        if args.analysis_level == "group":
            return _group(args)
        if args.source == "dwi" or (args.source == "auto" and not _has_fods(args)):
            return _from_dwis(args, params, log)
        if (args.fixels or args.response or option_values(FodParams, args, "fod_")
                or option_values(FixelsParams, args, "fixels_")):
            raise CommandError("--response, --fixels and the FOD and fixels options are for a run from DWIs "
                               "(--from dwi)")
        if args.server:
            fods = find_fods(args.bids_dir, args.participant_label, args.session_label, exclude=args.output_dir)
            results = _on_server(args, fods, fields)
        else:
            from worker.batch import default_processes

            devices = devices_from_option(args.gpus)
            processes = args.processes or default_processes(len(devices or [None]))
            results = run_bids_peaks(args.bids_dir, args.output_dir, params, args.participant_label,
                                     args.session_label, log=log, limits=input_limits(), devices=devices,
                                     processes=processes)
    except InputError as exc:
        raise CommandError(exc.detail) from None
    return _summary(args, results, "FODs")


def _group(args: argparse.Namespace) -> int:
    """The group level: the participants' responses averaged (:func:`worker.bids_group.group_responses`)."""
    from worker.bids_group import group_responses

    given = [f"--{name.replace('_', '-')}" for name in ("response", "fixels", "server", "gpus", "processes")
             if getattr(args, name)]
    if (given or args.source != "auto" or option_values(PeaksParams, args) or option_values(FodParams, args, "fod_")
            or option_values(FixelsParams, args, "fixels_")):
        raise CommandError("the group level averages the participants' responses and takes --participant-label and "
                           "--session-label alone; give the other options to the participant level")
    written = group_responses(args.output_dir, args.participant_label, args.session_label)
    if not args.quiet:
        for path, count in written.items():
            print(f"{path}: the mean of {count} responses")
    return 0


def _summary(args: argparse.Namespace, results: dict, inputs: str) -> int:
    """List the failed inputs, say how many were done, and return the exit status."""
    failed = {path: error for path, error in results.items() if isinstance(error, str)}
    for path, error in failed.items():
        print(f"{path.name}: {error}", file=sys.stderr)
    if not args.quiet:
        print(f"{len(results) - len(failed)} of {len(results)} {inputs} done; derivatives in {args.output_dir}")
    return 1 if failed else 0


def _has_fods(args: argparse.Namespace) -> bool:
    """--from auto: FODs when the dataset has any, else DWIs; with neither, FODs (whose error
    says what was looked for, as before DWIs were read)."""
    from worker.bids import find_fods
    from worker.bids_dwi import find_dwis
    from worker.errors import InputError

    selected = (args.bids_dir, args.participant_label, args.session_label)
    try:
        find_fods(*selected, exclude=args.output_dir)
    except InputError:
        try:
            find_dwis(*selected, exclude=args.output_dir)
        except InputError as exc:
            return exc.title == "No DWIs found"
        return False
    return True


def _from_dwis(args: argparse.Namespace, peaks: PeaksParams, log) -> int:
    """FODs, then peaks (and fixels) of the dataset's DWIs (:func:`worker.bids_dwi.run_bids_fod`)."""
    from worker.batch import default_processes
    from worker.bids_dwi import run_bids_fod
    from worker.errors import InputError

    if args.server:
        raise CommandError("--server runs peaks jobs on a dataset's FODs; a run from DWIs runs here (leave out "
                           "--server)")
    shared = {name: value for name, value in option_values(PeaksParams, args).items() if name in ("basis", "backend")}
    fod = params_from_options(FodParams, {**option_values(FodParams, args, "fod_"), **shared})
    fixels_fields = option_values(FixelsParams, args, "fixels_")
    if fixels_fields and not args.fixels:
        raise CommandError("the fixels options need --fixels")
    fixels = params_from_options(FixelsParams, {**fixels_fields, **{k: v for k, v in shared.items() if k == "backend"}}
                                 ) if args.fixels else None
    devices = devices_from_option(args.gpus)
    processes = args.processes or default_processes(len(devices or [None]), "fod")
    try:
        results = run_bids_fod(args.bids_dir, args.output_dir, fod, peaks, fixels, args.participant_label,
                               args.session_label, log=log, limits=input_limits(), devices=devices,
                               processes=processes, responses=tuple(args.response or ()))
    except InputError as exc:
        raise CommandError(exc.detail) from None
    return _summary(args, results, "DWIs")


def _on_server(args: argparse.Namespace, fods: list, fields: dict[str, str]) -> dict:
    """Submit one job per FOD to the service as one labelled batch (``--transfers`` uploads at
    a time), and download each job's results as soon as it succeeds, while the others still
    run, publishing them as :func:`worker.bids.run_bids_peaks` does. Returns each FOD's
    published paths, or why it failed, in ``fods`` order."""
    from tqdm import tqdm

    from service.cli.client import ServiceClient, fetch_as_finished, job_failure, submit_each
    from worker.bids import publish_job, write_dataset_description
    from worker.job_kinds import get_job_kind

    output_dir = Path(args.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    write_dataset_description(output_dir, args.bids_dir)
    label = f"bids-{Path(args.bids_dir).resolve().name}"
    by_path = {fod.path: fod for fod in fods}
    with ServiceClient(args.server, args.api_key) as client:
        batch = [{"fod": fod.path, **({"mask": fod.mask} if fod.mask else {})} for fod in fods]
        sent, refused = submit_each(client, get_job_kind("peaks"), batch, {**fields, "label": label},
                                    transfers=args.transfers)
        results: dict = {files["fod"]: why for files, why in refused}

        def download_and_publish(job: dict) -> list[Path]:
            fod = by_path[sent[job["id"]]["fod"]]
            work = output_dir / ".work" / job["id"]
            try:
                for result in job["results"]:
                    client.download(result, work)
                sidecar = json.loads((work / "peaks.json").read_text())
                published = publish_job(fod, args.bids_dir, work, sidecar, output_dir)
            finally:
                shutil.rmtree(work, ignore_errors=True)
            if not args.quiet:  # through tqdm, so the line goes above the progress bar, not through it
                tqdm.write(f"{fod.path.name}: {len(published)} files in {fod.folder}", file=sys.stderr)
            return published

        finished, published = fetch_as_finished(client, list(sent), args.quiet, label, download_and_publish,
                                                 args.transfers)
        for job in finished:
            results[sent[job["id"]]["fod"]] = published[job["id"]] if job["id"] in published else job_failure(job)
    shutil.rmtree(output_dir / ".work", ignore_errors=True)
    return {fod.path: results[fod.path] for fod in fods}
