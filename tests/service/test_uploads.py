"""Bad uploads: each gets its 4xx problem and leaves no file, no job and no message behind."""

from __future__ import annotations

import gzip

import nibabel as nib
import numpy as np
import pytest

from tests.service.conftest import leftovers
from tests.service.toy_kind import write_volume

pytestmark = pytest.mark.anyio


def _header_only_nifti(shape, dtype=np.float32) -> bytes:
    """A NIfTI header that claims ``shape`` with no data after it."""
    header = nib.Nifti1Header()
    header.set_data_shape(shape)
    header.set_data_dtype(dtype)
    header["vox_offset"] = 352
    return header.binaryblock + b"\x00" * 4


async def _post(client, files, data=None):
    return await client.post("/v1/jobs/scale", files=files, data=data or {})


def _assert_nothing_left(store):
    assert leftovers(store) == []
    queue = store.data_dir / "broker" / "queue"
    assert not queue.exists() or list(queue.iterdir()) == []


async def _expect(response, status, title=None, detail=None):
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["status"] == status
    if title:
        assert problem["title"] == title
    if detail:
        assert detail in problem["detail"], problem["detail"]
    return problem


async def test_not_nifti(client, store, tmp_path):
    response = await _post(client, {"volume": ("volume.nii", b"this is not an image" * 30)})
    await _expect(response, 422, "Unreadable NIfTI file", "the volume file 'volume.nii' could not be read as NIfTI")
    response = await _post(client, {"volume": ("volume.nii.gz", b"plain bytes, not gzip" * 30)})
    await _expect(response, 422, "Not gzip-compressed")
    _assert_nothing_left(store)


async def test_truncated_gzip(client, store, tmp_path):
    noise = np.random.default_rng(0).normal(size=(20, 20, 20, 6)).astype(np.float32)
    data = write_volume(tmp_path / "v.nii.gz", noise).read_bytes()
    response = await _post(client, {"volume": ("volume.nii.gz", data[: len(data) // 2])})
    await _expect(response, 422, "Truncated or damaged file", "cut short, send or write it again")
    _assert_nothing_left(store)


async def test_truncated_uncompressed(client, store, tmp_path):
    raw = write_volume(tmp_path / "v.nii", np.ones((8, 8, 8), np.float32)).read_bytes()
    response = await _post(client, {"volume": ("v.nii", raw[:-100])})
    await _expect(response, 422, "Truncated file", "declares 2048 bytes of image data but the file holds only 1948")
    _assert_nothing_left(store)


async def test_gzip_bomb_is_rejected_from_its_header(client, store):
    # 1000³ voxels × 45 volumes of float32 (180 GB) claimed by a file of a few hundred bytes
    bomb = gzip.compress(_header_only_nifti((1000, 1000, 1000, 45)))
    assert len(bomb) < 1000
    problem = await _expect(await _post(client, {"volume": ("v.nii.gz", bomb)}), 422, "Too many voxels")
    assert "1000×1000×1000 has 1000000000 voxels" in problem["detail"]
    # under the voxel limit but 23 MB of float64 data: over max_input_bytes (16 MiB)
    bomb = gzip.compress(_header_only_nifti((40, 40, 40, 45), np.float64))
    await _expect(await _post(client, {"volume": ("v.nii.gz", bomb)}), 422, "Input too large",
                  "declares 23040000 bytes")
    _assert_nothing_left(store)


async def test_gzip_stream_larger_than_its_header(client, store):
    # a small header followed by 64 MB of zeros: compresses to ~64 KB, must not be inflated in full
    body = _header_only_nifti((4, 4, 4)) + bytes(64 << 20)
    response = await _post(client, {"volume": ("v.nii.gz", gzip.compress(body, 9))})
    await _expect(response, 422, "Input larger than its header")
    _assert_nothing_left(store)


async def test_over_the_size_limit_is_413(client, store, tmp_path):
    big = write_volume(tmp_path / "big.nii", np.ones((70, 70, 70), np.float32))  # 1.4 MB > 1 MiB
    with open(big, "rb") as handle:
        response = await _post(client, {"volume": ("big.nii", handle)})
    await _expect(response, 413, "Upload too large", "FIBERTENSOR_MAX_UPLOAD_BYTES")
    _assert_nothing_left(store)


async def test_over_the_size_limit_without_content_length_is_413(client, store):
    boundary = "xyzBOUNDARY"
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"volume\"; "
            f"filename=\"v.nii\"\r\nContent-Type: application/octet-stream\r\n\r\n").encode()

    async def body():
        yield head
        for _ in range(40):  # 40 × 64 KiB, streamed with chunked transfer encoding
            yield bytes(64 * 1024)
        yield f"\r\n--{boundary}--\r\n".encode()

    response = await client.post("/v1/jobs/scale", content=body(),
                                 headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
    await _expect(response, 413)
    _assert_nothing_left(store)


async def test_mismatched_mask(client, store, volume, tmp_path):
    mask = write_volume(tmp_path / "mask.nii.gz", np.ones((5, 4, 2), np.uint8))
    files = {"volume": (volume.name, volume.read_bytes()), "mask": (mask.name, mask.read_bytes())}
    await _expect(await _post(client, files), 422, "Mask grid mismatch")
    _assert_nothing_left(store)


async def test_form_errors(client, store, volume):
    data = volume.read_bytes()
    await _expect(await _post(client, {"volume": ("v.txt", data)}), 422, "Unsupported file type",
                  "must end in .nii or .nii.gz")
    await _expect(await _post(client, {"mask": ("m.nii.gz", data)}), 422, "Missing input",
                  "missing required file field(s) volume")
    await _expect(await _post(client, {"volume": ("v.nii.gz", data), "extra": ("x.nii", data)}), 422,
                  "Unknown field", "unexpected file field 'extra'")
    await _expect(await _post(client, {"volume": ("v.nii.gz", data)}, {"colour": "red"}), 422,
                  "Unknown field", "unexpected field 'colour'")
    problem = await _expect(await _post(client, {"volume": ("v.nii.gz", data)}, {"factor": "lots", "chunks": "0"}),
                            422, "Invalid parameters")
    assert {e["field"] for e in problem["errors"]} == {"factor", "chunks"}
    await _expect(await client.post("/v1/jobs/scale", json={"factor": 2}), 415, detail="multipart/form-data")
    await _expect(await _post(client, {"volume": ("v.nii.gz", b"")}), 422, "Empty file")
    _assert_nothing_left(store)


async def test_queue_unreachable_is_503_and_leaves_nothing(app_factory, tmp_path, volume):
    import httpx

    from service.settings import Settings
    from worker.job_store import JobStore

    settings = Settings(data_dir=tmp_path / "d", broker_url="redis://127.0.0.1:1/0")
    app = app_factory(settings)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        response = await _post(client, {"volume": (volume.name, volume.read_bytes())})
        await _expect(response, 503, detail="the job queue is unreachable")
        ready = await client.get("/readyz")
        await _expect(ready, 503, detail="broker is unreachable")
    assert leftovers(JobStore(settings.data_dir)) == []


async def test_peaks_uploads_that_are_not_sh_volumes(client, store, tmp_path):
    """The peaks kind's header checks, through the same upload path."""
    three_d = write_volume(tmp_path / "fod3d.nii.gz", np.ones((4, 4, 4), np.float32))
    problem = await _expect(
        await client.post("/v1/jobs/peaks", files={"fod": (three_d.name, three_d.read_bytes())}),
        422, "Not a 4D volume",
    )
    assert "3D image (4 x 4 x 4)" in problem["detail"]
    wrong = write_volume(tmp_path / "fod44.nii.gz", np.ones((4, 4, 4, 44), np.float32))
    problem = await _expect(
        await client.post("/v1/jobs/peaks", files={"fod": (wrong.name, wrong.read_bytes())}),
        422, "Wrong number of volumes",
    )
    assert "44" in problem["detail"]
    good = write_volume(tmp_path / "fod.nii.gz", np.ones((4, 4, 4, 45), np.float32))
    mask = write_volume(tmp_path / "mask.nii.gz", np.ones((4, 4, 3), np.uint8))
    await _expect(
        await client.post("/v1/jobs/peaks", files={"fod": (good.name, good.read_bytes()),
                                                   "mask": (mask.name, mask.read_bytes())}),
        422, "Mask grid mismatch",
    )
    await _expect(
        await client.post("/v1/jobs/peaks", files={"fod": (good.name, good.read_bytes())}, data={"npeaks": "0"}),
        422, "Invalid parameters", "npeaks",
    )
    _assert_nothing_left(store)
    accepted = await client.post("/v1/jobs/peaks", files={"fod": (good.name, good.read_bytes())},
                                 data={"npeaks": "2", "basis": "dipy"})
    assert accepted.status_code == 202
    assert accepted.json()["params"]["npeaks"] == 2 and accepted.json()["params"]["basis"] == "dipy"
