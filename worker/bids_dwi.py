"""FODs, peaks and fODF metrics (and fixels) of a BIDS dataset's DWIs, written as a
BIDS-derivatives dataset (the participant level of a BIDS App).

Inputs: raw BIDS DWIs, ``sub-<label>/[ses-<label>/]dwi/sub-<label>[_ses-<label>]..._dwi.nii[.gz]``
with their ``.bval`` and ``.bvec`` beside them (or higher up, by BIDS inheritance), and
QSIPrep's preprocessed DWIs, ``..._desc-preproc_dwi.nii.gz`` with ``.bval``/``.bvec`` beside
them and the ``..._desc-brain_mask`` of their folder as the mask; where a subject and
session has a preprocessed DWI, its raw ones are left out.

Each DWI is one fod job that also writes the peaks job's outputs of its WM FOD, from the
FOD in memory (``FodParams.peaks``), then, when asked, one fixels job on the published WM
FOD, each kind through the batch pipeline (:mod:`worker.batch`). Outputs, named after the
DWI's entities (``desc-`` left out) in BEP016's scheme, in its ``sub-*/[ses-*/]dwi``
folder, each with a JSON sidecar naming its ``Sources``:
``..._model-msmtcsd_param-fod_label-WM_desc-fod_dwimap.<ext>`` (and ``label-GM``,
``label-CSF``; ``model-csd``: WM alone), the estimated responses
``..._model-msmtcsd_label-WM_response.txt`` (GM, CSF), then the peaks job's maps named as
:func:`worker.bids.derivative_name` names them for that FOD
(``..._model-msmtcsd_param-peaks_label-WM_desc-peaks_dwimap``, ...) and the fixel directory
``..._model-msmtcsd_param-fixels_label-WM_desc-fixels_dwimap``. The ``desc-`` entity tells
the maps apart to BIDS tools that do not know BEP016's ``param-`` yet (:mod:`worker.bids`).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Sequence

from pydantic import BaseModel

from worker.bids import (FodInput, brain_mask_beside, dataset_files, dataset_uri, parse_name, publish_job,
                         run_and_publish, without_prefix, write_dataset_description)
from worker.errors import InputError
from worker.io.atomic import write_json_atomic
from worker.params.fod import FodParams, ResponseParams, peaks_option_name
from worker.params.peaks import PeaksParams

if TYPE_CHECKING:
    from worker.input_limits import InputLimits

__all__ = ["DwiInput", "find_dwis", "fod_name", "run_bids_fod"]

#: The dataset name under which ``Sources`` point into the input dataset (``bids:dwi:sub-01/...``).
DWI_LINK = "dwi"
_TISSUE_LABELS = {"wm": "WM", "gm": "GM", "csf": "CSF"}
_DESCRIPTIONS = {
    "fod": "{tissue} fibre orientation distribution by {method} (dwi2fod {algorithm}): SH coefficients in the {basis} "
           "basis",
    "response": "{tissue} response function by dwi2response dhollander, in MRtrix3's response format: one row per "
                "shell (b-values in the header line), zonal SH coefficients l = 0, 2, ...",
    "predicted": "signal the compartments fitted by {method} (dwi2fod {algorithm}) predict, as dwi2fod "
                 "-predicted_signal writes it: one volume per volume of the source DWI, whose b-values and directions "
                 "(.bval, .bvec beside it) it has; 0 outside the mask and in volumes the fit left out. The source "
                 "DWI minus it is the fit's residual",
}


@dataclass(frozen=True)
class DwiInput:
    """One DWI of the input dataset: its path, BIDS entities (in file-name order), its FSL
    gradient files and brain mask (or None)."""

    path: Path
    entities: tuple[tuple[str, str], ...]
    bval: Path
    bvec: Path
    mask: Path | None

    @property
    def key(self) -> tuple[str, str | None]:
        found = dict(self.entities)
        return found["sub"], found.get("ses")

    @property
    def folder(self) -> Path:
        """The output folder relative to the dataset root: ``sub-*/[ses-*/]dwi``."""
        subject, session = self.key
        return Path(f"sub-{subject}", *([f"ses-{session}"] if session else []), "dwi")


def _gradient_file(dwi: Path, entities: dict[str, str], extension: str, root: Path) -> Path | None:
    """``extension`` (``.bval``, ``.bvec``) of a DWI: beside it under its own name, else by BIDS
    inheritance, the nearest folder's ``..._dwi<extension>`` whose entities are all the DWI's
    (the most of them first), up to the dataset root."""
    beside = dwi.with_name(dwi.name.split(".")[0] + extension)
    if beside.is_file():
        return beside
    folder = dwi.parent
    while True:
        candidates = []
        for path in folder.glob(f"*dwi{extension}"):
            pairs = [part.split("-", 1) for part in path.name[: -len(extension)].split("_")[:-1]]
            if all(len(pair) == 2 and entities.get(pair[0]) == pair[1] for pair in pairs):
                candidates.append((-len(pairs), path))
        if candidates:
            return min(candidates)[1]
        if folder.resolve() == root.resolve() or folder.parent == folder:
            return None
        folder = folder.parent


def find_dwis(bids_dir: Path, participant_labels: Iterable[str] | None = None,
              session_labels: Iterable[str] | None = None, exclude: Path | None = None) -> list[DwiInput]:
    """The DWIs below ``bids_dir`` (see the module docstring), sorted, of the given
    participants and sessions; ``exclude`` and hidden folders are skipped. Raises
    :class:`InputError`, before anything runs, when none is found (saying what it looked
    for) or when a DWI has no ``.bval`` or ``.bvec`` (naming the files and the fix)."""
    bids_dir = Path(bids_dir)
    subjects, sessions = without_prefix(participant_labels, "sub-"), without_prefix(session_labels, "ses-")
    found: list[tuple[Path, tuple, bool]] = []
    for path, parsed in dataset_files(bids_dir, exclude):
        if parsed[1] != "dwi" or not parsed[2].startswith(".nii"):
            continue
        entities = dict(parsed[0])
        if (subjects is not None and entities["sub"] not in subjects) or (
                sessions is not None and entities.get("ses") not in sessions):
            continue
        found.append((path, parsed[0], entities.get("desc") == "preproc"))
    preprocessed = {(dict(e)["sub"], dict(e).get("ses")) for _, e, pre in found if pre}
    dwis, missing = [], []
    for path, entities, pre in found:
        named = dict(entities)
        if not pre and (named["sub"], named.get("ses")) in preprocessed:
            continue
        bval, bvec = (_gradient_file(path, named, extension, bids_dir) for extension in (".bval", ".bvec"))
        if bval is None or bvec is None:
            stem = path.name.split(".")[0]
            missing.append(" and ".join(str(path.with_name(stem + e)) for e, f in ((".bval", bval), (".bvec", bvec))
                                        if f is None))
            continue
        dwis.append(DwiInput(path, entities, bval, bvec, brain_mask_beside(path, named) if pre else None))
    if missing:
        raise InputError("Missing gradients", f"no {'; no '.join(missing)}: each DWI needs its b-values (.bval) and "
                         "b-vectors (.bvec) beside it under its name (BIDS), as dcm2niix writes them; add them, or "
                         "leave the subject out with --participant-label")
    if not dwis:
        raise InputError("No DWIs found", f"no DWI below {str(bids_dir)!r}: looked for sub-<label>[_ses-<label>]_..."
                         "_dwi.nii[.gz] (raw BIDS) and ..._desc-preproc_dwi.nii[.gz] (QSIPrep); check the folder and "
                         "the labels")
    return dwis


def fod_name(dwi: DwiInput, params: FodParams, tissue: str | None, what: str, extension: str) -> str:
    """The name of a fod output of ``dwi``: its entities but ``desc-``, then
    ``model-<msmtcsd|csd>``, for ``what="fod"`` ``param-fod_label-<tissue>_desc-fod_dwimap``,
    for ``what="response"`` ``label-<tissue>_response``, for ``what="predicted"`` (the signal
    the fit predicts, no tissue) ``desc-predicted_dwi``."""
    parts = [f"{key}-{value}" for key, value in dwi.entities if key != "desc"]
    parts.append(f"model-{params.algorithm.replace('_', '')}")
    if what == "predicted":
        return "_".join([*parts, "desc-predicted_dwi"]) + extension
    label = f"label-{_TISSUE_LABELS[tissue]}"
    parts += [f"param-fod_{label}_desc-fod_dwimap"] if what == "fod" else [f"{label}_response"]
    return "_".join(parts) + extension


def _with_peaks(params: FodParams, peaks: PeaksParams) -> FodParams:
    """``params`` with ``peaks`` on and the peaks job's options of ``peaks`` (its SH basis
    the FOD's): the fod job that also writes its WM FOD's peaks, from the FOD in memory.
    :class:`InputError` for what that job cannot honour: another backend for the peaks, or
    no checksums (it hashes the FOD it has just written)."""
    if peaks.backend != params.backend:
        raise InputError("Two backends", f"the peaks (backend {peaks.backend}) run on the FODs' backend "
                         f"({params.backend}) from the FODs in memory; give one backend for both")
    if not peaks.checksums:
        raise InputError("Checksums are kept", "a run from DWIs records the sha256 of each FOD it writes, which it "
                         "has in hand; leave out --no-checksums (checksums off)")
    options = {peaks_option_name(name): value for name, value in peaks.model_dump().items()
               if peaks_option_name(name) in FodParams.model_fields}
    return FodParams.model_validate({**params.model_dump(), **options, "peaks": True})


def _publish_fods(dwi: DwiInput, bids_dir: Path, work: Path, params: FodParams, output_dir: Path) -> list[Path]:
    """Move a fod job's images and estimated responses from ``work`` into the derivatives
    dataset under their BIDS names, each with its sidecar (``params``: the FODs' parameters,
    those the caller gave, without the peaks job's)."""
    sidecar = json.loads((work / "fod.json").read_text(encoding="utf-8"))
    target = output_dir / dwi.folder
    target.mkdir(parents=True, exist_ok=True)
    sources = [dataset_uri(bids_dir, path, DWI_LINK) for path in (dwi.path, dwi.bval, dwi.bvec, dwi.mask) if path]
    provenance = {key: sidecar[key] for key in ("generated_by", "input", "backend", "lmax", "shells", "warnings",
                                                "versions", "seconds", "voxels_fitted", "mtnormalise")
                  if key in sidecar}
    published = []
    for output, file in sidecar["outputs"].items():
        tissue = {"wmfod": "wm", "gm": "gm", "csf": "csf", "predicted_signal": None}.get(
            output, output.removesuffix("_response"))
        what = ("response" if output.endswith("_response") else "predicted" if output == "predicted_signal"
                else "fod")
        extension = ".txt" if what == "response" else next(e for e in (".nii.gz", ".nii", ".mif.gz", ".mif")
                                                             if file.endswith(e))
        destination = target / fod_name(dwi, params, tissue, what, extension)
        os.replace(work / file, destination)
        if what == "predicted":
            # a DWI of its own: BIDS wants its gradients beside it
            stem = destination.name.removesuffix(extension)
            for gradients, suffix in ((dwi.bval, ".bval"), (dwi.bvec, ".bvec")):
                published.append(Path(shutil.copyfile(gradients, destination.with_name(stem + suffix))))
        description = {"Description": _DESCRIPTIONS[what].format(
            tissue=_TISSUE_LABELS.get(tissue), method=sidecar["method"], algorithm=params.algorithm,
            basis=params.basis), "Sources": sources, "Parameters": params.model_dump()}
        if output == "wmfod":
            description["Provenance"] = provenance
        write_json_atomic(destination.with_name(destination.name.removesuffix(extension) + ".json"), description)
        published.append(destination)
    return published


def _peaks_of_published(work: Path, wm: FodInput) -> dict:
    """The peaks sidecar a fod job wrote in ``work``, its input named as the WM FOD is
    published (``wm``; the same bytes, so the same sha256)."""
    sidecar = json.loads((work / "peaks.json").read_text(encoding="utf-8"))
    read = sidecar["input"]
    sidecar["input"] = {**read, "fod": wm.path.name,
                        "sha256": {wm.path.name if name == read["fod"] else name: value
                                   for name, value in read["sha256"].items()}}
    return sidecar


def run_bids_fod(bids_dir: Path, output_dir: Path, params: FodParams = FodParams(),
                 peaks_params: PeaksParams = PeaksParams(), fixels_params: BaseModel | None = None,
                 participant_labels: Iterable[str] | None = None, session_labels: Iterable[str] | None = None,
                 log: Callable[[str], None] = lambda message: None, limits: "InputLimits | None" = None, *,
                 responses: Sequence[Path] = (), response_params: ResponseParams = ResponseParams(),
                 devices: Sequence[str] | None = None, processes: int = 1) -> dict[Path, list[Path] | str]:
    """FODs of every selected DWI (with ``responses``, WM [GM CSF] or WM CSF, for every DWI, else
    responses estimated per DWI with ``response_params``) and the peaks and metrics of each
    WM FOD with ``peaks_params`` (from the FOD in memory, in the same job: the files
    ``fibertensor peaks`` writes of the published FOD, byte for byte), then, with
    ``fixels_params``, its fixels; each kind through the batch pipeline (``devices`` and
    ``processes`` as :func:`worker.batch.run_batch` takes them), each input published as it
    finishes. Returns each DWI's published files, or the error that stopped it
    (``fixels: ...`` after its FODs and peaks were published)."""
    from worker.batch import FixelsItem, FodItem
    from worker.jobs.fod.response import listed_responses

    listed = listed_responses(responses)
    if fixels_params is not None and "fixel" in peaks_params.format:
        raise InputError("Fixels asked twice", "the peaks format fixel and the fixels job write the same fixel "
                         "directory; give one of them")
    if fixels_params is not None and params.basis != "mrtrix":
        raise InputError("Fixels need MRtrix3's basis", "the fixels job reads FODs in MRtrix3's SH basis; leave out "
                         "--basis dipy, or the fixels")
    chain = _with_peaks(params, peaks_params)
    output_dir = Path(output_dir)
    dwis = find_dwis(bids_dir, participant_labels, session_labels, exclude=output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    write_dataset_description(output_dir, bids_dir, DWI_LINK, "fibertensor FODs, fiber peaks and fODF metrics")
    staging = output_dir / ".work"
    shutil.rmtree(staging, ignore_errors=True)
    by_path = {dwi.path: dwi for dwi in dwis}
    results: dict[Path, list[Path] | str] = {}
    common = {"folders": lambda path: by_path[path].folder, "write": log, "devices": devices,
              "processes": processes, "limits": limits}
    try:
        work = {dwi.path: staging / f"{number}-fod" for number, dwi in enumerate(dwis, 1)}
        for folder in work.values():
            folder.mkdir(parents=True)
        fods = {dwi.path: FodItem(dwi.path, work[dwi.path], dwi.bval, dwi.bvec, mask=dwi.mask,
                                  responses=listed, response_params=response_params) for dwi in dwis}

        def sources(wm: FodInput) -> list[str]:
            return [dataset_uri(output_dir, wm.path, ""),
                    *([dataset_uri(bids_dir, wm.mask, DWI_LINK)] if wm.mask else [])]

        def publish(path: Path, item: FodItem) -> list[Path]:
            published = _publish_fods(by_path[path], bids_dir, item.prefix, params, output_dir)
            wm = FodInput(published[0], *parse_name(published[0]), item.mask)
            peaks = _peaks_of_published(item.prefix, wm)
            return published + publish_job(wm, output_dir, item.prefix, peaks, output_dir, sources(wm))

        results.update(run_and_publish(fods, chain, publish, work,
                                       log=lambda path, said: f"{path.name}: FODs and peaks: {said}", **common))

        # The WM FOD of each DWI whose FODs were published, as the fixels job reads it.
        wm = {path: FodInput(files[0], *parse_name(files[0]), by_path[path].mask)
              for path, files in results.items() if isinstance(files, list)}
        if fixels_params is not None:
            work = {path: staging / f"{number}-fixels" for number, path in enumerate(wm, 1)}
            fixels = {path: FixelsItem(fod.path, work[path] / "fixels", fod.mask) for path, fod in wm.items()}

            def publish_fixels(path: Path, item: FixelsItem) -> list[Path]:
                sidecar = json.loads(item.sidecar.read_text(encoding="utf-8"))
                sidecar["outputs"] = {"fixel": [item.out_dir.name]}
                return publish_job(wm[path], output_dir, item.out_dir.parent, sidecar, output_dir, sources(wm[path]))

            outcome = run_and_publish(fixels, fixels_params, publish_fixels, work,
                                      log=lambda path, said: f"{path.name}: fixels: {said}", **common)
            for path, files in outcome.items():
                results[path] = results[path] + files if isinstance(files, list) else f"fixels: {files}"
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return {dwi.path: results[dwi.path] for dwi in dwis}
