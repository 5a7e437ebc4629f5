"""``fibertensor serve`` (API and embedded worker, the filesystem broker) on a data volume that
fills up: /readyz is polled while it is full, then space comes back and a job is submitted.

Before the broker wrote messages whole, a ping sent while the disk was full left an empty
message file in ``broker/queue/``, and the worker died reading it (``Unrecoverable error:
JSONDecodeError``), again after every restart. Now the ping fails (``/readyz`` 503), nothing is
left behind, an empty message file planted as kombu's own transport left it is set aside, the
same worker runs the job once there is room, and its results are those of ``fibertensor peaks``. The data volume is a real 8 MiB tmpfs (tests/conftest.py: root only).
"""

from __future__ import annotations

import gzip
import json
import subprocess

import httpx
import nibabel as nib
import numpy as np

from service.cli import main
from tests.integration.processes import free_port, service_env, start_serve, stop, wait_for
from worker.sample import write_sample


def _readable(folder) -> bool:
    """Every message file in ``folder`` is a whole JSON object."""
    return all(isinstance(json.loads(path.read_bytes()), dict) for path in folder.glob("*.msg"))


def test_readyz_polled_on_a_full_disk_leaves_the_worker_alive(small_filesystem, tmp_path):
    data_dir = small_filesystem(8)
    paths = write_sample(tmp_path / "sample", shape=(6, 6, 4), seed=5)
    reference = tmp_path / "cli" / "ref"
    reference.parent.mkdir()
    assert main(["peaks", str(paths["fod"]), str(reference), "--mask", str(paths["mask"]),
                 "--backend", "cpu", "--quiet"]) == 0

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "serve.log"
    serve = start_serve(service_env(data_dir, worker_warmup_lmax=""), log, port)
    try:
        worker = httpx.get(f"{base}/healthz").json()["worker"]
        assert worker["state"] == "running" and worker["restarts"] == 0

        filled = subprocess.run(["dd", "if=/dev/zero", f"of={data_dir / 'ballast'}", "bs=64k"],
                                capture_output=True, text=True)
        assert filled.returncode != 0 and "No space left on device" in filled.stderr
        # /readyz reuses a check for 5 s: poll until one made while the disk is full answers
        refused = wait_for(lambda: (r := httpx.get(f"{base}/readyz", timeout=10)).status_code == 503 and r,
                           30, "a readiness check on the full disk", interval=0.5)
        assert "No space left on device" in refused.json()["detail"] and "not full" in refused.json()["detail"]
        assert list((data_dir / "broker" / "queue").iterdir()) == []

        (data_dir / "ballast").unlink()
        # what kombu's own transport left behind in that case: the worker sets it aside
        (data_dir / "broker" / "queue" / "0_planted.fibertensor.msg").write_bytes(b"")
        wait_for(lambda: httpx.get(f"{base}/readyz", timeout=10).status_code == 200, 30, "readiness with room again",
                 interval=0.5)
        with open(paths["fod"], "rb") as fod, open(paths["mask"], "rb") as mask:
            response = httpx.post(f"{base}/v1/jobs/peaks", files={"fod": ("fod.nii.gz", fod), "mask": ("mask.nii.gz", mask)},
                                  data={"backend": "cpu"}, timeout=30)
        assert response.status_code == 202, response.text
        job = wait_for(lambda: (j := httpx.get(base + response.headers["location"]).json())["status"]
                       in ("succeeded", "failed") and j, 120, "the peaks job")
        assert job["status"] == "succeeded", job["error"]
        peaks = next(r for r in job["results"] if r["name"] == "peaks.nii.gz")
        served = nib.Nifti1Image.from_bytes(gzip.decompress(httpx.get(base + peaks["url"]).content))
        expected = nib.load(reference.with_name("ref_peaks.nii.gz"))
        np.testing.assert_array_equal(np.asarray(served.dataobj), np.asarray(expected.dataobj))

        assert httpx.get(f"{base}/healthz").json()["worker"] == worker  # the same process throughout
        assert _readable(data_dir / "broker" / "queue")
        assert [p.name for p in (data_dir / "broker" / "quarantine").iterdir()] == ["0_planted.fibertensor.msg"]
    finally:
        stop(serve, timeout=60)
    text = log.read_text()
    assert "Unrecoverable error" not in text
    assert "unreadable broker file 0_planted.fibertensor.msg (an empty file) moved to" in text
