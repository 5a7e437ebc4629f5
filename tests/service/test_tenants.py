"""API keys: 401 without or with an unknown key; a tenant sees only its own jobs."""

from __future__ import annotations

import pytest

from service.auth import tenant_for_key
from service.problems import Problem
from service.settings import Settings
from tests.service.conftest import run_queued

pytestmark = pytest.mark.anyio

KEY_A, KEY_B = "key-of-lab-a-0123456789", "key-of-lab-b-9876543210"


@pytest.fixture
def settings(tmp_path):
    return Settings(data_dir=tmp_path / "data", api_keys=f"{KEY_A}=lab-a,{KEY_B}=lab-b")


async def _submit(client, volume, key):
    with open(volume, "rb") as handle:
        return await client.post("/v1/jobs/scale", files={"volume": (volume.name, handle)},
                                 headers={"X-API-Key": key} if key else {})


async def test_missing_and_unknown_keys_are_401(client, volume, store):
    for key in (None, "wrong-key"):
        response = await _submit(client, volume, key)
        assert response.status_code == 401
        assert response.headers["content-type"] == "application/problem+json"
        assert "X-API-Key" in response.json()["detail"]
        assert (await client.get("/v1/jobs", headers={"X-API-Key": key} if key else {})).status_code == 401
    assert list(store.jobs_dir.iterdir()) == [] and list(store.staging_dir.iterdir()) == []
    # probes stay open for orchestrators
    assert (await client.get("/healthz")).status_code == 200


async def test_second_tenant_cannot_see_download_or_cancel(client, volume, store):
    a = {"X-API-Key": KEY_A}
    b = {"X-API-Key": KEY_B}
    job_id = (await _submit(client, volume, KEY_A)).json()["id"]
    assert store.read(job_id).tenant == "lab-a"
    run_queued(store)
    job = (await client.get(f"/v1/jobs/{job_id}", headers=a)).json()
    url = job["results"][0]["url"]
    assert (await client.get(f"/v1/jobs/{job_id}", headers=b)).status_code == 404
    assert (await client.get(url, headers=b)).status_code == 404
    assert (await client.delete(f"/v1/jobs/{job_id}", headers=b)).status_code == 404
    assert (await client.get("/v1/jobs", headers=b)).json()["jobs"] == []
    # still there for its owner
    assert [j["id"] for j in (await client.get("/v1/jobs", headers=a)).json()["jobs"]] == [job_id]
    assert (await client.get(url, headers=a)).status_code == 200


def test_keys_parse_from_pairs_or_json_and_compare_by_value():
    pairs = Settings(api_keys="k1=lab-a, k2=lab-b")
    assert pairs.api_keys == {"k1": "lab-a", "k2": "lab-b"}
    assert Settings(api_keys='{"k1": "lab-a"}').api_keys == {"k1": "lab-a"}
    assert tenant_for_key(pairs, "k2") == "lab-b"
    with pytest.raises(Problem) as caught:
        tenant_for_key(pairs, "k")
    assert caught.value.status == 401
    assert tenant_for_key(Settings(), None) == "default"
    with pytest.raises(ValueError, match="key=tenant"):
        Settings(api_keys="just-a-key")


def test_settings_come_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("FIBERTENSOR_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("FIBERTENSOR_BROKER_URL", "redis://r:6379/1")
    monkeypatch.setenv("FIBERTENSOR_MAX_UPLOAD_BYTES", "1000")
    monkeypatch.setenv("FIBERTENSOR_API_KEYS", "abc=lab")
    settings = Settings()
    assert (settings.data_dir, settings.broker_url, settings.max_upload_bytes) == (tmp_path, "redis://r:6379/1", 1000)
    assert settings.api_keys == {"abc": "lab"} and not settings.embedded_broker
    with pytest.raises(ValueError, match="job_time_limit < visibility_timeout"):
        Settings(job_time_limit=100, job_soft_time_limit=50, visibility_timeout=100)
