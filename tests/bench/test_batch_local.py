"""bench.batch's local run: beside the nvidia-smi log, a timeline of the run subject by
subject, each entry the batch's own report of that subject."""

from __future__ import annotations

import json

import numpy as np

from bench.batch import run_local
from gpu.peaks.phantom import fod_phantom
from worker.batch import batch_items
from worker.io.images import write_image
from worker.params import PeaksParams


def test_a_local_run_writes_its_timeline_beside_the_gpu_log(tmp_path):
    inputs = []
    for index in range(3):
        inputs.append(write_image(tmp_path / f"sub-{index}.nii", fod_phantom((4, 3, 2), 8, seed=index)["sh"],
                                  np.eye(4)))
    result = run_local(batch_items(inputs, tmp_path / "out"), PeaksParams(backend="cpu"), None, 1,
                       tmp_path / "nvidia-smi-local.csv")
    timeline = json.loads((tmp_path / "nvidia-smi-local.timeline.json").read_text())
    subjects = timeline["subjects"]
    assert sorted(entry["input"] for entry in subjects) == [path.name for path in inputs]
    assert all(entry["worker"] == "local" for entry in subjects)
    assert timeline["started"] <= min(entry["done"] for entry in subjects) <= max(
        entry["done"] for entry in subjects) <= timeline["ended"]
    # the stage means the bench prints are the timeline's
    for stage in ("read", "compute", "write"):
        assert np.isclose(result["stages"][stage], np.mean([entry["seconds"][stage] for entry in subjects]))
