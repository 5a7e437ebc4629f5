"""Peaks of a BIDS-derivatives dataset of FODs, written as a BIDS-derivatives dataset (the
participant level of a BIDS App, Gorgolewski et al. 2017, PLoS Comput Biol 13:e1005209).

Inputs are found by name, anywhere below the dataset (a pipeline's folder in
``derivatives/`` included): the diffusion-derivative names of BIDS extension proposal
BEP016, ``sub-<label>[_ses-<label>]_..._param-fod[_label-WM]_dwimap.<ext>`` (QSIRecon's
multi-tissue GM/CSF maps left out), and ``..._desc-wmfod_<suffix>.<ext>``, the name
QSIRecon and MRtrix3 users give ``dwi2fod``'s white-matter FOD; ``<ext>`` is ``.nii``,
``.nii.gz``, ``.mif`` or ``.mif.gz``. A ``..._desc-brain_mask.<ext>`` of the same subject
and session in the same folder is used as the mask when present (one in the FOD's space
first).

Each FOD is one peaks job, its files those :func:`worker.jobs.peaks.run_peaks` writes, run
through the batch pipeline (:mod:`worker.batch`: reading, computing and writing overlap, in
one or more worker processes) and published as each finishes; its files are named after the
FOD, its entities in its order, with the ``param-`` value replaced by what the file holds
(added last when the FOD has none) and ``desc-`` by the same, last
(``..._model-msmtcsd_param-peaks_label-WM_desc-peaks_dwimap``,
``..._param-nufo_label-WM_desc-nufo_dwimap``, ..., ``..._label-WM_desc-qc_dwimap.png``), in the FOD's ``sub-*/[ses-*/]<datatype>`` folder of the output,
each with a JSON sidecar naming its ``Sources`` (BIDS URIs into the input dataset) and the
parameters. The ``desc-`` entity is what tells the files apart to BIDS tools that do not
know BEP016's ``param-`` yet (pybids reads every file's ``param-peaks`` sidecar, its
``param-afdmax`` one... as equally its own without it). ``dataset_description.json`` says ``DatasetType: derivative`` and cites this
software in ``GeneratedBy``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Sequence

from worker.errors import InputError
from worker.io.atomic import write_json_atomic
from worker.params.peaks import PeaksParams
from worker.provenance import generated_by

if TYPE_CHECKING:
    from worker.batch import ItemReport
    from worker.input_limits import InputLimits

__all__ = ["FodInput", "BIDS_VERSION", "OUTPUT_ENTITIES", "parse_name", "without_prefix", "brain_mask_beside",
           "find_fods", "derivative_name", "dataset_uri", "write_dataset_description", "publish_job", "run_bids_peaks",
           "run_and_publish"]

BIDS_VERSION = "1.10.0"
#: The dataset name under which ``Sources`` point into the input dataset (``bids:fods:sub-01/...``).
_INPUT_LINK = "fods"
_IMAGE_EXTENSIONS = (".nii.gz", ".nii", ".mif.gz", ".mif")
_NAME = re.compile(r"^sub-(?P<sub>[A-Za-z0-9]+)(?P<entities>(?:_[A-Za-z]+-[A-Za-z0-9]+)*)_(?P<suffix>[A-Za-z0-9]+)"
                   r"(?P<ext>(?:\.[A-Za-z0-9]+)+)$")
_LOOKED_FOR = ("sub-<label>[_ses-<label>]_..._param-fod_dwimap (BEP016, also with label-WM) and "
               "sub-<label>[_ses-<label>]_..._desc-wmfod_<suffix> (QSIRecon, MRtrix3), as "
               f"{', '.join(_IMAGE_EXTENSIONS)}")

#: Output of a peaks job → its ``param-`` value (None: a picture, not a map) and its ``desc-``
#: value in the derivatives dataset; every output has a ``desc-`` of its own.
OUTPUT_ENTITIES = {
    "peaks": ("peaks", "peaks"), "amplitudes": ("amplitudes", "amplitudes"), "count": ("nufo", "nufo"),
    "afd_max": ("afdmax", "afdmax"), "afd_total": ("afdtotal", "afdtotal"), "afd_sum": ("afdsum", "afdsum"),
    "peak_fraction": ("peakfraction", "peakfraction"), "rgb": ("rgb", "rgb"), "qc": (None, "qc"),
    "fixel": ("fixels", "fixels"), "pam5": ("peaks", "pam5"),
}
_DESCRIPTIONS = {
    "peaks": "Fiber directions in MRtrix3 sh2peaks layout: volumes 3k..3k+2 hold amplitude_k times unit "
             "direction_k (frame of the SH coefficients), NaN where absent",
    "amplitudes": "FOD amplitude at each peak, descending, NaN where absent",
    "count": "Number of fiber orientations (NuFO): peaks per voxel",
    "afd_max": "FOD amplitude of the largest peak",
    "afd_total": "Integral of the FOD over the sphere, sqrt(4 pi) c_00",
    "afd_sum": "Sum of the reported peaks' amplitudes",
    "peak_fraction": "Each peak's amplitude over afd_sum",
    "rgb": "Directionally encoded colour of the first peak weighted by afd_max (uint8)",
    "qc": "Quality-control picture: first-peak colour map with direction glyphs and NuFO on three mid-slices",
    "fixel": "MRtrix3 fixel directory as fod2fixel: index, directions, afd, peak_amp, disp",
    "pam5": "DIPY PeaksAndMetrics, directions in the image axes",
}


@dataclass(frozen=True)
class FodInput:
    """One FOD image of the input dataset: its path, BIDS entities (in file-name order,
    ``sub`` first), suffix, extension, and the brain mask beside it if any."""

    path: Path
    entities: tuple[tuple[str, str], ...]
    suffix: str
    extension: str
    mask: Path | None

    @property
    def subject(self) -> str:
        return dict(self.entities)["sub"]

    @property
    def session(self) -> str | None:
        return dict(self.entities).get("ses")

    @property
    def folder(self) -> Path:
        """The output folder relative to the dataset root: ``sub-*/[ses-*/]<datatype>``,
        as the FOD's own folder below its ``sub-*`` folder."""
        parts = self.path.parent.parts
        start = next((i for i in range(len(parts) - 1, -1, -1) if parts[i] == f"sub-{self.subject}"), None)
        if start is None:
            return Path(f"sub-{self.subject}", *([f"ses-{self.session}"] if self.session else []), "dwi")
        return Path(*parts[start:])


def parse_name(path: Path, extensions: Sequence[str] = _IMAGE_EXTENSIONS,
               ) -> tuple[tuple[tuple[str, str], ...], str, str] | None:
    """A BIDS file name's entities (in order, ``sub`` first), suffix and extension, one of
    ``extensions`` (an image's by default); None for another name."""
    match = _NAME.match(path.name)
    if match is None or match["ext"] not in extensions:
        return None
    pairs = tuple(tuple(item.split("-", 1)) for item in match["entities"].split("_") if item)
    return (("sub", match["sub"]), *pairs), match["suffix"], match["ext"]


def _is_fod(entities: dict[str, str], suffix: str) -> bool:
    bep016 = entities.get("param", "").lower() == "fod" and suffix == "dwimap"
    # QSIRecon writes one param-fod map per tissue of a multi-tissue fit; peaks are the WM's.
    white_matter = entities.get("label", "WM").upper() == "WM"
    return (bep016 and white_matter) or entities.get("desc", "").lower() == "wmfod"


def brain_mask_beside(image: Path, entities: dict[str, str]) -> Path | None:
    """The ``..._desc-brain_mask`` of the image's subject and session in its folder, one in
    its ``space-`` first; None without one."""
    candidates = []
    for path in sorted(image.parent.iterdir()):
        parsed = parse_name(path)
        if parsed is None or parsed[1] != "mask":
            continue
        found = dict(parsed[0])
        if found.get("desc") == "brain" and (found["sub"], found.get("ses")) == (entities["sub"], entities.get("ses")):
            candidates.append((found.get("space") != entities.get("space"), path))
    return min(candidates)[1] if candidates else None


def without_prefix(values: Iterable[str] | None, prefix: str) -> set[str] | None:
    """Labels as given (``01`` or ``sub-01``) without ``prefix``; None for none given (all)."""
    return {v.removeprefix(prefix) for v in values} if values else None


def dataset_files(bids_dir: Path, exclude: Path | None = None) -> Iterator[tuple[Path, tuple]]:
    """Each file below ``bids_dir`` whose name parses as BIDS, with :func:`parse_name`'s
    result, in sorted order; hidden folders and ``exclude`` (e.g. the output folder inside
    the dataset) are skipped. Raises :class:`InputError` when ``bids_dir`` is no folder."""
    if not bids_dir.is_dir():
        raise InputError("No such dataset", f"BIDS_DIR {str(bids_dir)!r} is not a folder")
    excluded = Path(exclude).resolve() if exclude is not None else None
    for root, folders, files in os.walk(bids_dir):
        folders[:] = sorted(f for f in folders if not f.startswith(".")
                            and (excluded is None or (Path(root) / f).resolve() != excluded))
        for name in sorted(files):
            path = Path(root, name)
            parsed = parse_name(path)
            if parsed is not None:
                yield path, parsed


def find_fods(bids_dir: Path, participant_labels: Iterable[str] | None = None,
              session_labels: Iterable[str] | None = None, exclude: Path | None = None) -> list[FodInput]:
    """The FOD images below ``bids_dir`` (see the module docstring for the names), sorted,
    of the given participants and sessions (labels with or without ``sub-``/``ses-``);
    ``exclude`` (e.g. the output folder inside the dataset) and hidden folders are skipped.
    Raises :class:`InputError` saying what it looked for when nothing matches."""
    bids_dir = Path(bids_dir)
    subjects, sessions = without_prefix(participant_labels, "sub-"), without_prefix(session_labels, "ses-")
    found = []
    for path, parsed in dataset_files(bids_dir, exclude):
        entities = dict(parsed[0])
        if not _is_fod(entities, parsed[1]):
            continue
        if subjects is not None and entities["sub"] not in subjects:
            continue
        if sessions is not None and entities.get("ses") not in sessions:
            continue
        found.append(FodInput(path, parsed[0], parsed[1], parsed[2], brain_mask_beside(path, entities)))
    if not found:
        which = []
        if subjects is not None:
            which.append(f"participants {', '.join(sorted(subjects))}")
        if sessions is not None:
            which.append(f"sessions {', '.join(sorted(sessions))}")
        raise InputError(
            "No FOD images found",
            f"no FOD image{' of ' + ' and '.join(which) if which else ''} below {str(bids_dir)!r}: looked for "
            f"{_LOOKED_FOR}; check the folder and the labels, or rename the FODs to one of these schemes",
        )
    return found


def derivative_name(fod: FodInput, output: str, extension: str) -> str:
    """The output's file name in the FOD's entity scheme and order: its ``param-`` value
    replaced by the output's, or ``param-`` added last where the FOD has none, and its
    ``desc-`` entity by the output's, last (:data:`OUTPUT_ENTITIES`); suffix ``dwimap``."""
    param, desc = OUTPUT_ENTITIES[output]
    parts = [f"{key}-{param if key == 'param' else value}" for key, value in fod.entities
             if key != "desc" and (key != "param" or param is not None)]
    if param is not None and "param" not in dict(fod.entities):
        parts.append(f"param-{param}")
    return "_".join([*parts, f"desc-{desc}", "dwimap"]) + extension


def dataset_uri(root: Path, path: Path, link: str = _INPUT_LINK) -> str:
    """The BIDS URI of ``path`` in the dataset at ``root`` named ``link`` in ``DatasetLinks``
    (empty: the dataset itself, ``bids::sub-01/...``)."""
    return f"bids:{link}:{Path(path).resolve().relative_to(Path(root).resolve()).as_posix()}"


def write_dataset_description(output_dir: Path, bids_dir: Path, link: str = _INPUT_LINK,
                              name: str = "fibertensor fiber peaks and fODF metrics") -> Path:
    """``OUTPUT_DIR/dataset_description.json`` of the derivatives dataset, the input dataset
    linked as ``link``; an existing one must be ours (a re-run adds participants to it)."""
    path = Path(output_dir) / "dataset_description.json"
    if path.exists():
        try:
            previous = json.loads(path.read_text())
            ours = previous.get("DatasetType") == "derivative" and any(
                entry.get("Name") == "fibertensor" for entry in previous.get("GeneratedBy", []))
        except (ValueError, AttributeError):
            ours = False
        if not ours:
            raise InputError(
                "Output folder holds another dataset",
                f"{str(path)!r} does not describe a fibertensor derivatives dataset; choose an empty OUTPUT_DIR",
            )
    source = Path(bids_dir).resolve().as_uri()
    return write_json_atomic(path, {
        "Name": name,
        "BIDSVersion": BIDS_VERSION,
        "DatasetType": "derivative",
        "GeneratedBy": [generated_by()],
        "SourceDatasets": [{"URL": source}],
        "DatasetLinks": {link: source},
    })


def publish_job(fod: FodInput, bids_dir: Path, job_folder: Path, sidecar: dict, output_dir: Path,
                sources: list[str] | None = None) -> list[Path]:
    """Move a finished job's files from ``job_folder`` (``sidecar["outputs"]`` names them;
    a ``.tar`` fixel archive of the service is unpacked) into the derivatives dataset under
    BIDS names, each with its JSON sidecar; returns the published paths. ``sources``: the
    BIDS URIs of its inputs (default: the FOD's and its mask's in ``bids_dir``)."""
    target = Path(output_dir) / fod.folder
    target.mkdir(parents=True, exist_ok=True)
    if sources is None:
        sources = [dataset_uri(bids_dir, fod.path), *([dataset_uri(bids_dir, fod.mask)] if fod.mask else [])]
    provenance = {key: sidecar[key] for key in ("generated_by", "input", "backend", "device", "lmax", "versions",
                                                "seconds", "voxels_processed", "voxels_with_peaks") if key in sidecar}
    published = []
    for output, names in sidecar["outputs"].items():
        for name in names:
            source = Path(job_folder) / name
            extension = ".pam5" if output == "pam5" else ".png" if output == "qc" else \
                next((e for e in _IMAGE_EXTENSIONS if name.endswith(e)), "")
            destination = target / derivative_name(fod, output, extension)
            if name.endswith(".tar"):
                shutil.rmtree(destination, ignore_errors=True)
                with tarfile.open(source) as archive:
                    archive.extractall(source.parent, filter="data")
                source = source.with_suffix("")
            elif destination.is_dir():
                shutil.rmtree(destination)
            os.replace(source, destination)
            description = {"Description": _DESCRIPTIONS[output], "Sources": sources,
                           "Parameters": sidecar["parameters"]}
            if output == "peaks":
                description["Provenance"] = provenance
            stem = destination.name.removesuffix(extension)
            write_json_atomic(destination.with_name(stem + ".json"), description)
            published.append(destination)
    return published


def run_bids_peaks(bids_dir: Path, output_dir: Path, params: PeaksParams = PeaksParams(),
                   participant_labels: Iterable[str] | None = None, session_labels: Iterable[str] | None = None,
                   log: Callable[[str], None] = lambda message: None,
                   limits: "InputLimits | None" = None, *, devices: Sequence[str] | None = None,
                   processes: int = 1) -> dict[Path, list[Path] | str]:
    """Run one peaks job per FOD of the selected participants and sessions, here (CPU or
    GPU, ``params.backend``), and publish each into ``output_dir`` as it finishes.

    The FODs go through the batch pipeline (:func:`worker.batch.run_batch`: the next FODs
    are read while one is computed and the previous ones written; ``devices`` and
    ``processes`` as there, one process without devices running here); each FOD's files are
    those :func:`worker.jobs.peaks.run_peaks` writes for it alone, byte for byte. A FOD that
    fails does not stop the others: the result maps each FOD, in :func:`find_fods` order, to
    its published files or to the error that stopped it. ``limits``: each FOD's headers are
    first checked as the service checks an upload (:func:`worker.input_limits.check_job_inputs`)."""
    from worker.batch import BatchItem
    from worker.jobs.peaks import PeaksOutputs

    output_dir = Path(output_dir)
    fods = find_fods(bids_dir, participant_labels, session_labels, exclude=output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    write_dataset_description(output_dir, bids_dir)
    staging = output_dir / ".work"
    shutil.rmtree(staging, ignore_errors=True)
    # Numbered folders: two FODs of one name in different pipelines' folders run at once.
    items = {fod.path: BatchItem(fod.path, PeaksOutputs.in_folder(staging / f"{number}-{fod.path.name}"), fod.mask)
             for number, fod in enumerate(fods, 1)}
    by_path = {fod.path: fod for fod in fods}

    def publish(path: Path, item: BatchItem) -> list[Path]:
        sidecar = json.loads(item.outputs.sidecar.read_text(encoding="utf-8"))
        return publish_job(by_path[item.fod], bids_dir, item.outputs.folder, sidecar, output_dir)

    try:
        results = run_and_publish(items, params, publish, {path: item.outputs.folder for path, item in items.items()},
                                  log=lambda path, said: f"{path.name}: {said}", folders=lambda path: by_path[path].folder,
                                  devices=devices, processes=processes, limits=limits, write=log)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return {fod.path: results[fod.path] for fod in fods}


def run_and_publish(items: dict[Path, object], params, publish: Callable[[Path, object], list[Path]],
                    work: dict[Path, Path], *, log: Callable[[Path, str], str], folders: Callable[[Path], Path],
                    write: Callable[[str], None], devices: Sequence[str] | None = None, processes: int = 1,
                    limits: "InputLimits | None" = None) -> dict[Path, list[Path] | str]:
    """Run ``items`` (by a path of the caller's: the input dataset's file they come from; all
    of one job kind) through the batch pipeline (:func:`worker.batch.run_batch`) and
    ``publish(path, item)`` each as it finishes; then its ``work[path]`` folder goes. Returns,
    by that path, the published files, or the error that stopped it; a failed publish is
    that input's error. ``write`` gets a line per input, counting up:
    ``[n/N] <log(path, what)>``, ``what`` being ``<k> files in <folders(path)>`` or the error."""
    from worker.batch import run_batch

    results: dict[Path, list[Path] | str] = {}
    keys = {item.input: path for path, item in items.items()}

    def finished(report: "ItemReport") -> None:
        # Called once per input, one call at a time; an exception here would be lost in a
        # writer thread, or stop the whole batch, so a failed publish is that input's error.
        path = keys[report.input]
        outcome: list[Path] | str = report.error
        if report.ok:
            try:
                outcome = publish(path, items[path])
            except Exception as exc:
                outcome = f"{type(exc).__name__}: {exc}"
        shutil.rmtree(work[path], ignore_errors=True)
        results[path] = outcome
        said = f"{len(outcome)} files in {folders(path)}" if isinstance(outcome, list) else outcome
        write(f"[{len(results)}/{len(items)}] {log(path, said)}")

    reports = run_batch(list(items.values()), params, devices=devices, processes=processes, limits=limits,
                        report=finished)
    for report in reports:
        if keys[report.input] not in results:  # its worker process stopped before reporting it
            finished(report)
    return results
