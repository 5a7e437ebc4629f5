"""The conv and compression job kinds use the same generic upload/queue/poll/download path:
a route each, list parameters as one form field, and real runs through the runner."""

from __future__ import annotations

import io

import nibabel as nib
import numpy as np
import pytest

from tests.service.conftest import leftovers, run_queued
from tests.service.toy_kind import write_volume

pytestmark = pytest.mark.anyio


async def _wait_done(client, job_id):
    job = (await client.get(f"/v1/jobs/{job_id}")).json()
    assert job["status"] == "succeeded", job["error"]
    return job


async def test_every_registered_kind_has_a_route(client):
    spec = (await client.get("/openapi.json")).json()
    for kind in ("peaks", "compress", "decompress", "cp-conv", "tucker-conv"):
        assert f"/v1/jobs/{kind}" in spec["paths"]


async def test_compress_then_decompress_round_trip(client, store, tmp_path):
    rng = np.random.default_rng(2)
    # a rank-(3, 3, 2) volume, compressed at those ranks to a tight error target
    core = rng.normal(size=(3, 3, 2))
    factors = [np.linalg.qr(rng.normal(size=(n, r)))[0] for n, r in ((12, 3), (10, 3), (8, 2))]
    volume = np.einsum("abc,ia,jb,kc->ijk", core, *factors).astype(np.float32)
    path = write_volume(tmp_path / "vol.nii.gz", volume)
    response = await client.post("/v1/jobs/compress", files={"volume": (path.name, path.read_bytes())},
                                 data={"ranks": "3,3,2", "tol": "1e-5", "precision": "fp32", "backend": "cpu"})
    assert response.status_code == 202, response.text
    assert response.json()["params"]["ranks"] == [3, 3, 2]
    run_queued(store)
    job = await _wait_done(client, response.json()["id"])
    archive = next(r for r in job["results"] if r["name"] == "compressed.npz")
    report = next(r for r in job["results"] if r["name"] == "compressed.json")
    # the service keeps the upload inflated; the report names the file as it was sent
    assert (await client.get(report["url"])).json()["input"] == "volume.nii.gz"
    blob = (await client.get(archive["url"])).content
    response = await client.post("/v1/jobs/decompress", files={"archive": ("compressed.npz", blob)})
    assert response.status_code == 202, response.text
    run_queued(store)
    job = await _wait_done(client, response.json()["id"])
    restored = next(r for r in job["results"] if r["name"] == "decompressed.nii.gz")
    image = nib.Nifti1Image.from_bytes(__import__("gzip").decompress((await client.get(restored["url"])).content))
    restored = np.asarray(image.dataobj, np.float64)
    assert np.linalg.norm(restored - volume) <= 1e-5 * np.linalg.norm(volume)


async def test_list_parameters_are_validated(client, store, tmp_path):
    path = write_volume(tmp_path / "vol.nii.gz", np.ones((6, 5, 4), np.float32))
    response = await client.post("/v1/jobs/compress", files={"volume": (path.name, path.read_bytes())},
                                 data={"ranks": "3,x"})
    assert response.status_code == 422 and "ranks.1" in response.json()["detail"]
    response = await client.post("/v1/jobs/compress", files={"volume": (path.name, path.read_bytes())},
                                 data={"tol": "0.01", "psnr": "40"})
    assert response.status_code == 422 and "give one error target" in response.json()["detail"]
    response = await client.post("/v1/jobs/compress", files=[("volume", (path.name, path.read_bytes()))],
                                 data={"precision": ["fp16", "fp32"]})
    assert response.status_code == 422 and "sent twice" in response.json()["detail"]
    assert leftovers(store) == []


async def test_npy_inputs_are_checked_from_their_header(client, store):
    buffer = io.BytesIO()
    np.save(buffer, np.ones((1, 2, 8, 8), np.float32))
    whole = buffer.getvalue()
    response = await client.post("/v1/jobs/cp-conv", files={"input": ("x.npy", whole[:-16])})
    assert response.status_code == 422 and response.json()["title"] == "Truncated file"
    response = await client.post("/v1/jobs/cp-conv", files={"input": ("x.npy", b"\x93NUMPY garbage")})
    assert response.status_code == 422 and response.json()["title"] == "Not a .npy file"
    assert leftovers(store) == []
