"""Through the API: a 367 KB upload whose peaks job would need 4.4 GiB is
refused with 413 before it is queued, and leaves nothing behind."""

from __future__ import annotations

import httpx
import pytest

from service.settings import Settings
from tests.service.conftest import leftovers
from tests.worker.test_input_limits import BOMB_SHAPE, write_header_and_zeros
from worker.job_store import JobStore

pytestmark = pytest.mark.anyio


async def test_small_upload_of_a_huge_job_is_413(app_factory, tmp_path):
    bomb = write_header_and_zeros(tmp_path / "upload.nii.gz", BOMB_SHAPE)
    settings = Settings(data_dir=tmp_path / "data")  # the default limits
    assert settings.max_job_memory_bytes == 4 << 30
    app = app_factory(settings)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        response = await client.post("/v1/jobs/peaks", files={"fod": (bomb.name, bomb.read_bytes())})
    assert response.status_code == 413, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["title"] == "Job too large for memory"
    assert f"needs about 4.4 GiB of memory ({256 * 256 * 128 * 568} bytes)" in problem["detail"]
    assert "limit of 4.0 GiB (FIBERTENSOR_MAX_JOB_MEMORY_BYTES)" in problem["detail"]
    assert leftovers(JobStore(settings.data_dir)) == []
