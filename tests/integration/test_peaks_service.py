"""Peaks through the real service equal ``fibertensor peaks`` on the same file: once through
Redis and a real Celery worker, once through the embedded default (``fibertensor serve``)
with the ``fibertensor submit`` client."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import httpx
import nibabel as nib
import numpy as np
import pytest

from service.app import create_app
from service.cli import main
from service.settings import Settings
from tests.file_contents import assert_same_file
from tests.integration.processes import (
    free_port,
    serve_in_thread,
    service_env,
    start_serve,
    start_worker,
    stop,
    wait_for,
)
from worker.job_kinds import get_job_kind
from worker.sample import write_sample

_OUTPUTS = ("peaks", "amplitudes", "count")


@pytest.fixture(scope="module")
def phantom(tmp_path_factory) -> dict[str, Path]:
    """A generated FOD phantom and the bare CLI's peaks of it (the reference)."""
    folder = tmp_path_factory.mktemp("phantom")
    paths = write_sample(folder / "sample", shape=(6, 6, 4), seed=5)
    prefix = folder / "cli" / "ref"
    prefix.parent.mkdir()
    assert main(["peaks", str(paths["fod"]), str(prefix), "--mask", str(paths["mask"]),
                 "--backend", "cpu", "--quiet"]) == 0
    reference = {name: prefix.with_name(f"ref_{name}.nii.gz") for name in _OUTPUTS}
    return {"fod": paths["fod"], "mask": paths["mask"], "sidecar": prefix.with_name("ref.json"),
            "qc": prefix.with_name("ref_qc.png"), **reference}


def _assert_same_peaks(phantom: dict[str, Path], folder: Path) -> None:
    """The service's results equal the CLI's: the same bytes (the service stores the upload
    inflated, as .nii, and still writes .nii.gz), the QC picture (titled with the uploaded
    name) and the sidecar's input block, which names and hashes the uploaded .nii.gz."""
    for name in _OUTPUTS:
        ours = nib.load(folder / f"{name}.nii.gz")
        ref = nib.load(phantom[name])
        np.testing.assert_array_equal(np.asarray(ours.dataobj), np.asarray(ref.dataobj))
        np.testing.assert_array_equal(ours.affine, ref.affine)
        assert_same_file(folder / f"{name}.nii.gz", phantom[name])
    count = np.asarray(nib.load(folder / "count.nii.gz").dataobj)
    assert count.sum() > 0  # the phantom has fibers; the comparison is not of empty volumes
    assert (folder / "qc.png").read_bytes() == phantom["qc"].read_bytes()
    ours, ref = json.loads((folder / "peaks.json").read_text()), json.loads(phantom["sidecar"].read_text())
    assert ours["input"] == ref["input"]
    assert ours["input"]["sha256"] == {"fod.nii.gz": hashlib.sha256(phantom["fod"].read_bytes()).hexdigest(),
                                       "mask.nii.gz": hashlib.sha256(phantom["mask"].read_bytes()).hexdigest()}


@pytest.mark.requires_redis
def test_peaks_through_redis_and_a_celery_worker(phantom, redis_url, tmp_path):
    data_dir = tmp_path / "data"
    settings = Settings(data_dir=data_dir, broker_url=redis_url, queue="peaks-e2e")
    worker = start_worker(service_env(data_dir, redis_url, queue="peaks-e2e"), tmp_path / "worker.log", "cpu0@test")
    try:
        with serve_in_thread(create_app(settings)) as base:
            _run_one_job(base, phantom, tmp_path)
    finally:
        stop(worker)
    _assert_same_peaks(phantom, tmp_path / "out")


def _run_one_job(base: str, phantom: dict[str, Path], tmp_path: Path) -> None:
    """Submit the phantom, wait for the job and download its results into ``tmp_path/out``."""
    wait_for(lambda: httpx.get(f"{base}/readyz", timeout=5).status_code == 200, 30, "readyz")
    with open(phantom["fod"], "rb") as fod, open(phantom["mask"], "rb") as mask:
        response = httpx.post(f"{base}/v1/jobs/peaks", files={"fod": ("fod.nii.gz", fod), "mask": ("mask.nii.gz", mask)},
                              data={"backend": "cpu", "label": "phantom"}, timeout=30)
    assert response.status_code == 202, response.text
    location = base + response.headers["location"]  # a path: URLs never come from the Host header
    job = wait_for(lambda: (j := httpx.get(location).json())["status"] in ("succeeded", "failed") and j,
                   120, "the peaks job")
    assert job["status"] == "succeeded", job["error"]
    assert [r["name"] for r in job["results"]] == list(get_job_kind("peaks").result_names)
    out = tmp_path / "out"
    out.mkdir()
    for result in job["results"]:
        (out / result["name"]).write_bytes(httpx.get(base + result["url"]).content)


def test_peaks_through_the_embedded_default_and_the_client(phantom, tmp_path):
    port = free_port()
    serve = start_serve(service_env(tmp_path / "data"), tmp_path / "serve.log", port)
    try:
        out = tmp_path / "out"
        code = main(["submit", "peaks", str(phantom["fod"]), "--mask", str(phantom["mask"]), "--backend", "cpu",
                     "--server", f"http://127.0.0.1:{port}", "--out", str(out), "--quiet"])
        assert code == 0
    finally:
        stop(serve, timeout=60)
    _assert_same_peaks(phantom, out)
    assert not (tmp_path / "data" / "staging").exists() or list((tmp_path / "data" / "staging").iterdir()) == []
