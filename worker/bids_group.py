"""The group level of the BIDS App: the mean of the participants' response functions, as
MRtrix3's ``responsemean`` (:func:`gpu.fod.response.mean_response`), for a second
participant run with ``--response``: fixel-based analysis fits every subject's FODs with the
same responses, so that their amplitudes compare.

Inputs: the responses a participant run from DWIs estimated, in the derivatives dataset,
``sub-<label>/[ses-<label>/]dwi/..._model-<model>_label-<WM|GM|CSF>_response.txt``.
Outputs, at the dataset's root, one per model and tissue:
``model-<model>_label-<tissue>_desc-groupmean_response.txt`` with a JSON sidecar naming its
``Sources`` (BIDS URIs within the dataset).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Iterable

import numpy as np

from gpu.fod.response import mean_response
from gpu.fod.shells import SHELL_EPSILON
from worker.bids import dataset_uri, parse_name, without_prefix
from worker.errors import InputError
from worker.io.atomic import write_json_atomic
from worker.io.response_files import read_response, write_response
from worker.provenance import generated_by

__all__ = ["group_responses"]

_TISSUES = ("WM", "GM", "CSF")


def _participant_responses(output_dir: Path, participants: set[str] | None,
                           sessions: set[str] | None) -> dict[tuple[str, str], list[Path]]:
    """The participant level's response files by (model, tissue), in sorted path order."""
    found = defaultdict(list)
    for path in sorted(Path(output_dir).glob("sub-*/**/dwi/*_response.txt")):
        parsed = parse_name(path, (".txt",))
        if parsed is None:
            continue
        entities = dict(parsed[0])
        if "model" not in entities or entities.get("label") not in _TISSUES:
            continue
        if participants is not None and entities["sub"] not in participants:
            continue
        if sessions is not None and entities.get("ses") not in sessions:
            continue
        found[(entities["model"], entities["label"])].append(path)
    return found


def group_responses(output_dir: Path, participant_labels: Iterable[str] | None = None,
                    session_labels: Iterable[str] | None = None) -> dict[Path, int]:
    """Average each model's and tissue's participant responses in the derivatives dataset at
    ``output_dir`` (those of the selected participants and sessions) and write them at its
    root. Returns each written file with the number of responses it averages. Raises
    :class:`InputError` when there are none, or when they do not share shells and degrees."""
    if not Path(output_dir).is_dir():
        raise InputError("No derivatives dataset", f"{str(output_dir)!r} is no folder; give the OUTPUT_DIR of a "
                         "participant run from DWIs")
    found = _participant_responses(output_dir, without_prefix(participant_labels, "sub-"),
                                   without_prefix(session_labels, "ses-"))
    if not found:
        raise InputError("No participant responses", f"no sub-*/[ses-*/]dwi/*_model-*_label-*_response.txt in "
                         f"{str(output_dir)!r}: run the participant level from DWIs without --response first "
                         "(it estimates each DWI's responses), then the group level")
    means = []
    for (model, tissue), paths in sorted(found.items(), key=lambda item: (item[0][0], _TISSUES.index(item[0][1]))):
        responses, shells = [], []
        for path in paths:
            response, bvalues = read_response(path)
            if responses and response.shape != responses[0].shape:
                raise InputError("Responses differ in shape",
                                 f"{path.name} has {response.shape[0]} shells of {response.shape[1]} coefficients, "
                                 f"{paths[0].name} {responses[0].shape[0]} of {responses[0].shape[1]}: average "
                                 "responses of DWIs with the same shells, estimated at the same lmax (select them "
                                 "with --participant-label or --session-label)")
            responses.append(response)
            shells.append(bvalues)
        bvalues = _common_shells(paths, shells)
        try:
            means.append((model, tissue, paths, mean_response(responses), bvalues))
        except ValueError as exc:
            raise InputError("Responses cannot be averaged", f"{model} {tissue}: {exc}") from None
    # written once every tissue's inputs agree: a refused group level leaves no file
    written = {}
    for model, tissue, paths, mean, bvalues in means:
        target = Path(output_dir) / f"model-{model}_label-{tissue}_desc-groupmean_response.txt"
        write_response(target, mean, bvalues)
        write_json_atomic(target.with_suffix(".json"), {
            "Description": f"{tissue} response function of the group: the mean of {len(paths)} participants' "
                           "responses, each scaled towards the group's l = 0 terms (MRtrix3 responsemean)",
            "Sources": [dataset_uri(output_dir, path, "") for path in paths],
            "GeneratedBy": [generated_by()],
        })
        written[target] = len(paths)
    return written


def _common_shells(paths: list[Path], shells: list[np.ndarray | None]) -> np.ndarray | None:
    """The responses' ``# Shells:`` b-values averaged; every file's within MRtrix3's shell
    width of the first's (None where a file has none)."""
    if any(b is None for b in shells):
        return None
    for path, bvalues in zip(paths[1:], shells[1:]):
        if np.abs(bvalues - shells[0]).max() > SHELL_EPSILON:
            raise InputError("Responses differ in shells",
                             f"{path.name} is for b = {', '.join(f'{b:.0f}' for b in bvalues)}, {paths[0].name} for "
                             f"b = {', '.join(f'{b:.0f}' for b in shells[0])}: average responses of DWIs with the same "
                             "shells (select them with --participant-label or --session-label)")
    return np.mean(shells, axis=0)
