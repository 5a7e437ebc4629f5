"""The whole service with real processes: HTTP server, Celery worker, broker (embedded folder
or redis-server), and the ``fibertensor submit``/``jobs`` client, on the test job kind."""

from __future__ import annotations

import argparse

import httpx
import nibabel as nib
import numpy as np
import pytest

import worker.job_kinds as job_kinds_module
from service.app import create_app
from service.cli import CommandError, client
from service.settings import Settings
from tests.integration.processes import serve_in_thread, service_env, start_worker, stop, wait_for
from tests.service.toy_kind import register_toy_kind, write_volume
from worker.job_kinds import job_kinds


def _client_main(argv: list[str]) -> int:
    """The ``submit`` and ``jobs`` commands as ``fibertensor`` runs them."""
    parser = argparse.ArgumentParser(prog="fibertensor")
    client.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


@pytest.fixture(scope="module", params=["embedded", pytest.param("redis", marks=pytest.mark.requires_redis)])
def live_service(request, tmp_path_factory):
    """API server and worker for each broker, shared by the module's tests (their jobs carry
    their own labels): starting and stopping them is most of each test's time."""
    url = request.getfixturevalue("redis_url") if request.param == "redis" else ""
    folder = tmp_path_factory.mktemp(f"service-{request.param}")
    data_dir = folder / "data"
    settings = Settings(data_dir=data_dir, broker_url=url, queue=f"q-{request.param}")
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(job_kinds_module, "_FAMILY_MODULES", register_toy_kind(job_kinds_module))
        # only the test kind runs: no pool process loads the peaks kernels as it starts
        worker = start_worker(service_env(data_dir, url, queue=settings.queue, worker_warmup_lmax=""),
                              folder / "worker.log", "e2e@test")
        try:
            with serve_in_thread(create_app(settings, kinds=job_kinds())) as base:
                wait_for(lambda: httpx.get(f"{base}/readyz", timeout=5).status_code == 200, 30, "readyz")
                yield base
        finally:
            stop(worker)


def test_batch_from_a_folder_runs_and_downloads(live_service, tmp_path, capsys):
    ready = httpx.get(f"{live_service}/readyz").json()
    assert ready["status"] == "ready" and ready["workers"] == ["e2e@test"]
    batch = tmp_path / "subjects"
    batch.mkdir()
    rng = np.random.default_rng(3)
    volumes = {f"sub-{i}": rng.normal(size=(6, 5, 4)).astype(np.float32) for i in range(3)}
    for name, data in volumes.items():
        write_volume(batch / f"{name}.nii.gz", data)
    (batch / "notes.txt").write_text("not an input: skipped")
    out = tmp_path / "out"
    code = _client_main(["submit", "scale", str(batch), "--factor", "-2", "--server", live_service,
                         "--out", str(out), "--quiet"])
    assert code == 0
    for name, data in volumes.items():
        scaled = nib.load(out / name / "scaled.nii.gz")
        np.testing.assert_allclose(np.asarray(scaled.dataobj), -2.0 * data, rtol=1e-6)
    capsys.readouterr()
    assert _client_main(["jobs", "--label", "subjects", "--server", live_service]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert len(listing) == 4 and all("succeeded" in line and "subjects" in line for line in listing[1:])


def test_failures_and_cancellation_through_the_client(live_service, tmp_path, capsys):
    volume = write_volume(tmp_path / "v.nii.gz", np.ones((4, 4, 4), np.float32))
    code = _client_main(["submit", "scale", str(volume), "--fail", "input", "--server", live_service,
                         "--wait", "--quiet"])
    assert code == 1
    assert "failed: Bad values: volume: contains values this job cannot use" in capsys.readouterr().err
    # Refused by the kind's schema before anything is uploaded; the server refuses it too (422).
    with pytest.raises(CommandError, match=r"--chunks: Input should be greater than or equal to 1 \(got 0\)"):
        _client_main(["submit", "scale", str(volume), "--chunks", "0", "--server", live_service])
    refused = httpx.post(f"{live_service}/v1/jobs/scale", data={"chunks": "0"},
                         files={"volume": ("v.nii.gz", volume.read_bytes())})
    assert refused.status_code == 422 and refused.headers["content-type"] == "application/problem+json"
    assert "chunks" in refused.json()["detail"]
    assert _client_main(["submit", "scale", str(volume), "--chunks", "40", "--delay", "0.25",
                         "--label", "slow", "--server", live_service]) == 0
    job_id = capsys.readouterr().out.split()[0]
    wait_for(lambda: httpx.get(f"{live_service}/v1/jobs/{job_id}").json()["progress"] > 0, 30, "progress")
    assert _client_main(["jobs", "--label", "slow", "--cancel", "--server", live_service]) == 0
    wait_for(lambda: httpx.get(f"{live_service}/v1/jobs/{job_id}").json()["status"] == "cancelled", 30,
             "the running job to stop")
    assert _client_main(["jobs", job_id, "--cancel", "--server", live_service]) == 0
    assert f"{job_id} deleted" in capsys.readouterr().out
    assert httpx.get(f"{live_service}/v1/jobs/{job_id}").status_code == 404
