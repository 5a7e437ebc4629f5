"""The service runs the same peaks code as the CLI: an MRtrix ``.mif.gz`` upload gives
``.mif.gz`` results, the fODF metric maps and the QC picture, and bad output options are
refused at the door."""

from __future__ import annotations

import numpy as np
import pytest

from gpu.peaks.phantom import fod_phantom
from tests.service.conftest import leftovers, run_queued
from tests.worker.jobs.test_peaks import rotated_affine
from worker.io.images import load_image_data, read_image_header, write_image
from worker.jobs.peaks import PeaksOutputs, run_peaks
from worker.params import PeaksParams

pytestmark = pytest.mark.anyio


async def test_mif_gz_upload_returns_mif_gz_metrics_and_the_picture(client, store, tmp_path):
    sh = fod_phantom((4, 3, 3), 6, seed=5)["sh"].astype(np.float32)
    fod = write_image(tmp_path / "wmfod.mif.gz", sh, rotated_affine())
    response = await client.post("/v1/jobs/peaks", files={"fod": (fod.name, fod.read_bytes())},
                                 data={"backend": "cpu", "metrics": "afd_max,rgb"})
    assert response.status_code == 202, response.text
    run_queued(store)
    job = (await client.get(f"/v1/jobs/{response.json()['id']}")).json()
    assert job["status"] == "succeeded", job["error"]
    names = [result["name"] for result in job["results"]]
    assert names == ["peaks.mif.gz", "amplitudes.mif.gz", "count.mif.gz", "afd_max.mif.gz", "rgb.mif.gz", "qc.png",
                     "peaks.json"]

    local = run_peaks(fod, PeaksOutputs.in_folder(tmp_path / "local"), PeaksParams.model_validate(job["params"]))
    for name in names[:-2]:
        served = tmp_path / "served" / name
        served.parent.mkdir(exist_ok=True)
        served.write_bytes((await client.get(f"/v1/jobs/{job['id']}/results/{name}")).content)
        np.testing.assert_array_equal(load_image_data(read_image_header(served, name)),
                                      load_image_data(read_image_header(tmp_path / "local" / name, name)))
    png = (await client.get(f"/v1/jobs/{job['id']}/results/qc.png")).content
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert local["outputs"]["qc"] == ["qc.png"]


async def test_output_options_are_checked_at_the_door(client, store, tmp_path):
    fod = write_image(tmp_path / "fod.mif", fod_phantom((2, 2, 2), 4, seed=1)["sh"].astype(np.float32), np.eye(4))
    for field, value, words in (("metrics", "nufo", "metrics.0"), ("format", "trk", "format.0"),
                                ("metrics", "all,rgb", "not a mix")):
        response = await client.post("/v1/jobs/peaks", files={"fod": (fod.name, fod.read_bytes())},
                                     data={field: value})
        assert response.status_code == 422 and words in response.json()["detail"], response.text
    assert leftovers(store) == []
