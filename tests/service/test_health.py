"""Probes: /healthz always answers; /readyz needs a reachable broker and a live worker."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.anyio


async def test_healthz(client):
    response = await client.get("/healthz")
    assert response.status_code == 200 and response.json() == {"status": "ok"}


async def test_readyz_without_a_worker_is_503(client):
    response = await client.get("/readyz")
    assert response.status_code == 503
    assert response.headers["content-type"] == "application/problem+json"
    assert "no worker answered" in response.json()["detail"]
    assert "fibertensor worker" in response.json()["detail"]
