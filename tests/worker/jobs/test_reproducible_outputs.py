"""A peaks job writes the same files, byte for byte, whatever ran before it in its process:
the reference job in a fresh ``fibertensor peaks`` process, and as the 50th job of a
long-lived process that ran a varied sequence of jobs before it (other SH orders, with and
without mask, NIfTI and MRtrix inputs, every output format, metrics and QC picture on and
off, other K), there through the job runner as the service's worker runs a job, through the
job-kind registry, and as a thread of the batch pipeline beside other inputs, with glibc
filling the memory it hands out with a byte pattern. Every image, the QC PNG, the fixel
files and the .pam5 are equal (a ``.gz`` inflated: ``tests/file_contents.py``); the sidecar
apart from its timings.

On a GPU the same runs use the CUDA backend (``NUMBA_ENABLE_CUDASIM=0``)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest

from gpu.cuda.device import cuda_available
from gpu.peaks.phantom import fod_phantom
from tests.file_contents import file_content
from tests.worker.io.test_mif import mif_without_our_command
from worker.io.images import write_image

ROOT = Path(__file__).resolve().parents[3]
REFERENCE = {"npeaks": 3, "metrics": ["all"], "qc": True, "format": ["nifti", "mif", "fixel", "pam5"]}
# The varied jobs before the reference in the long-lived process: (lmax, input suffix, mask, parameters).
VARIANTS = [
    (4, ".nii.gz", True, {"npeaks": 1}),
    (6, ".mif", False, {"npeaks": 2, "format": ["fixel"], "qc": False}),
    (8, ".mif.gz", True, {"npeaks": 5, "metrics": ["afd_max", "rgb"], "format": ["pam5", "mif"]}),
    (4, ".nii", False, {"npeaks": 4, "metrics": ["none"], "qc": False}),
    (6, ".nii.gz", False, {"npeaks": 3, "format": ["nifti", "mif", "fixel", "pam5"], "metrics": ["peak_fraction"]}),
    (8, ".nii", True, {"npeaks": 2, "metrics": ["none"]}),
]
SEQUENCE = 48

# The long-lived process: the varied jobs through the job runner (the service's worker), then
# the reference there, through the job-kind registry, and in the batch pipeline beside others.
LONG_LIVED = """if True:
    import json, shutil, sys
    from pathlib import Path
    from worker.batch import BatchItem, run_batch
    from worker.job_kinds import JobContext, get_job_kind
    from worker.job_runner import run_job
    from worker.job_store import JobRecord, JobStatus, JobStore, utc_now
    from worker.jobs.peaks import PeaksOutputs
    from worker.params.peaks import PeaksParams

    plan = json.loads(Path(sys.argv[1]).read_text())
    out = Path(plan["out"])
    store = JobStore(out / "service")

    def service_job(inputs, params):
        with store.staging() as (job_id, folder):
            for path in inputs.values():
                shutil.copy(path, folder / "inputs" / Path(path).name)
            store.commit(folder, JobRecord(id=job_id, kind="peaks", tenant="default", created_at=utc_now(),
                                           params=params, inputs={slot: Path(p).name for slot, p in inputs.items()}))
        record = run_job(store, job_id, get_job_kind, heartbeat_interval=5.0, heartbeat_timeout=60.0,
                         max_worker_losses=1, keep_inputs=True)
        assert record.status is JobStatus.succeeded, record.error
        return store.outputs_dir(job_id)

    for inputs, params in plan["sequence"]:
        service_job(inputs, params)
    reference, params = plan["reference"]
    shutil.copytree(service_job(reference, params), out / "job runner")
    (out / "registry").mkdir()
    get_job_kind("peaks").run(JobContext(inputs={slot: Path(p) for slot, p in reference.items()},
                                         out_dir=out / "registry", params=PeaksParams(**params)))
    items = [BatchItem(Path(inputs["fod"]), PeaksOutputs.with_prefix(out / "batch" / f"other{n}" / "fod"),
                       Path(inputs["mask"]) if "mask" in inputs else None)
             for n, (inputs, _) in enumerate(plan["sequence"][:4])]
    items.insert(2, BatchItem(Path(reference["fod"]), PeaksOutputs.with_prefix(out / "batch" / "reference" / "fod"),
                              Path(reference["mask"])))
    reports = run_batch(items, PeaksParams(**params), readers=2, writers=3)
    assert all(report.ok for report in reports), [report.error for report in reports]
"""


def _phantom(folder: Path, name: str, lmax: int, suffix: str, mask: bool, seed: int) -> dict[str, str]:
    """A small FOD phantom (a non-finite voxel; a mask without its first slab) as ``name``."""
    grid = (5, 4, 3)
    sh = fod_phantom(grid, lmax, seed=seed)["sh"].astype(np.float32)
    sh[1, 2, 1, 3] = np.nan
    affine = np.array([[-1.8, 0.3, 0.0, 20.0], [0.2, 2.0, 0.1, -12.0], [0.0, -0.1, 2.5, 5.0], [0.0, 0.0, 0.0, 1.0]])
    inputs = {"fod": str(write_image(folder / f"{name}{suffix}", sh, affine))}
    if mask:
        keep = np.ones(grid, np.uint8)
        keep[0] = 0
        inputs["mask"] = str(write_image(folder / f"{name}_mask{suffix}", keep, affine))
    return inputs


def _outputs(folder: Path, stem: str = "") -> dict[str, bytes]:
    """Every output file below ``folder`` by its job name (``stem`` dropped; a fixel
    archive's members as the directory's files); the sidecar without its timings."""
    files = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        name = path.relative_to(folder).as_posix()
        name = "peaks.json" if stem and name == f"{stem[:-1]}.json" else name.removeprefix(stem)
        if name.endswith(".tar"):
            with tarfile.open(path) as archive:
                for member in archive.getmembers():
                    if member.isfile():
                        content = archive.extractfile(member).read()
                        mif = member.name.endswith((".mif", ".mif.gz"))
                        files[member.name] = mif_without_our_command(content) if mif else content
            continue
        content = file_content(path)  # a .gz by what it inflates to (tests/file_contents.py says why)
        if name.endswith((".mif", ".mif.gz")):  # each run's command_history names its own command
            content = mif_without_our_command(content)
        if name == "peaks.json":
            sidecar = json.loads(content)
            assert sidecar.pop("seconds")["total"] > 0
            sidecar["outputs"] = {key: [n.removeprefix(stem).removesuffix(".tar") for n in names]
                                  for key, names in sidecar["outputs"].items()}
            content = json.dumps(sidecar, sort_keys=True).encode()
        files[name] = content
    return files


@pytest.mark.parametrize("backend", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not cuda_available(), reason="the CUDA backend's runs need a CUDA GPU (NUMBA_ENABLE_CUDASIM=0)"))])
def test_the_reference_job_writes_the_same_bytes_whatever_ran_before(tmp_path, backend):
    inputs_dir = tmp_path / "inputs"
    inputs_dir.mkdir()
    reference = _phantom(inputs_dir, "fod", 6, ".nii.gz", True, seed=11)
    sequence = []
    for n in range(SEQUENCE):
        lmax, suffix, mask, params = VARIANTS[n % len(VARIANTS)]
        folder = inputs_dir / f"job{n}"
        folder.mkdir()
        sequence.append((_phantom(folder, "fod", lmax, suffix, mask, seed=n % 7), {**params, "backend": backend}))
    params = {**REFERENCE, "backend": backend}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}

    fresh = tmp_path / "fresh"
    subprocess.run([sys.executable, "-m", "service", "peaks", reference["fod"], str(fresh / "fod"), "--mask",
                    reference["mask"], "--npeaks", "3", "--metrics", "all", "--format", ",".join(REFERENCE["format"]),
                    "--backend", backend, "--quiet"], check=True, cwd=ROOT, env=env)
    expected = _outputs(fresh, "fod_")
    assert {"peaks.nii.gz", "peaks.mif.gz", "qc.png", "rgb.mif.gz", "peaks.pam5", "peaks.json"} <= expected.keys()
    assert any(name.startswith("fixels/") for name in expected)

    out = tmp_path / "long-lived"
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"out": str(out), "sequence": sequence, "reference": [reference, params]}))
    # glibc fills what malloc gives and takes back with a byte pattern there: a read of memory
    # no one wrote shows as another value than a fresh process's zero pages
    subprocess.run([sys.executable, "-c", LONG_LIVED, str(plan)], check=True, cwd=ROOT,
                   env={**env, "MALLOC_PERTURB_": "165"})
    runs = {"job runner": _outputs(out / "job runner"), "registry": _outputs(out / "registry"),
            "batch": _outputs(out / "batch" / "reference", "fod_")}
    for run, files in runs.items():
        assert files.keys() == expected.keys(), run
        for name, content in files.items():  # file by file, so that a difference names its file
            if content != expected[name] and name.endswith(".png"):  # the picture, or only its encoding?
                assert _png_pixels(content) == _png_pixels(expected[name]), f"{name}'s pixels differ in the {run} run"
            assert content == expected[name], f"{name} differs in the {run} run"


def _png_pixels(content: bytes) -> bytes:
    """The raw rows of a PNG: where two files differ, whether the picture or only its
    encoding does."""
    from PIL import Image

    with Image.open(io.BytesIO(content)) as picture:
        return picture.tobytes()
